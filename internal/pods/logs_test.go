package pods

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A log is the tenant's program's output: even from a server that
// ignores limitBytes and sends 32 MiB, a tail is at most 64 KiB (the
// request still asks for no more).
func TestTailLogReadsAtMost64KiB(t *testing.T) {
	g := NewWithT(t)
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.Query().Get("limitBytes")
		line := []byte(strings.Repeat("x", 1023) + "\n")
		for i := 0; i < 32<<10; i++ {
			if _, err := w.Write(line); err != nil {
				return // the reader stopped
			}
		}
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	g.Expect(err).NotTo(HaveOccurred())
	out, err := Logs{Clientset: cs}.TailLog(context.Background(), "team-a", "web-1", "web", 40)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(asked).To(Equal("65536"))
	g.Expect(len(out)).To(Equal(64 << 10))
}

// CountLines counts the matching lines of a whole log (a build's packages
// compiled), skipping a line too long to match, and reads no more than
// its bound from a server that ignores limitBytes.
func TestCountLinesReadsTheLogWithinItsBound(t *testing.T) {
	g := NewWithT(t)
	var asked, tail string
	body := "go: downloading a.b/c v1\nruntime\n" + strings.Repeat("y", 100<<10) + "\nk8s.io/api/core/v1\nlast"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked, tail = r.URL.Query().Get("limitBytes"), r.URL.Query().Get("tailLines")
		if r.URL.Query().Get("container") == "endless" {
			line := []byte("runtime\n")
			for {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	g.Expect(err).NotTo(HaveOccurred())
	noSpace := func(l string) bool { return l != "" && !strings.Contains(l, " ") && len(l) < 1000 }

	n, err := Logs{Clientset: cs}.CountLines(context.Background(), "team-a", "build-1", "build", noSpace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(3), "runtime, k8s.io/api/core/v1 and the unterminated last line")
	g.Expect(tail).To(BeEmpty(), "the whole log is counted")
	g.Expect(asked).To(Equal("16777216"))

	n, err = Logs{Clientset: cs}.CountLines(context.Background(), "team-a", "build-1", "endless", noSpace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(maxCounted / len("runtime\n")))
}
