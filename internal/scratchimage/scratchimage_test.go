package scratchimage

import (
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// What the layer holds (directories, owners, modes, symlinks) is checked
// through its users: internal/operatorimage's base, imagepack's busybox.

func sample() []Entry {
	return []Entry{
		{Name: "bin", Dir: true, Mode: 0o755},
		{Name: "bin/tool", Mode: 0o755, Data: []byte("binary")},
		{Name: "bin/sh", Mode: 0o777, Linkname: "/bin/tool"},
		{Name: "home/user/", Dir: true, Mode: 0o700, UID: 1000},
	}
}

func TestImageIsReproducible(t *testing.T) {
	configure := func(cf *v1.ConfigFile) { cf.OS, cf.Architecture = "linux", "arm64" }
	a, err := Image(sample(), v1.History{CreatedBy: "test"}, configure)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Image(sample(), v1.History{CreatedBy: "test"}, configure)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Fatalf("same inputs, different digests: %s %s", da, db)
	}
	cf, err := a.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "arm64" || len(cf.History) != 1 || cf.History[0].CreatedBy != "test" {
		t.Fatalf("config: %+v", cf)
	}
	if mt, _ := a.MediaType(); mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Fatalf("media type %s", mt)
	}
}
