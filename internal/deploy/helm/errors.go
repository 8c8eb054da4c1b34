package helm

import (
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/devloop-dev/devloop/internal/fault"
)

// Failure says why a Helm action failed, for the caller's retry counting.
type Failure string

const (
	// FailureNone: the last action succeeded.
	FailureNone Failure = ""
	// FailureHook: a hook failed; retrying may help until the caller's
	// retries run out, then it is permanent.
	FailureHook Failure = "HookFailed"
	// FailureForbidden: the API server refused the impersonated identity.
	FailureForbidden Failure = "Forbidden"
	// FailureUnavailable: the API server (or release storage) could not
	// be reached.
	FailureUnavailable Failure = "Unavailable"
	// FailureAction: any other failure of the action.
	FailureAction Failure = "ActionFailed"
)

// Helm formats wrapped errors with %s in places (hooks, for one), which
// breaks the error chain, so the API server's messages are also
// recognized by their text.
var (
	forbiddenPattern = regexp.MustCompile(`User "([^"]+)" cannot (\S+) resource "([^"]+)"(?: in API group "([^"]*)")?(?: in the namespace "([^"]+)")?`)
	hookPattern      = regexp.MustCompile(`(?i)\b(pre|post)-(install|upgrade|rollback|delete)\b|\bhook\b`)
	unavailableText  = []string{"connection refused", "connection reset", "i/o timeout", "no such host",
		"TLS handshake timeout", "server is currently unable to handle", "client connection lost", "http2: server sent GOAWAY"}
)

// classifyHelm maps an error of a Helm action (or of release storage) to
// a Failure and a fault class: Forbidden is permanent with the verb and
// resource named, connection problems are Unavailable, everything else
// (hooks included) is a plain error the caller retries and counts.
func classifyHelm(action Action, err error) (Failure, error) {
	if err == nil {
		return FailureNone, nil
	}
	if fault.IsPermanent(err) {
		// Refused on purpose (a hook named like someone else's object):
		// already says what and why.
		return FailureAction, fmt.Errorf("%s: %w", action, err)
	}
	msg := err.Error()
	if m := forbiddenPattern.FindStringSubmatch(msg); m != nil || apierrors.IsForbidden(err) {
		return FailureForbidden, fault.Permanent(fmt.Errorf("%s: %s", action, forbiddenMessage(m, err)))
	}
	if helmUnavailable(err) {
		return FailureUnavailable, fault.Unavailable(fmt.Errorf("%s: %w", action, err))
	}
	if hookPattern.MatchString(msg) {
		return FailureHook, fmt.Errorf("%s: %w", action, err)
	}
	return FailureAction, fmt.Errorf("%s: %w", action, err)
}

// forbiddenMessage says who may not do what where, e.g. "forbidden:
// serviceaccount team-a/deployer cannot create deployments.apps in
// namespace team-a".
func forbiddenMessage(m []string, err error) string {
	if m == nil {
		return err.Error()
	}
	who := m[1]
	if rest, ok := strings.CutPrefix(who, "system:serviceaccount:"); ok {
		who = "serviceaccount " + strings.Replace(rest, ":", "/", 1)
	} else {
		who = "user " + who
	}
	res := m[3]
	if m[4] != "" {
		res += "." + m[4]
	}
	where := "at cluster scope"
	if m[5] != "" {
		where = "in namespace " + m[5]
	}
	return fmt.Sprintf("forbidden: %s cannot %s %s %s", who, m[2], res, where)
}

// helmUnavailable is fault.APIServerUnavailable for Helm's errors, which often lose the
// chain (formatted with %s), so their text is read too.
func helmUnavailable(err error) bool {
	if fault.APIServerUnavailable(err) {
		return true
	}
	msg := err.Error()
	for _, s := range unavailableText {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
