package chartrepo

import (
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/registry"
)

// PushOCI pushes a packaged chart to an OCI registry over plain HTTP as
// `helm push archive oci://repository` does: to repository/<name>:<version>.
// opts add to the client's, basic auth for one.
func PushOCI(t testing.TB, archive []byte, repository string, opts ...registry.ClientOption) {
	t.Helper()
	ch, err := loader.LoadArchive(strings.NewReader(string(archive)))
	if err != nil {
		t.Fatal(err)
	}
	// A credentials file of the test's own: never the user's.
	opts = append([]registry.ClientOption{registry.ClientOptPlainHTTP(),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "creds.json"))}, opts...)
	rc, err := registry.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(archive, repository+"/"+ch.Name()+":"+ch.Metadata.Version); err != nil {
		t.Fatal(err)
	}
}
