package testenv

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running envtest API server and an administrator's connection
// to it: what every envtest suite starts from.
type Env struct {
	*envtest.Environment
	// Config and Client reach the API server as an administrator.
	Config *rest.Config
	Client client.Client

	cleanups []func()
}

// StartEnv starts envtest (Start) and connects an administrator's client
// using Scheme(). Stop it when done.
func StartEnv() (*Env, error) {
	api, err := Start()
	if err != nil {
		return nil, err
	}
	k8s, err := client.New(api.Config, client.Options{Scheme: Scheme()})
	if err != nil {
		_ = api.Stop()
		return nil, fmt.Errorf("connecting to envtest: %w", err)
	}
	return &Env{Environment: api, Config: api.Config, Client: k8s}, nil
}

// Cleanup registers f to run when the environment stops, before the API
// server does, last registered first: an operator the suite started must
// stop while it can still reach its API server.
func (e *Env) Cleanup(f func()) { e.cleanups = append(e.cleanups, f) }

// Stop runs the cleanups and stops the API server.
func (e *Env) Stop() error {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
	return e.Environment.Stop()
}

// Main is the TestMain of a package whose tests share one API server: it
// starts envtest, calls setup with it, runs the package's tests and stops
// envtest, also when setup fails. It exits the process with the tests'
// code, or 1 when envtest or setup failed.
func Main(m *testing.M, setup func(*Env) error) {
	os.Exit(Run(m, setup))
}

// Run is Main without the exit, for a TestMain that has work of its own
// to undo after envtest has stopped.
func Run(m *testing.M, setup func(*Env) error) int {
	env, err := StartEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	if err := setup(env); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// RunWithClient is Run for a setup that only keeps the API server and the
// administrator's client.
func RunWithClient(m *testing.M, ready func(*envtest.Environment, client.Client)) int {
	return Run(m, func(e *Env) error {
		ready(e.Environment, e.Client)
		return nil
	})
}
