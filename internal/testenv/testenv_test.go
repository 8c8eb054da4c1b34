package testenv

import (
	"testing"
	"time"
)

// TestEnvtestWaitsForABusyMachine: envtest's own defaults gave
// kube-apiserver 20 s to answer and the CRDs 10 s to be served; on 2 busy
// cores every suite failed to start. Start waits minutes, and an explicit
// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT is left to envtest to read.
func TestEnvtestWaitsForABusyMachine(t *testing.T) {
	t.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "")
	env := environment("assets")
	if env.ControlPlaneStartTimeout < 2*time.Minute || env.CRDInstallOptions.MaxTime < 2*time.Minute {
		t.Errorf("start timeout %s, CRD wait %s: want at least 2m each", env.ControlPlaneStartTimeout, env.CRDInstallOptions.MaxTime)
	}
	if env.ControlPlaneStopTimeout < time.Minute {
		t.Errorf("stop timeout %s: want at least 1m", env.ControlPlaneStopTimeout)
	}

	t.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "7m")
	if got := environment("assets").ControlPlaneStartTimeout; got != 0 {
		t.Errorf("start timeout %s with KUBEBUILDER_CONTROLPLANE_START_TIMEOUT set: want it left to envtest (0)", got)
	}
}
