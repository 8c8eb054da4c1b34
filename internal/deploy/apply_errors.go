package deploy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/message"
)

// forbiddenUser picks the user and verb out of the API server's Forbidden
// message: `User "system:serviceaccount:a:b" cannot patch resource ...`.
var forbiddenUser = regexp.MustCompile(`User "([^"]*)" cannot (\S+) resource`)

// classify maps an API error of verb on ref to a fault class, with a
// message that names the object:
//   - Forbidden: Permanent, naming the verb, resource, namespace and user,
//     since only an RBAC change (which does not touch the spec) fixes it —
//     the next spec or RBAC change is picked up by the periodic resync.
//   - Invalid, BadRequest, unknown kinds, missing namespaces: Permanent.
//   - unreachable, overloaded or timing-out server: Unavailable.
func classify(c any, err error, verb string, ref ObjRef) error {
	if err == nil {
		return nil
	}
	what := describe(c, ref)
	switch {
	case apierrors.IsForbidden(err):
		user := ""
		if m := forbiddenUser.FindStringSubmatch(err.Error()); m != nil {
			user, verb = " as "+m[1], m[2]
		}
		ns := ""
		if ref.Namespace != "" {
			ns = " in namespace " + ref.Namespace
		}
		return fault.Permanent(fmt.Errorf("forbidden: cannot %s %s%s%s (%s): %w", verb, resourceName(c, ref), ns, user, ref.Name, err))
	case apierrors.IsInvalid(err):
		return fault.Permanent(fmt.Errorf("%s %s: %s", verb, what, invalidCauses(err)))
	case apierrors.IsBadRequest(err), meta.IsNoMatchError(err),
		apierrors.IsNotFound(err) && verb == "patch": // the namespace is missing
		return fault.Permanent(fmt.Errorf("%s %s: %w", verb, what, err))
	case fault.APIServerUnavailable(err):
		return fault.Unavailable(fmt.Errorf("%s %s: %w", verb, what, err))
	}
	return fmt.Errorf("%s %s: %w", verb, what, err)
}

// maxCauses bounds the causes an Invalid answer is summarized with.
const maxCauses = 4

// invalidCauses words an Invalid answer as "field: what is wrong", one
// cause each, without the values the API server quotes back (a whole pod
// template, printed as a Go struct): status stays short and readable.
func invalidCauses(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return message.Truncate(err.Error(), 512)
	}
	var parts []string
	for i, c := range status.Status().Details.Causes {
		if i == maxCauses {
			parts = append(parts, fmt.Sprintf("and %d more", len(status.Status().Details.Causes)-i))
			break
		}
		msg := c.Message
		if rest, ok := strings.CutPrefix(msg, "Invalid value: "); ok {
			// "Invalid value: <value>: <detail>": keep the detail.
			if j := strings.LastIndex(rest, ": "); j >= 0 {
				msg = rest[j+2:]
			} else {
				msg = "invalid value"
			}
		}
		msg = message.Truncate(strings.Join(strings.Fields(msg), " "), 200)
		if c.Field != "" {
			msg = c.Field + ": " + msg
		}
		parts = append(parts, msg)
	}
	return "invalid: " + strings.Join(parts, "; ")
}
