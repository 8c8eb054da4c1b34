package main

import (
	"archive/tar"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/internal/scratchimage"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/internal/testregistry"
)

// TestImageIsLinuxAMD64 checks the config image gives its images (their
// reproducibility is internal/scratchimage's test).
func TestImageIsLinuxAMD64(t *testing.T) {
	img, err := image([]scratchimage.Entry{{Name: "pause", Mode: 0o755, Data: []byte("binary")}}, v1.Config{Entrypoint: []string{"/pause"}})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Config.Entrypoint[0] != "/pause" {
		t.Fatalf("config: %+v", cf)
	}
}

// TestPushBusybox packs the machine's static busybox, pushes it to an
// in-memory registry over plain HTTP and reads the layer back.
func TestPushBusybox(t *testing.T) {
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("no /bin/busybox (Debian package busybox-static)")
	}
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	if err := run(host, true, "", "", "/bin/busybox", "busybox:test"); err != nil {
		t.Fatal(err)
	}
	img := testregistry.Pull(t, host+"/busybox:test")
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v %v", len(layers), err)
	}
	links := map[string]string{}
	for _, e := range testfiles.LayerEntries(t, layers[0]) {
		if e.Typeflag == tar.TypeSymlink {
			links[e.Name] = e.Linkname
		}
	}
	for _, p := range []string{"bin/sh", "usr/bin/nslookup", "usr/bin/wget", "usr/bin/nc"} {
		if links[p] != "/bin/busybox" {
			t.Errorf("%s -> %q, want /bin/busybox", p, links[p])
		}
	}
}
