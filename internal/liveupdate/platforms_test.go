package liveupdate

import "testing"

// A node's os/arch picks the tar of the image's platform with the same
// os and arch, a variant of it included; no other.
func TestTarPlatform(t *testing.T) {
	tars := map[string][]byte{"linux/amd64": nil, "linux/arm/v7": nil, "linux/arm64": nil}
	for node, want := range map[string]string{"linux/amd64": "linux/amd64", "linux/arm64": "linux/arm64", "linux/arm": "linux/arm/v7", "linux/s390x": "", "": ""} {
		got, ok := tarPlatform(tars, node)
		if got != want || ok != (want != "") {
			t.Errorf("node %q: tar of %q (%v), want %q", node, got, ok, want)
		}
	}
}
