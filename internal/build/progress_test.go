package build

import (
	"fmt"
	"testing"
	"time"
)

// TestCompiledPackageLines: what the go command prints with -v for a
// package it compiles is counted; what other tools and the go command
// print besides is not.
func TestCompiledPackageLines(t *testing.T) {
	for line, want := range map[string]bool{
		"runtime":            true,
		"internal/abi":       true,
		"k8s.io/api/core/v1": true,
		"github.com/NVIDIA/gpu-operator/cmd/nvidia-validator": true,
		"gopkg.in/yaml.v3":                   true,
		"example.com/m/v2\r":                 true,
		"go: downloading k8s.io/api v0.34.0": false,
		"# sigs.k8s.io/x":                    false,
		"make[1]: Entering directory":        false,
		"PASS":                               false,
		"":                                   false,
		"./cmd/x":                            false,
		"/usr/local/go/src/x":                false,
		"-v":                                 false,
		"main.go:3:2: undefined: x":          false,
	} {
		if got := compiledPackage(line); got != want {
			t.Errorf("compiledPackage(%q) = %v, want %v", line, got, want)
		}
	}
}

// TestPackageCounterCountsLinesAcrossWrites: a warm build's output comes
// in pieces that split lines anywhere.
func TestPackageCounterCountsLinesAcrossWrites(t *testing.T) {
	out := "go: downloading a.b/c v1.0.0\nruntime\nk8s.io/api/core/v1\nerrors\nnot a package\n"
	for _, size := range []int{1, 3, 7, len(out)} {
		c := &packageCounter{}
		for rest := out; rest != ""; {
			n := min(size, len(rest))
			_, _ = c.Write([]byte(rest[:n]))
			rest = rest[n:]
		}
		if got, _ := c.count(); got != 3 {
			t.Errorf("written %d bytes at a time: counted %d, want 3", size, got)
		}
	}
	if got := (buildProgress{packages: 312, after: 130_400_000_000}).String(); got != ": 312 packages compiled in 2m10s" {
		t.Errorf("message %q", got)
	}
	if got := (buildProgress{}).String(); got != "" {
		t.Errorf("no count yet: %q, want none", got)
	}
}

// TestPackagesTotalLine: the helper's total line sets the counter's total
// and is not counted as a package; the message then says "of".
func TestPackagesTotalLine(t *testing.T) {
	c := &packageCounter{}
	fmt.Fprintf(c, "go: downloading k8s.io/api v0.34.0\n%s 1180 %s\nruntime\nk8s.io/api/core/v1\n", PackagesTotalPrefix, PackagesTotalSuffix)
	if n, total := c.count(); n != 2 || total != 1180 {
		t.Fatalf("count() = %d, %d; want 2 of 1180", n, total)
	}
	for _, line := range []string{"devloop: x Go packages in the build (go list -deps)", "devloop: 0 " + PackagesTotalSuffix, "devloop: 12 packages"} {
		if n, ok := packagesTotal(line); ok {
			t.Errorf("packagesTotal(%q) = %d; want none", line, n)
		}
	}
	if got := (buildProgress{packages: 302, total: 1180, after: 416_000_000_000}).String(); got != ": 302 of 1180 packages compiled in 6m56s" {
		t.Errorf("String() = %q", got)
	}
	if got := (buildProgress{packages: 1, total: 1180, after: time.Second}).String(); got != ": 1 of 1180 packages compiled in 1s" {
		t.Errorf("String() = %q", got)
	}
}
