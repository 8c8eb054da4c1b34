package operatortest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/identity"
)

// FakeExec plays the kubelet's exec for warm builders: envtest runs no
// pods. Each call is recorded and answered by the function a test gave
// Answer (every step succeeds until one did), after checking the step
// runs in the container it belongs in.
type FakeExec struct {
	mu    sync.Mutex
	calls [][]string
	run   func(command []string, stdout, stderr io.Writer) error
	// real lists namespaces whose execs go to the API server as the
	// tenant (which refuses them or finds no kubelet).
	real map[string]bool
	// hang lists namespaces whose build command runs until its context
	// ends.
	hang map[string]bool
	// adopted are the builds namespaces' claims adopt (ClaimAdopts).
	adopted map[string]build.WarmClaim
}

func (f *FakeExec) Exec(ctx context.Context, t *identity.Tenant, namespace, pod, container string, command []string, stdout, stderr io.Writer) error {
	f.mu.Lock()
	f.calls = append(f.calls, command)
	run, real, hang := f.run, f.real[namespace], f.hang[namespace]
	adopted, adopt := f.adopted[namespace]
	f.mu.Unlock()
	if real {
		return t.Exec(ctx, namespace, pod, container, command, stdout, stderr)
	}
	if hang && IsStep(command, build.WarmStepRun) {
		// What the go command prints with -v of the packages it
		// compiled, then a compile that does not end.
		if strings.Contains(strings.Join(command, " "), "--count-packages") {
			// What the helper prints when asked to count the image's
			// packages first (helper/countpackages.go; the helper's
			// tests count a real tree).
			fmt.Fprintf(stderr, "%s 1180 %s\n", build.PackagesTotalPrefix, build.PackagesTotalSuffix)
		}
		fmt.Fprint(stderr, "go: downloading k8s.io/api v0.34.0\nruntime\nk8s.io/api/core/v1\n")
		fmt.Fprintln(stderr, "compiling forever")
		<-ctx.Done()
		return ctx.Err()
	}
	step, token := flagValue(command, "--step"), flagValue(command, "--token")
	// Each step runs where WarmClaimStep and WarmBuildSteps say:
	// credentials only in the agent, the build command only in the build
	// container.
	want := map[string]string{build.WarmStepClaim: build.ContainerWarm, build.WarmStepFetch: build.ContainerWarmAgent,
		build.WarmStepRun: build.ContainerWarm, build.WarmStepPush: build.ContainerWarmAgent}[step]
	if want == "" || container != want {
		return fmt.Errorf("step %q exec'd into container %q", step, container)
	}
	if step == build.WarmStepClaim {
		// A new build, as the helper claims one in a builder nothing
		// else runs in; or the build ClaimAdopts gave.
		answer := build.WarmClaim{Token: token, Started: time.Now()}
		if adopt {
			answer = adopted
		}
		claim, _ := json.Marshal(answer)
		_, err := fmt.Fprintf(stdout, "%s\n", claim)
		return err
	}
	// Until a test scripts an answer (Answer), every step succeeds
	// saying nothing: a warm build still running when the tests end, or
	// started by a test that only looks at the builder pod, must not
	// depend on which test ran before it in the same process.
	if run == nil {
		return nil
	}
	return run(command, stdout, stderr)
}

// flagValue is the value after name in command.
func flagValue(command []string, name string) string {
	for i := range command[:len(command)-1] {
		if command[i] == name {
			return command[i+1]
		}
	}
	return ""
}

// IsStep reports whether command is the warm build's step.
func IsStep(command []string, step string) bool {
	return strings.Contains(strings.Join(command, " "), "--step "+step)
}

// HangIn makes ns's build commands run until their context ends.
func (f *FakeExec) HangIn(ns string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hang == nil {
		f.hang = map[string]bool{}
	}
	f.hang[ns] = true
}

// ClaimAdopts makes ns's claims answer claim, as the helper does when a
// build of the same inputs an earlier operator process started still runs.
func (f *FakeExec) ClaimAdopts(ns string, claim build.WarmClaim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.adopted == nil {
		f.adopted = map[string]build.WarmClaim{}
	}
	f.adopted[ns] = claim
}

// ExecForReal sends ns's execs to the API server.
func (f *FakeExec) ExecForReal(ns string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.real == nil {
		f.real = map[string]bool{}
	}
	f.real[ns] = true
}

// Answer makes run answer the push step.
func (f *FakeExec) Answer(run func(command []string, stdout, stderr io.Writer) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.run = run
}

// CallsWith counts the calls whose command line contains s.
func (f *FakeExec) CallsWith(s string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.Contains(strings.Join(c, " "), s) {
			n++
		}
	}
	return n
}

// Calls are the command lines exec'd so far.
func (f *FakeExec) Calls() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.calls...)
}
