package cli

import (
	"strconv"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/message"
)

// paramsText is a run's trigger params in one short phrase
// ("E2E_FOCUS=Job E2E_SKIP=Flaky"), or "" for none.
func paramsText(params []v1alpha1.EnvVar) string {
	kv := make([]string, len(params))
	for i, p := range params {
		kv[i] = p.Name + "=" + p.Value
	}
	return message.Truncate(strings.Join(kv, " "), 160)
}

// runName is "suite #n", with the run's params when it has some.
func runName(suite string, r *v1alpha1.TestRun) string {
	name := suite + " #" + strconv.FormatInt(r.Number, 10)
	if s := paramsText(r.Params); s != "" {
		name += " (" + s + ")"
	}
	return name
}
