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
