//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/testenv"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
	"github.com/devloop-dev/devloop/test/e2e/poll"
)

// versionMarker holds the benchmark server's version in its source and in
// its binary: a change of the prebuilt binary rewrites the digits in place
// (no compile in the loop), a change of the source rewrites the literal.
const versionMarker = "devloop-bench-version="

// crashVersion is the version at which the benchmark server exits with
// code 3 as it starts: a program that crashes after a live update.
const crashVersion = 666

// benchSource is the benchmark server at version v: it answers every
// request with "version V iteration I", I from its ITERATION variable (what
// the floor changes); at crashVersion it crashes.
func benchSource(v int) string {
	return fmt.Sprintf(`package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
)

var version = "%s%08d"

func main() {
	v, _ := strconv.Atoi(version[len(version)-8:])
	if v == %d {
		fmt.Fprintln(os.Stderr, "version", v, "crashes")
		os.Exit(3)
	}
	answer := fmt.Sprintf("version %%d iteration %%s\n", v, os.Getenv("ITERATION"))
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, answer) })
	if err := http.ListenAndServe(":8080", nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`, versionMarker, v, crashVersion)
}

// benchManifests run the server (scratch: no shell) under the restricted
// Pod Security level behind the Service "bench".
var benchManifests = Documents(Deployment("bench", "server", "image: server",
	`env: [{name: ITERATION, value: "0"}]`,
	"ports: [{name: http, containerPort: 8080}]",
	"readinessProbe: {tcpSocket: {port: http}, periodSeconds: 1}",
	"securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, readOnlyRootFilesystem: true}"),
	Service("bench"))

// benchService is the manifests' Service, for the floor's Deployment.
func benchService(ns string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bench"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "bench"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}},
	}
}

// buildBenchServer compiles benchSource(0) for the node (static,
// linux/amd64) as a developer's local go build would, once.
func buildBenchServer(t *testing.T) []byte {
	t.Helper()
	g := NewWithT(t)
	mod := sourceDir(t, Files{"go.mod": GoModule("example.com/bench"), "main.go": benchSource(0)})
	bin := filepath.Join(mod, "server")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go build: %s", out)
	data, err := os.ReadFile(bin)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bytes.Count(data, []byte(versionMarker+"00000000"))).To(Equal(1), "the version literal appears once in the binary")
	return data
}

// writeBenchServer writes server at path with its version set to v.
func writeBenchServer(t *testing.T, path string, server []byte, v int) {
	t.Helper()
	data := bytes.Clone(server)
	i := bytes.Index(data, []byte(versionMarker+"00000000")) + len(versionMarker)
	copy(data[i:], fmt.Sprintf("%08d", v))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// serviceURL is the Service's cluster IP address, which this machine (the
// node) reaches through kube-proxy's rules as a pod would.
func serviceURL(t *testing.T, ns, name string) string {
	t.Helper()
	svc := &corev1.Service{}
	waitCheck(t, poll.Wait{What: "Service " + ns + "/" + name + " has a cluster IP", Every: 10 * time.Millisecond, Within: time.Minute}, func(g Gomega) {
		g.Expect(need(t).Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, svc)).To(Succeed())
		g.Expect(svc.Spec.ClusterIP).NotTo(BeEmpty())
	})
	return fmt.Sprintf("http://%s:%d/", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
}

// waitServing polls url every 20 ms until an answer contains want and
// returns how long after t0 (the change) that was.
func waitServing(t *testing.T, url, want string, t0 time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	_, took := waitAnswer(t, poll.Wait{What: url + " answers " + strconv.Quote(want), Every: 20 * time.Millisecond, Within: timeout, Since: t0},
		get(url), contains(want))
	return took
}

// kubectlPath is the kubectl make test-binaries builds.
func kubectlPath() string {
	return filepath.Join(testenv.RepoRoot(), "bin", "k8s", "v1.37.2", "kubectl")
}
