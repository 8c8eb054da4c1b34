// Package chartrepo serves Helm charts to tests the way a classic HTTP
// chart repository does (index.yaml and archives), and packages charts
// as `helm package` does. It is the one chart repository the tests of
// internal/deploy/helm, the controllers and e2e need, instead of one
// written per suite.
package chartrepo

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/repo"
	"sigs.k8s.io/yaml"
)

// Server is an HTTP chart repository under /charts/. It counts archive
// downloads and records the Authorization header of every request, so a
// test can tell what was fetched and with which credentials.
type Server struct {
	*httptest.Server
	// URL is the repository's URL, the server's plus /charts.
	URL string

	downloads atomic.Int32

	mu       sync.Mutex
	user     string
	password string
	archives map[string][]byte
	index    *repo.IndexFile
	authSeen []string
}

// Start serves an empty repository on a loopback port until the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, ln)
}

// Serve serves an empty repository on ln until the test ends: for a
// repository that pods must reach, on an address other than loopback.
func Serve(t testing.TB, ln net.Listener) *Server {
	t.Helper()
	s := &Server{archives: map[string][]byte{}, index: repo.NewIndexFile()}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Server.Listener.Close()
	s.Server.Listener = ln
	s.Server.Start()
	t.Cleanup(s.Close)
	s.URL = s.Server.URL + "/charts"
	return s
}

// RequireBasicAuth makes every request need user:password; others get a
// 401 with a Basic challenge.
func (s *Server) RequireBasicAuth(user, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user, s.password = user, password
}

// Add lists a packaged chart (a .tgz, see Package) in the index and
// serves it.
func (s *Server) Add(t testing.TB, archive []byte) {
	t.Helper()
	ch, err := loader.LoadArchive(strings.NewReader(string(archive)))
	if err != nil {
		t.Fatal(err)
	}
	file := ch.Name() + "-" + ch.Metadata.Version + ".tgz"
	sum := sha256.Sum256(archive)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.archives[file] = archive
	s.list(t, ch, file, hex.EncodeToString(sum[:]))
}

// AddLink lists a packaged chart in the index at url, an absolute URL on
// another server, with no digest: a repository whose archives a CDN
// serves. This server does not serve the archive itself.
func (s *Server) AddLink(t testing.TB, archive []byte, url string) {
	t.Helper()
	ch, err := loader.LoadArchive(strings.NewReader(string(archive)))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list(t, ch, url, "")
}

// list adds ch to the index, the lock held.
func (s *Server) list(t testing.TB, ch *chart.Chart, url, digest string) {
	t.Helper()
	if err := s.index.MustAdd(ch.Metadata, url, "", digest); err != nil {
		t.Fatal(err)
	}
	s.index.SortEntries()
}

// Downloads is how many archives were served.
func (s *Server) Downloads() int32 { return s.downloads.Load() }

// AuthSeen are the Authorization headers of the requests since the start
// or the last ForgetAuth, in order ("" for none).
func (s *Server) AuthSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.authSeen...)
}

// ForgetAuth clears AuthSeen, for a test that looks at one step.
func (s *Server) ForgetAuth() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authSeen = nil
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.authSeen = append(s.authSeen, req.Header.Get("Authorization"))
	if s.user != "" {
		if u, p, ok := req.BasicAuth(); !ok || u != s.user || p != s.password {
			w.Header().Set("WWW-Authenticate", `Basic realm="charts"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	name, ok := strings.CutPrefix(req.URL.Path, "/charts/")
	if !ok {
		http.NotFound(w, req)
		return
	}
	if name == "index.yaml" {
		data, _ := yaml.Marshal(s.index)
		_, _ = w.Write(data)
		return
	}
	data, ok := s.archives[name]
	if !ok {
		http.NotFound(w, req)
		return
	}
	s.downloads.Add(1)
	_, _ = w.Write(data)
}

// AddFiles packages the chart whose files are given (PackageFiles) and
// adds it.
func (s *Server) AddFiles(t testing.TB, files map[string]string) {
	t.Helper()
	s.Add(t, PackageFiles(t, files))
}
