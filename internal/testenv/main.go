package testenv

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RunWithClient is the TestMain of a package that needs only an API
// server: it starts envtest, calls ready with it and a client using
// Scheme(), runs the package's tests and stops envtest, even when starting
// the client fails. It returns the exit code for os.Exit.
func RunWithClient(m *testing.M, ready func(*envtest.Environment, client.Client)) int {
	env, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	k8s, err := client.New(env.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready(env, k8s)
	return m.Run()
}
