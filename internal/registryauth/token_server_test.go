package registryauth

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr/testr"
	"k8s.io/client-go/kubernetes"
)

// newTokenServer is the token service with the chart's defaults, reviewing
// callers through cs, signing with a test key; closed with the test.
func newTokenServer(t *testing.T, cs kubernetes.Interface) *httptest.Server {
	t.Helper()
	signer, _ := testSigner(t)
	srv := httptest.NewServer(&Server{Reviewer: KubeReviewer{Client: cs}, Signer: signer,
		Service: DefaultService, Issuer: DefaultIssuer, Audience: DefaultAudience, Log: testr.New(t)})
	t.Cleanup(srv.Close)
	return srv
}

// askPull asks srv for pull on ns/app with token as the password and
// returns the status code.
func askPull(t *testing.T, srv *httptest.Server, ns, token string) int {
	t.Helper()
	r, _ := http.NewRequest(http.MethodGet, srv.URL+"?service="+DefaultService+"&scope=repository:"+ns+"/app:pull", nil)
	r.SetBasicAuth("k8s", token)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
