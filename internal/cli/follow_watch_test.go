package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// TestFollowSeesAChangeAsItIsWritten: a follow learns of the
// environment's new status from a watch, not from its next read: with
// the poll interval an hour, `wait` still sees the environment become
// Ready and exits (before: it read once, then slept the hour).
func TestFollowSeesAChangeAsItIsWritten(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	opts := testOptions()
	opts.PollInterval = time.Hour
	out, errOut, wait := pluginInBackground(t, opts, "wait", "team", "-n", ns)
	waitUntil(t, "the first look", func() bool { return strings.Contains(out.String(), "waiting for the operator") })

	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "crds", Phase: v1alpha1.PhaseReady}, {Name: "web", Phase: v1alpha1.PhaseReady}}
		env.Status.ComponentsReady = "2/2"
		env.Status.ObservedGeneration = env.Generation
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "2/2 components ready")}
	})
	if code := wait(); code != 0 {
		t.Fatalf("wait exited %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "devenvironment/team Ready in") {
		t.Fatalf("no Ready line:\n%s", out.String())
	}
}

// TestFollowWithoutWatchReadsAgain: a user who may get an environment
// but not watch it (a Role with get alone) still follows it to Ready: the
// follow reads it every poll interval instead.
func TestFollowWithoutWatchReadsAgain(t *testing.T) {
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	user, err := testEnv.AddUser(envtest.User{Name: "getter-" + ns}, nil)
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "get-devenv"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"devenvironments"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "get-devenv"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "getter-" + ns}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}

	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(runCtx, []string{"wait", "team", "-n", ns, "--kubeconfig", path},
			genericiooptions.IOStreams{Out: out, ErrOut: errOut}, testOptions())
	}()
	waitUntil(t, "the first look", func() bool { return strings.Contains(out.String(), "waiting for the operator") })
	playOperator(t, ns, "team", func(env *v1alpha1.DevEnvironment) {
		env.Status.Components = []v1alpha1.ComponentStatus{{Name: "crds", Phase: v1alpha1.PhaseReady}, {Name: "web", Phase: v1alpha1.PhaseReady}}
		env.Status.ComponentsReady = "2/2"
		env.Status.ObservedGeneration = env.Generation
		env.Status.Conditions = []metav1.Condition{operatorCondition(env, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "2/2 components ready")}
	})
	if code := <-done; code != 0 {
		t.Fatalf("wait exited %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "devenvironment/team Ready in") {
		t.Fatalf("no Ready line:\n%s", out.String())
	}
}
