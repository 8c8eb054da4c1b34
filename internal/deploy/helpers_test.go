package deploy_test

import (
	"maps"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// webDeployment is the source file of a Deployment of the built web
// image, for an environment applying "deploy".
var webDeployment = map[string]string{"deploy/deployment.yaml": operatortest.WebDeployment}

// pushWebSource pushes WebEnv's source to ns with more files (a chart, a
// tree, manifests under deploy/) and returns the files, for a test that
// pushes a changed source, and the digest.
func pushWebSource(t *testing.T, ns string, more ...map[string]string) (map[string]string, v1.Hash) {
	t.Helper()
	files := operatortest.WebFiles("binary")
	for _, m := range more {
		maps.Copy(files, m)
	}
	return files, operatortest.AppFiles(t, ns, files)
}

// webManifestsEnv is WebEnv acting as the deployer, its component "web"
// applying the source's paths.
func webManifestsEnv(ns string, paths ...string) *v1alpha1.DevEnvironment {
	env := operatortest.AsDeployer(operatortest.WebEnv(ns))
	env.Spec.Components[0].Manifests.Paths = paths
	return env
}

// webHelmEnv is WebEnv acting as the deployer, its component "web"
// installing a chart instead of applying manifests.
func webHelmEnv(ns string, helm *v1alpha1.HelmSpec) *v1alpha1.DevEnvironment {
	env := operatortest.AsDeployer(operatortest.WebEnv(ns))
	env.Spec.Components[0].Manifests = nil
	env.Spec.Components[0].Helm = helm
	return env
}

// waitForWebDeploying waits until component "web" is deploying (rolling
// out, not yet available) and check (of it, if any) passes, and returns
// the environment.
func waitForWebDeploying(t *testing.T, key client.ObjectKey, check func(g Gomega, env *v1alpha1.DevEnvironment, c *v1alpha1.ComponentStatus)) *v1alpha1.DevEnvironment {
	t.Helper()
	return operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		c := env.Status.Component("web")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Phase).To(Equal(v1alpha1.PhaseDeploying), "message: %s", c.Message)
		if check != nil {
			check(g, env, c)
		}
	})
}

// rolledOut plays the Deployment controller for the Deployment name and
// waits until the environment is Ready for its generation and checks
// pass.
func rolledOut(t *testing.T, key client.ObjectKey, name string, checks ...func(g Gomega, env *v1alpha1.DevEnvironment)) *v1alpha1.DevEnvironment {
	t.Helper()
	operatortest.MarkDeploymentAvailable(t, key.Namespace, name)
	return operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		for _, check := range checks {
			check(g, env)
		}
	})
}

// expectInstalled is waitForWebDeploying's check for a chart: the release
// is installed, not only about to be.
func expectInstalled(g Gomega, _ *v1alpha1.DevEnvironment, c *v1alpha1.ComponentStatus) {
	g.Expect(c.Release).NotTo(BeNil())
	g.Expect(c.Release.Revision).To(BeNumerically(">", 0), "installed, not only about to be")
}
