package testrun

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

// TokenHandled reports whether a token trigger value was handled for key.
func TokenHandled(env *v1alpha1.DevEnvironment, key, value string) bool {
	rec := tokenRecord(key, value)
	for _, t := range env.Status.HandledTriggerTokens {
		if t == rec {
			return true
		}
	}
	return false
}

// RecordToken remembers the token value handled for key, replacing the
// key's previous one.
func RecordToken(env *v1alpha1.DevEnvironment, key, value string) {
	kept := []string{tokenRecord(key, value)}
	for _, t := range env.Status.HandledTriggerTokens {
		if !strings.HasPrefix(t, key+"=") {
			kept = append(kept, t)
		}
	}
	env.Status.HandledTriggerTokens = kept
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
