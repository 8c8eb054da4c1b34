package main

import (
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/source"
)

func TestLayerCompressionFlag(t *testing.T) {
	for arg, want := range map[string]source.Compression{
		"":                         source.CompressionAuto,
		"--layer-compression=auto": source.CompressionAuto,
		"--layer-compression=gzip": source.CompressionGzip,
		"--layer-compression=none": source.CompressionNone,
	} {
		var args []string
		if arg != "" {
			args = []string{arg}
		}
		o, err := parseFlags(args)
		if err != nil || o.layerCompression != want {
			t.Errorf("%q: %q, %v; want %q", arg, o.layerCompression, err, want)
		}
	}
	if _, err := parseFlags([]string{"--layer-compression=zstd"}); err == nil || !strings.Contains(err.Error(), "--layer-compression") {
		t.Errorf("zstd: err %v, want one naming the flag", err)
	}
}

// Cross-namespace references (a Flux source of another namespace) are
// refused unless the operator is told otherwise, as Flux's multi-tenancy
// lockdown does.
func TestCrossNamespaceRefsRefusedByDefault(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || !o.noCrossNamespaceRefs {
		t.Fatalf("default: noCrossNamespaceRefs %v, %v; want true", o.noCrossNamespaceRefs, err)
	}
	if o, err = parseFlags([]string{"--no-cross-namespace-refs=false"}); err != nil || o.noCrossNamespaceRefs {
		t.Fatalf("=false: noCrossNamespaceRefs %v, %v; want false", o.noCrossNamespaceRefs, err)
	}
}

func TestConcurrentPerNamespaceFlag(t *testing.T) {
	o, err := parseFlags([]string{"--concurrent=8", "--concurrent-per-namespace=3"})
	if err != nil || o.namespaceShare != 3 {
		t.Fatalf("namespaceShare %d, %v; want 3", o.namespaceShare, err)
	}
	if _, err := parseFlags([]string{"--concurrent=2", "--concurrent-per-namespace=3"}); err == nil || !strings.Contains(err.Error(), "--concurrent-per-namespace") {
		t.Errorf("a share above --concurrent: err %v, want one naming the flag", err)
	}
}

// One namespace's share of the team build cache is the operator's to set
// (issue 44: many teams on one operator); a share above the store is
// refused naming the flag.
func TestBuildCacheNamespaceShareFlag(t *testing.T) {
	cache := []string{"--build-cache-url=https://devloop-build-cache.devloop-system.svc:5003", "--build-cache-bind-address=:5003", "--build-cache-max-bytes=1000"}
	o, err := parseFlags(append(cache, "--build-cache-namespace-max-bytes=300"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.buildCache.options(nil); err != nil {
		t.Fatal(err)
	}
	if st := o.buildCache.store(t.TempDir()); st.MaxBytes != 1000 || st.NamespaceMaxBytes != 300 {
		t.Errorf("store bounds %d/%d, want 1000 and a namespace share of 300", st.MaxBytes, st.NamespaceMaxBytes)
	}
	o, err = parseFlags(append(cache, "--build-cache-namespace-max-bytes=2000"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.buildCache.options(nil); err == nil || !strings.Contains(err.Error(), "--build-cache-namespace-max-bytes") {
		t.Errorf("a share above the store: err %v, want one naming the flag", err)
	}
}

// Profiles are served only when asked for: they have no authentication.
func TestPprofIsOffByDefault(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.pprofAddr != "" {
		t.Fatalf("default: pprof at %q, %v; want off", o.pprofAddr, err)
	}
	if o, err = parseFlags([]string{"--pprof-bind-address=127.0.0.1:6060"}); err != nil || o.pprofAddr != "127.0.0.1:6060" {
		t.Fatalf("pprof at %q, %v", o.pprofAddr, err)
	}
}
