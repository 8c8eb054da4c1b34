package chartrepo

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A repository behind basic auth refuses a request without it, lists an
// added chart in its index and counts the archive downloads.
func TestServesIndexAndArchivesBehindBasicAuth(t *testing.T) {
	s := Start(t)
	s.RequireBasicAuth("reader", "pw")
	s.AddFiles(t, map[string]string{"Chart.yaml": "apiVersion: v2\nname: nats\nversion: 1.2.3\n"})

	get := func(path string, auth bool) (int, string) {
		req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth {
			req.SetBasicAuth("reader", "pw")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/index.yaml", false); code != http.StatusUnauthorized {
		t.Errorf("index without credentials: %d, want 401", code)
	}
	if code, body := get("/index.yaml", true); code != http.StatusOK || !strings.Contains(body, "nats-1.2.3.tgz") {
		t.Errorf("index: %d\n%s", code, body)
	}
	if code, _ := get("/nats-1.2.3.tgz", true); code != http.StatusOK || s.Downloads() != 1 {
		t.Errorf("archive: %d, downloads %d", code, s.Downloads())
	}
	if seen := s.AuthSeen(); len(seen) != 3 || seen[0] != "" || seen[1] == "" {
		t.Errorf("authorization headers seen %q", seen)
	}
}
