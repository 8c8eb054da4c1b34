package testrun_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/internal/testrun"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// hostPod runs a container of a Job's pod on this host with the paths it
// would see: each volume mount is a host directory, a claim's subPath
// root/claims/<claim>/<subPath> (the same for every pod mounting it),
// any other volume root/<pod>/<volume>/<subPath>, a path under no mount
// root/<pod>/rootfs/<path>. The workspace is one directory for every pod
// (each pod's fetch fills /workspace with the same source at the same
// path, and Go keys a package's objects by its directory).
type hostPod struct {
	root, pod string
	spec      corev1.PodSpec
	c         *corev1.Container
}

func (h hostPod) path(p string) string {
	if p == pods.WorkspaceDir || strings.HasPrefix(p, pods.WorkspaceDir+"/") {
		return filepath.Join(h.root, p)
	}
	var best *corev1.VolumeMount
	for i, m := range h.c.VolumeMounts {
		if (p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/")) && (best == nil || len(m.MountPath) > len(best.MountPath)) {
			best = &h.c.VolumeMounts[i]
		}
	}
	if best == nil {
		return filepath.Join(h.root, h.pod, "rootfs", p)
	}
	base := filepath.Join(h.root, h.pod, best.Name)
	for _, v := range h.spec.Volumes {
		if v.Name == best.Name && v.PersistentVolumeClaim != nil {
			base = filepath.Join(h.root, "claims", v.PersistentVolumeClaim.ClaimName)
		}
	}
	return filepath.Join(base, best.SubPath, strings.TrimPrefix(p, best.MountPath))
}

// env is the container's environment on the host: its paths mapped, its
// GOCACHEPROG's helper binary this test binary (TestMain runs the step)
// and its team cache teamCache; then what the image would give (PATH,
// no host Go settings) and -x to count compiles.
func (h hostPod) env(t *testing.T, teamCache string) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "GOTOOLCHAIN=local", "GOPROXY=off", "GOENV=off", "CGO_ENABLED=0",
		"GOPATH=" + h.path("/go"), "TMPDIR=" + h.path("/tmp")}
	for _, e := range h.c.Env {
		v := e.Value
		switch {
		case e.Name == "GOCACHEPROG":
			f := strings.Fields(v)
			if f[0] != pods.ToolsHelper {
				t.Fatalf("GOCACHEPROG runs %s, not the installed helper %s", f[0], pods.ToolsHelper)
			}
			f[0] = self
			for i := 1; i < len(f); i++ {
				switch {
				case f[i-1] == "--url":
					f[i] = teamCache
				case strings.HasPrefix(f[i], "/"):
					f[i] = h.path(f[i])
				}
			}
			token := h.path(pods.CacheTokenDir + "/token")
			NewWithT(t).Expect(os.MkdirAll(filepath.Dir(token), 0o755)).To(Succeed())
			NewWithT(t).Expect(os.WriteFile(token, []byte("token"), 0o600)).To(Succeed())
			v = strings.Join(f, " ")
		case strings.HasPrefix(v, "/"):
			v = h.path(v)
		}
		env = append(env, e.Name+"="+v)
	}
	for _, p := range []string{h.path("/tmp"), h.path(v1alpha1.BuilderHome)} {
		NewWithT(t).Expect(os.MkdirAll(p, 0o755)).To(Succeed())
	}
	for _, m := range h.c.VolumeMounts {
		NewWithT(t).Expect(os.MkdirAll(h.path(m.MountPath), 0o755)).To(Succeed())
	}
	return append(env, "GOFLAGS=-x")
}

// run runs command in the container's working directory and counts the
// packages it compiled.
func (h hostPod) run(t *testing.T, env []string, command ...string) (compiles int, took time.Duration) {
	t.Helper()
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Dir, cmd.Env = h.path(h.c.WorkingDir), env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in %s: %v\n%s", strings.Join(command, " "), h.pod, err, out)
	}
	return len(regexp.MustCompile(`(?m)/compile -o `).FindAll(out, -1)), time.Since(start)
}

// TestSuiteGoFindsWhatItsBuildersCompiled (issue 34 item 3) runs the real
// go command on this host as the pods of TestSuiteOnItsImagesClaimUsesTheirGoCache
// would: the builder Job's build command, then `go build ./...` in the
// unit suite's test container, both with the environment, mounts and
// GOCACHEPROG of their Jobs and a team cache that has nothing (so every
// hit is the claim's). The suite compiles nothing.
func TestSuiteGoFindsWhatItsBuildersCompiled(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	operatortest.CreateDeployer(t, ns, operatortest.Deployer)
	files := map[string]string{
		"go.mod":          "module example.com/tree\n\ngo 1.24\n",
		"cmd/api/main.go": "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n)\n\nfunc main() { b, _ := json.Marshal(1); fmt.Println(string(b)) }\n",
	}
	operatortest.AppFiles(t, ns, files)
	env := treeEnv(ns)
	operatortest.CreateEnv(t, env)
	builderJob := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	operatortest.EndJob(t, ns, builderJob.Name, false)
	operatortest.Annotate(t, env, v1alpha1.TriggerAnnotation, "unit")
	unitJob := testJobOf(t, env, "unit")

	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, pods.WorkspaceDir, name)
		g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(p, []byte(text), 0o644)).To(Succeed())
	}
	var gets, puts atomic.Int64
	teamCache := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			puts.Add(1)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		gets.Add(1)
		http.NotFound(w, r)
	}))
	defer teamCache.Close()

	pod := func(name string, job *batchv1.Job, container string) hostPod {
		spec := job.Spec.Template.Spec
		return hostPod{root: root, pod: name, spec: spec, c: containerOf(spec, container)}
	}
	builder := pod("builder", &builderJob, build.ContainerBuild)
	builderCompiles, builderTook := builder.run(t, builder.env(t, teamCache.URL), builder.c.Command...)
	builderGets := gets.Load()
	unit := pod("unit", unitJob, testrun.ContainerTest)
	unitCompiles, unitTook := unit.run(t, unit.env(t, teamCache.URL), "go", "build", "./...")
	t.Logf("builder: %d packages compiled in %v (%d team cache reads, %d uploads); unit suite after it: %d compiled in %v (%d team cache reads)",
		builderCompiles, builderTook.Round(time.Millisecond), builderGets, puts.Load(), unitCompiles, unitTook.Round(time.Millisecond), gets.Load()-builderGets)
	g.Expect(builderCompiles).NotTo(BeZero(), "the builder compiled nothing: the test does not start cold")
	g.Expect(unitCompiles).To(BeZero(), "the suite compiled what its builders had compiled")
}
