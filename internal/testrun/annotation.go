package testrun

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// The trigger annotation's protocol, the one copy the operator and the
// kubectl plugin share. A plain trigger (`trigger=unit-tests`) is taken
// into TriggerPendingAnnotation under an id, its runs recorded with that
// id, then it is removed; a token trigger (`unit-tests@<token>`) is never
// moved, and status records the value handled per key.

// TriggerKeys are the annotations a trigger may be written under.
var TriggerKeys = []string{v1alpha1.TriggerAnnotation, v1alpha1.TriggerAnnotationPrefixed}

// IsToken reports whether a trigger value is a token trigger, handled once
// per token and left in place.
func IsToken(value string) bool { return strings.Contains(value, "@") }

// Pending is the value of devloop.dev/trigger-pending.
type Pending struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Encode is the annotation value of p.
func (p Pending) Encode() (string, error) {
	b, err := json.Marshal(p)
	return string(b), err
}

// ReadPending parses the pending annotation; a value the operator cannot
// read (edited by hand) is reported as an error with ok true, so it can be
// dropped rather than wedge every later trigger.
func ReadPending(env *v1alpha1.DevEnvironment) (p Pending, raw string, ok bool, err error) {
	raw, ok = env.Annotations[v1alpha1.TriggerPendingAnnotation]
	if !ok {
		return p, "", false, nil
	}
	if err := json.Unmarshal([]byte(raw), &p); err != nil || p.ID == "" {
		return p, raw, true, fmt.Errorf("annotation %s=%q is not what the operator wrote; it is dropped", v1alpha1.TriggerPendingAnnotation, raw)
	}
	return p, raw, true, nil
}

// maxTokenRecord is the longest entry of status.handledTriggerTokens the
// CRD accepts (items:MaxLength): one longer fails the whole status write.
const maxTokenRecord = 1100

// tokenRecord is the entry of status.handledTriggerTokens for a token
// value handled for key: "key=value", or, when that is longer than the
// CRD accepts (a value past MaxValue, refused but still recorded so it is
// not handled again), "key=sha256:<hex of value>".
func tokenRecord(key, value string) string {
	if rec := key + "=" + value; len(rec) <= maxTokenRecord {
		return rec
	}
	sum := sha256.Sum256([]byte(value))
	return key + "=sha256:" + hex.EncodeToString(sum[:])
}

// MaxTokens is how many token values are remembered per key: an older
// token re-applied (a GitOps revert to `@t1` after `@t2`) is not run
// again while it is among them.
const MaxTokens = 16

// A key's tokens are kept in status.handledTriggerTokens as two entries:
// its latest value, "key=value" (what Unconsumed and a reader compare
// with), and up to MaxTokens-1 earlier ones, newest first, in one entry
// "key#<hash>,<hash>,...": each the first 16 hex digits of the value's
// SHA-256. Two keys' histories cost about 600 bytes of status, and the
// CRD's worst case grows by two entries, not by thirty.

// tokenHash is the short hash an earlier token is kept as.
func tokenHash(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])[:16]
}

// earlierHash is the history hash of the value a latest record holds.
func earlierHash(key, latest string) string {
	v := strings.TrimPrefix(latest, key+"=")
	if hashed, ok := strings.CutPrefix(v, "sha256:"); ok && !IsToken(v) {
		// A value too long to keep (tokenRecord): its full hash is
		// kept, which starts with the short one.
		return hashed[:min(16, len(hashed))]
	}
	return tokenHash(v)
}

// history is the key's earlier token hashes, newest first.
func history(env *v1alpha1.DevEnvironment, key string) []string {
	for _, t := range env.Status.HandledTriggerTokens {
		if list, ok := strings.CutPrefix(t, key+"#"); ok && list != "" {
			return strings.Split(list, ",")
		}
	}
	return nil
}

// TokenHandled reports whether a token trigger value was handled for key:
// it is the key's latest, or one of its earlier remembered ones.
func TokenHandled(env *v1alpha1.DevEnvironment, key, value string) bool {
	return TokenIsLatest(env, key, value) || slices.Contains(history(env, key), tokenHash(value))
}

// TokenIsLatest reports whether value is the token last handled for key.
func TokenIsLatest(env *v1alpha1.DevEnvironment, key, value string) bool {
	return slices.Contains(env.Status.HandledTriggerTokens, tokenRecord(key, value))
}

// RecordToken remembers the token value handled for key as its latest;
// the previous latest becomes the newest earlier one, and the oldest
// past MaxTokens is forgotten.
func RecordToken(env *v1alpha1.DevEnvironment, key, value string) {
	rec := tokenRecord(key, value)
	earlier := history(env, key)
	var others []string
	for _, t := range env.Status.HandledTriggerTokens {
		switch {
		case strings.HasPrefix(t, key+"="):
			if t != rec {
				earlier = append([]string{earlierHash(key, t)}, earlier...)
			}
		case strings.HasPrefix(t, key+"#"):
		default:
			others = append(others, t)
		}
	}
	mine := tokenHash(value)
	earlier = slices.DeleteFunc(earlier, func(h string) bool { return h == mine })
	earlier = earlier[:min(len(earlier), MaxTokens-1)]
	kept := []string{rec}
	if len(earlier) > 0 {
		kept = append(kept, key+"#"+strings.Join(earlier, ","))
	}
	env.Status.HandledTriggerTokens = append(kept, others...)
}

// Unconsumed is the trigger annotation the operator has not consumed yet
// ("key=value"), or "": a plain trigger until the operator moves it into
// pending, a token trigger until status records it as handled.
func Unconsumed(env *v1alpha1.DevEnvironment) string {
	for _, key := range TriggerKeys {
		v := env.Annotations[key]
		if v == "" || (IsToken(v) && (TokenHandled(env, key, v) || v == env.Status.LastHandledTrigger)) {
			continue
		}
		return key + "=" + v
	}
	return ""
}
