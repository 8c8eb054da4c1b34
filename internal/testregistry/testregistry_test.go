package testregistry

import (
	"net/http"
	"testing"
)

func TestStartAnswersAndStops(t *testing.T) {
	var host string
	t.Run("start", func(t *testing.T) {
		host = Start(t)
		resp, err := http.Get("http://" + host + "/v2/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v2/: %s", resp.Status)
		}
	})
	if host == "" {
		return // skipped
	}
	// The subtest's cleanup stopped the registry.
	if resp, err := http.Get("http://" + host + "/v2/"); err == nil {
		resp.Body.Close()
		t.Fatalf("registry still answers on %s after the test ended", host)
	}
}
