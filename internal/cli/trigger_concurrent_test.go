package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// TestConcurrentTriggersAreEachRecordedOnce: 20 `kubectl devloop trigger`
// calls at once against the real operator. Each waits until the one
// before it was consumed and writes with the resourceVersion it read, so
// every request is recorded exactly once: the runs of the suite answer 20
// requests, no more, no fewer. (Raw `kubectl annotate --overwrite` calls
// are last-writer-wins on the server; the README says so.)
func TestConcurrentTriggersAreEachRecordedOnce(t *testing.T) {
	ns := operatorNamespace(t)
	const calls = 20
	createEnv(t, ns, "concurrent", builder.Env("", "").ServiceAccount("deployer").
		Suites(builder.ImageSuite("unit", "registry.test/busybox:1.36", "true")).Spec())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waits := make([]func() int, calls)
	outs := make([]*syncBuffer, calls)
	for i := range calls {
		outs[i] = &syncBuffer{}
		waits[i] = startPlugin(ctx, nil, outs[i], outs[i], testOptions(), "trigger", "concurrent", "unit", "--no-follow", "-n", ns)
	}
	for i, wait := range waits {
		if code := wait(); code != 0 {
			t.Fatalf("call %d exited %d:\n%s", i, code, outs[i].String())
		}
	}
	var requests int32
	waitUntil(t, fmt.Sprintf("%d requests recorded", calls), func() bool {
		env := getEnv(t, ns, "concurrent")
		if _, pending := env.Annotations[v1alpha1.TriggerPendingAnnotation]; pending || env.Annotations[v1alpha1.TriggerAnnotation] != "" {
			return false
		}
		requests = 0
		if st := env.Status.Test("unit"); st != nil {
			for _, r := range st.Runs {
				requests += r.Requests
			}
		}
		return requests >= calls
	})
	if requests != calls {
		t.Fatalf("the runs answer %d requests; want exactly %d", requests, calls)
	}
}
