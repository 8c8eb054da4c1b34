package cli

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
	"github.com/devloop-dev/devloop/test/builder"
)

var envCount atomic.Int64

// uniqueName names an environment in the operator's shared namespace.
func uniqueName(base string) string {
	return fmt.Sprintf("%s-%d", base, envCount.Add(1))
}

// appTree is a source directory: manifests, a site for the image, and
// files .gitignore and .devloopignore leave out.
func appTree(t *testing.T, page string) string {
	return appTreeFor(t, page, "web")
}

// appTreeFor is appTree with the ConfigMap named "<name>-config": two
// environments in one namespace may not both apply one object (the second
// would be refused, as it does not own it).
func appTreeFor(t *testing.T, page, name string) string {
	dir := testfiles.Tree(t, map[string]string{
		"deploy/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "-config\ndata:\n  greeting: hello\n",
		"site/index.html":    page,
		".gitignore":         "*.log\n/tmp/\n",
		".devloopignore":     "secret.txt\n",
		"debug.log":          "noise",
		"secret.txt":         "do not ship",
		"tmp/scratch":        "x",
		".git/HEAD":          "ref: refs/heads/main\n",
	})
	return dir
}

// pushedSpec is an environment the in-process operator reconciles: the
// pushed source gives a ConfigMap (component config) and the layer of an
// image (component web, after config).
func pushedSpec(host, repo string) v1alpha1.DevEnvironmentSpec {
	return builder.Env("", "").In(host).ServiceAccount("deployer").ImagePrefix(host+"/team").OCI("app", host+"/"+repo).
		Components(
			builder.Component("config", builder.Manifests("deploy")),
			builder.Component("web", builder.DependsOn("config"), builder.Images(builder.Image(repo+"-web", builder.Layer("site", "/srv/site")))),
		).Spec()
}

// artifactFiles lists the tree the operator fetches from the artifact at
// ref (directories end in "/"), through the real source store: mapped
// layers come back at their source paths.
func artifactFiles(t *testing.T, ref string) []string {
	t.Helper()
	repo, tag, _ := strings.Cut(ref[strings.LastIndex(ref, "/"):], ":")
	repo = ref[:strings.LastIndex(ref, "/")] + repo
	f := &source.Fetcher{Root: t.TempDir()}
	ctx := context.Background()
	r, err := f.Resolve(ctx, "ns", v1alpha1.Source{Name: "app", OCI: &v1alpha1.OCISource{Repository: repo, Tag: tag, Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.Fetch(ctx, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	err = filepath.WalkDir(a.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == a.Dir {
			return err
		}
		rel, _ := filepath.Rel(a.Dir, p)
		if d.IsDir() {
			rel += "/"
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func expectKstatus(t *testing.T, env *v1alpha1.DevEnvironment, want status.Status) {
	t.Helper()
	res, err := testenv.Kstatus(env)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != want {
		t.Fatalf("kstatus %s (%s), want %s", res.Status, res.Message, want)
	}
}

// push against the real registry and the real operator: the artifact
// without ignored files, the rollout followed to Ready, an unchanged push
// a no-op, and a push that breaks the build exits 1 with the reason.
func TestPushRollsOutAndFollowsToReady(t *testing.T) {
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	hello := uniqueName("hello")
	createEnv(t, ns, hello, pushedSpec(host, "hello-src"))
	dir := appTree(t, "<h1>v1</h1>")

	r := plugin(t, "push", dir, "--env", hello, "--source", "app", "-n", ns)
	if r.code != 0 {
		t.Fatalf("push:\n%s", r)
	}
	for _, want := range []string{"pushed " + host + "/hello-src:dev@", "following config, web", "Ready in", "pack ", "push ", "rollout "} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatal(r)
	}
	t.Logf("first push:\n%s", r.out)
	files := artifactFiles(t, host+"/hello-src:dev")
	want := []string{".devloopignore", ".gitignore", "deploy/", "deploy/config.yaml", "site/", "site/index.html"}
	if !slices.Equal(files, want) {
		t.Fatalf("artifact holds %v, want %v (.git, *.log, tmp/ and secret.txt left out)", files, want)
	}
	env := getEnv(t, ns, hello)
	if !ready(env) || !env.Status.Component("web").Ready() {
		t.Fatalf("not Ready after push returned: %+v", env.Status)
	}
	expectKstatus(t, env, status.CurrentStatus)

	// The same content again: nothing pushed, nothing requested.
	token := env.Annotations[v1alpha1.ReconcileRequestAnnotation]
	os.Chtimes(filepath.Join(dir, "site", "index.html"), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	r = plugin(t, "push", dir, "--env", hello, "--source", "app", "-n", ns)
	if r.code != 0 || !strings.HasPrefix(r.out, "unchanged: ") {
		t.Fatalf("unchanged push:\n%s", r)
	}
	if got := getEnv(t, ns, hello).Annotations[v1alpha1.ReconcileRequestAnnotation]; got != token {
		t.Fatalf("an unchanged push requested a reconcile (%s -> %s)", token, got)
	}

	// A tree without the image's layer path: the build fails, push says why.
	if err := os.RemoveAll(filepath.Join(dir, "site")); err != nil {
		t.Fatal(err)
	}
	r = plugin(t, "push", dir, "--env", hello, "--source", "app", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "Stalled (BuildFailed)") || !strings.Contains(r.err, "site") {
		t.Fatalf("want exit 1 naming the build failure and the missing path:\n%s", r)
	}
	t.Logf("failed push:\n%s", r)
	expectKstatus(t, getEnv(t, ns, hello), status.FailedStatus)
}

// --watch pushes on every change that is not ignored, pauses and resumes
// on p and r, and stops on q.
func TestPushWatch(t *testing.T) {
	host := testregistry.Start(t)
	ns := operatorNamespace(t)
	watched := uniqueName("watched")
	createEnv(t, ns, watched, pushedSpec(host, "watched-src"))
	dir := appTreeFor(t, "<h1>v1</h1>", watched)

	stdin, typed := io.Pipe()
	defer typed.Close()
	var out, errOut syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := testOptions()
	exited := startPlugin(ctx, stdin, &out, &errOut, opts, "push", dir, "--env", watched, "--source", "app", "--watch", "--debounce", "100ms", "-n", ns)
	rollouts := func() int { return strings.Count(out.String(), "Ready in") }
	pushes := func() int { return strings.Count(out.String(), "pushed "+host) }
	type_ := func(s string) {
		if _, err := io.WriteString(typed, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the first rollout", func() bool { return rollouts() == 1 && strings.Contains(out.String(), "watching ") })

	testfiles.Write(t, dir, map[string]string{"site/index.html": "<h1>v2</h1>"})
	waitUntil(t, "the rollout of the change", func() bool { return rollouts() == 2 })

	// Ignored files change nothing.
	testfiles.Write(t, dir, map[string]string{"debug.log": "more noise", "tmp/new": "y"})
	time.Sleep(600 * time.Millisecond) // several debounce periods
	if n := pushes(); n != 2 {
		t.Fatalf("an ignored change was pushed (%d pushes):\n%s", n, out.String())
	}

	type_("p")
	waitUntil(t, "pause", func() bool { return strings.Contains(out.String(), "paused") })
	testfiles.Write(t, dir, map[string]string{"site/index.html": "<h1>v3</h1>"})
	time.Sleep(600 * time.Millisecond)
	if n := pushes(); n != 2 {
		t.Fatalf("pushed while paused:\n%s", out.String())
	}
	type_("r")
	waitUntil(t, "the change made while paused", func() bool { return rollouts() == 3 })
	type_("q")
	if code := exited(); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	t.Logf("watch session:\n%s", out.String())
	expectKstatus(t, getEnv(t, ns, watched), status.CurrentStatus)
}

// Sources push cannot write to are refused with what to do instead; no
// operator or registry needed.
func TestPushRefusesSourcesItCannotWrite(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "team", teamSpec())
	dir := t.TempDir()
	for args, want := range map[string]string{
		"upstream": `source "upstream" of devenvironment/team has no oci repository (it is a git source): push works only for oci sources`,
		"nope":     `devenvironment/team has no source "nope": its oci sources are app`,
	} {
		r := plugin(t, "push", dir, "--env", "team", "--source", args, "-n", ns)
		if r.code != 1 || !strings.Contains(r.err, want) {
			t.Errorf("--source %s: want %q, got\n%s", args, want, r)
		}
	}
	r := plugin(t, "push", filepath.Join(dir, "missing"), "--env", "team", "--source", "app", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "is not a directory") {
		t.Errorf("missing dir:\n%s", r)
	}
}

// A registry speaking plain HTTP to a source that did not say insecure is
// refused before anything is pushed.
func TestPushRefusesPlainHTTPWithoutInsecure(t *testing.T) {
	host := testregistry.Start(t)
	ns := testenv.Namespace(t, k8s, "cli-")
	spec := pushedSpec(host, "plain-src")
	spec.Sources[0].OCI.Insecure = false
	createEnv(t, ns, "plain", spec)
	r := plugin(t, "push", appTree(t, "x"), "--env", "plain", "--source", "app", "-n", ns)
	if r.code != 1 || !strings.Contains(r.err, "insecure: true") {
		t.Fatalf("want a refusal naming insecure: true, got\n%s", r)
	}
}

// artifactLayers are the layer descriptors of the artifact at ref.
func artifactLayers(t *testing.T, ref string) []v1.Descriptor {
	t.Helper()
	m, err := testregistry.Pull(t, ref).Manifest()
	if err != nil || len(m.Layers) == 0 {
		t.Fatalf("manifest %+v, %v: want layers", m, err)
	}
	return m.Layers
}

// The registry on loopback gets the plain tar, and the files the image
// copies already laid out as its layer (build.PrebuildLayers);
// --compression=gzip (for a registry the address heuristic misjudges)
// gzips one layer of everything; a bad value is refused naming the flag.
func TestPushCompression(t *testing.T) {
	host := testregistry.Start(t)
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "packed", pushedSpec(host, "packed-src"))
	dir := appTree(t, "x")
	ref := host + "/packed-src:dev"
	for _, c := range []struct {
		flag   string
		want   types.MediaType
		mapped []string // the From of each mapped layer
	}{{"auto", types.OCIUncompressedLayer, []string{"site"}}, {"gzip", types.DockerLayer, nil}} {
		r := plugin(t, "push", dir, "--env", "packed", "--source", "app", "-n", ns, "--no-follow", "--compression", c.flag)
		if r.code != 0 {
			t.Fatalf("--compression %s:\n%s", c.flag, r)
		}
		layers := artifactLayers(t, ref)
		if got := layers[0].MediaType; got != c.want {
			t.Errorf("--compression %s: layer %s, want %s", c.flag, got, c.want)
		}
		var mapped []string
		for _, l := range layers[1:] {
			mapped = append(mapped, l.Annotations[source.AnnotationLayerFrom])
		}
		if !slices.Equal(mapped, c.mapped) {
			t.Errorf("--compression %s: mapped layers of %v, want %v", c.flag, mapped, c.mapped)
		}
		if files := artifactFiles(t, ref); !slices.Contains(files, "site/index.html") {
			t.Errorf("--compression %s: the fetched tree lacks site/index.html: %v", c.flag, files)
		}
	}
	r := plugin(t, "push", dir, "--env", "packed", "--source", "app", "-n", ns, "--compression", "zstd")
	if r.code == 0 || !strings.Contains(r.err, "--compression") {
		t.Errorf("--compression zstd: want a refusal naming the flag, got\n%s", r)
	}
}
