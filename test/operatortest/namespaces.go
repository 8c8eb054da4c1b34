package operatortest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// DefaultDeployer is the ServiceAccount every test namespace has, acted
// as by environments that name none outside the real deploy engine's
// namespaces.
const DefaultDeployer = "devloop-default"

// Deployer is the ServiceAccount DeployNamespace makes, with every right in
// its namespace; Env(…).ServiceAccount(Deployer) names it.
const Deployer = "deployer"

// Namespace gives a test a namespace of its own, with its default
// deployer; the environments left in it are deleted when the test ends.
func Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "devenv-"}}
	if err := Admin.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	// The operator's ERROR lines about this namespace go to t's log.
	logTo(t, ns.Name)
	if err := testenv.CreateDeployer(context.Background(), Admin, ns.Name, DefaultDeployer); err != nil {
		t.Fatal(err)
	}
	// Environments a test leaves behind would keep polling (nothing rolls
	// out in envtest) and hold the workers the next tests need.
	t.Cleanup(func() {
		_ = Admin.DeleteAllOf(context.Background(), &v1alpha1.DevEnvironment{}, client.InNamespace(ns.Name))
	})
	return ns.Name
}

// DeployNamespace is a Namespace where the real deploy engine runs, with
// the ServiceAccount Deployer, which may do anything in it: the prologue
// of every deploy test.
func DeployNamespace(t testing.TB) string {
	t.Helper()
	ns := Namespace(t)
	UseDeployEngine(ns)
	CreateDeployer(t, ns, Deployer)
	return ns
}

// CreateDeployer makes a ServiceAccount in ns that may do anything in ns,
// as a tenant's deployer would (testenv.CreateDeployer).
func CreateDeployer(t testing.TB, ns, name string) {
	t.Helper()
	NewWithT(t).Expect(testenv.CreateDeployer(context.Background(), Admin, ns, name)).To(Succeed())
}

// CreateServiceAccount makes a ServiceAccount in ns with no rights.
func CreateServiceAccount(t testing.TB, ns, name string) {
	t.Helper()
	NewWithT(t).Expect(Admin.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
}
