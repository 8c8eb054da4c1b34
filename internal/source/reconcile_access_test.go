package source_test

import (
	"context"
	"crypto/subtle"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// privateGitServer serves a one-commit repository holding files over
// smart HTTP behind basic auth, as a private repository on a forge; it
// returns the repository's URL and the commit.
func privateGitServer(t *testing.T, user, password string, files map[string]string) (string, string) {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed: the git HTTP server runs git http-backend")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "private")
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "a", Email: "a@example.com", When: time.Now()}
	commit, err := wt.Commit("private", &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{
		Path: gitBin,
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		u, p, ok := req.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u+"\x00"+p), []byte(user+"\x00"+password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/private", commit.String()
}

// gitEnv deploys the manifests under deploy/ of a git source pinned to
// commit.
func gitEnv(ns, name, url, commit string, secret *v1alpha1.LocalObjectReference, sources ...v1alpha1.Source) *v1alpha1.DevEnvironment {
	sources = append(sources, v1alpha1.Source{Name: "app", Git: &v1alpha1.GitSource{
		URL: url, Ref: &v1alpha1.GitRef{Commit: commit}, SecretRef: secret}})
	env := operatortest.Env(ns, name).Deployer().Components(operatortest.Manifests("config", "deploy")).Obj()
	env.Spec.Sources = sources
	return env
}

// Crossing 1 of issue 17: the source store is shared by every
// environment, and a pinned commit needs no resolution. Tenant A, with
// credentials, fetches a commit of its private repository; tenant B, in
// another namespace and without credentials, pinning the same commit (in
// full or as a short SHA) must get nothing of it: a Stalled condition
// naming the field, and no object from the private content.
func TestSourceCacheIsNotServedToATenantWithoutAccess(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const user, password = "tenant-a", "a-Pa55word"
	url, commit := privateGitServer(t, user, password, map[string]string{
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: private-settings}\ndata: {token: private-value}\n",
	})

	nsA, nsB := operatortest.Namespace(t), operatortest.Namespace(t)
	for _, ns := range []string{nsA, nsB} {
		operatortest.UseDeployEngine(ns)
		operatortest.CreateDeployer(t, ns, "deployer")
	}
	g.Expect(operatortest.Admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "git-creds"},
		StringData: map[string]string{"username": user, "password": password},
	})).To(Succeed())

	a := gitEnv(nsA, "tenant-a", url, commit, &v1alpha1.LocalObjectReference{Name: "git-creds"})
	g.Expect(operatortest.Admin.Create(ctx, a)).To(Succeed())
	operatortest.WaitForEnv(t, client.ObjectKeyFromObject(a), func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "private-settings"}, &corev1.ConfigMap{})).To(Succeed())

	// B's first source is a public one of its own, so the refused one is
	// spec.sources[1].
	public := operatortest.OCISource("public", operatortest.Registry.Host+"/"+nsB+"/src", "dev")
	operatortest.Registry.PushSource(t, nsB+"/src", "dev", map[string]string{"README": "public"})
	for _, tc := range []struct{ name, commit string }{
		{"tenant-b", commit},
		{"tenant-b-short", commit[:7]},
	} {
		b := gitEnv(nsB, tc.name, url, tc.commit, nil, public)
		g.Expect(operatortest.Admin.Create(ctx, b)).To(Succeed())
		operatortest.WaitForEnv(t, client.ObjectKeyFromObject(b), func(g Gomega, env *v1alpha1.DevEnvironment) {
			stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
			g.Expect(stalled).NotTo(BeNil(), "conditions: %s", operatortest.ConditionsSummary(env))
			g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonSourceFailed))
			g.Expect(stalled.Message).To(ContainSubstring("spec.sources[1].git"))
			g.Expect(stalled.Message).To(ContainSubstring("authentication required"))
			g.Expect(stalled.Message).NotTo(ContainSubstring("private-value"))
			for _, st := range env.Status.Sources {
				if st.Name == "app" {
					g.Expect(st.Digest).To(BeEmpty(), "B learned the digest of A's content")
				}
			}
		})
	}
	g.Consistently(func() bool {
		return apierrors.IsNotFound(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "private-settings"}, &corev1.ConfigMap{}))
	}, "500ms").Should(BeTrue(), "tenant B deployed tenant A's private content")

	// A's entry is in the store until A is deleted; then nobody uses it.
	entries := func() []string {
		names, _ := filepath.Glob(filepath.Join(operatortest.Reconciler.Sources.(*source.Resolver).Fetcher.Root, "git-"+commit+"-*"))
		return names
	}
	g.Expect(entries()).To(HaveLen(1))
	g.Expect(operatortest.Admin.Delete(ctx, a)).To(Succeed())
	operatortest.ExpectEnvGone(t, nsA, "tenant-a")
	g.Eventually(entries, operatortest.Timeout).Should(BeEmpty(), "a deleted environment's source stays in the store")
}
