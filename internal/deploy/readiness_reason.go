package deploy

import (
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/devloop-dev/devloop/internal/message"
)

// maxReasonLen bounds an object's reason in a status line: the
// component's message holds a few of them.
const maxReasonLen = 256

// withOwnReason is why an object is not Current, for its status line:
// kstatus's message, or, when kstatus has none (a Ready=False condition
// without a message: GPU Operator's ClusterPolicy puts its cause in an
// Error condition), kstatus's verdict and the object's own reason.
func withOwnReason(o *unstructured.Unstructured, res *status.Result) string {
	if res.Message != "" {
		return message.Truncate(oneLine(res.Message), maxReasonLen)
	}
	own := ownReason(o)
	if own == "" {
		return string(res.Status)
	}
	return message.Truncate(string(res.Status)+": "+own, maxReasonLen)
}

// troubleTypes are condition types that, True, say what is wrong.
var troubleTypes = map[string]bool{"Error": true, "Failed": true, "Failure": true, "Degraded": true, "Stalled": true}

// ownReason is what an object says of itself: the reason and message of
// its first condition reporting trouble (an Error, Failed, Degraded or
// Stalled condition that is True; a Ready or Available one that is not),
// one with a message preferred; else its status.state or status.phase.
func ownReason(o *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	var withReason string
	for _, wantTrue := range []bool{true, false} {
		for _, c := range conds {
			m, _ := c.(map[string]any)
			typ, _ := m["type"].(string)
			st, _ := m["status"].(string)
			trouble := wantTrue && troubleTypes[typ] && st == "True" ||
				!wantTrue && (typ == "Ready" || typ == "Available") && st != "True"
			if !trouble {
				continue
			}
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			if msg = oneLine(msg); msg != "" {
				return joinNonEmpty(reason, msg)
			}
			if withReason == "" && reason != "" {
				withReason = typ + " " + reason
			}
		}
	}
	if withReason != "" {
		return withReason
	}
	for _, field := range []string{"state", "phase"} {
		if v, _, _ := unstructured.NestedString(o.Object, "status", field); v != "" {
			return "status." + field + " " + v
		}
	}
	return ""
}

func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ": ")
}
