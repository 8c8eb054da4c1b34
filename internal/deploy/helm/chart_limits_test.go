package helm

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/internal/fault"
)

// hugeChartRegistry serves one chart, demo:1.0.0, whose layer is an
// endless stream of zeros sent without a length; streamed counts the
// bytes of it the server got to write.
func hugeChartRegistry(streamed *atomic.Int64) *httptest.Server {
	config := []byte(`{"name":"demo","version":"1.0.0","apiVersion":"v2"}`)
	configDigest := fmt.Sprintf("sha256:%x", sha256.Sum256(config))
	layerDigest := fmt.Sprintf("sha256:%064x", 2)
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.cncf.helm.config.v1+json", "digest": configDigest, "size": len(config)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
			"digest": layerDigest, "size": 1 << 30}},
	})
	manifestDigest := fmt.Sprintf("sha256:%x", sha256.Sum256(manifest))
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
		case strings.HasSuffix(r.URL.Path, "/manifests/1.0.0") || strings.HasSuffix(r.URL.Path, "/manifests/"+manifestDigest):
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Docker-Content-Digest", manifestDigest)
			w.Header().Set("Content-Length", fmt.Sprint(len(manifest)))
			if r.Method == http.MethodGet {
				_, _ = w.Write(manifest)
			}
		case strings.HasSuffix(r.URL.Path, "/blobs/"+configDigest):
			_, _ = w.Write(config)
		case strings.HasSuffix(r.URL.Path, "/blobs/"+layerDigest):
			chunk := make([]byte, 32<<10)
			for streamed.Load() < 1<<30 {
				n, err := w.Write(chunk)
				streamed.Add(int64(n))
				if err != nil {
					return
				}
			}
		default:
			http.NotFound(w, r)
		}
	}))
}

// TestOCIChartSizeCapWhileReading: a chart layer larger than MaxChartSize
// fails while it is read — the registry gets to send little more than
// the cap and what the connection buffers, not the gigabyte it offers —
// and the failure is permanent, naming the limit.
func TestOCIChartSizeCapWhileReading(t *testing.T) {
	g := NewWithT(t)
	var streamed atomic.Int64
	srv := hugeChartRegistry(&streamed)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	const max = 1 << 20
	l := &ChartLoader{CacheDir: t.TempDir(), MaxChartSize: max, HTTP: &http.Client{}}
	_, err := l.LoadOCI(context.Background(), "oci://"+host+"/charts/demo", "1.0.0", true)
	g.Expect(err).To(HaveOccurred())
	g.Expect(fault.IsPermanent(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(fmt.Sprintf("larger than %d bytes", max)))
	srv.CloseClientConnections()
	g.Expect(streamed.Load()).To(BeNumerically("<", 64<<20), "stopped reading at the cap")
}
