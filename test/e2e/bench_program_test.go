//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	. "github.com/devloop-dev/devloop/test/builder"
	. "github.com/devloop-dev/devloop/test/e2e/fixture"
)

// benchProgram is the Go program the Tilt benchmark edits and compiles
// (issue 46 asks for two): DEVLOOP_BENCH_PROGRAM=server (the default) is
// the small HTTP server; =operator is an operator-sized binary, the
// Volcano-shaped fixture's module (testdata/vcsim) with a main that starts
// client-go's shared informers before it serves: tens of MB, the size a
// remote cluster's link has to carry when a binary crosses it.
type benchProgram struct {
	name  string
	files Files              // the module at version 0
	main  string             // the file a change edits
	pkg   string             // the package built
	src   func(v int) string // main's source at version v
}

func selectedProgram(t *testing.T) benchProgram {
	t.Helper()
	switch p := os.Getenv("DEVLOOP_BENCH_PROGRAM"); p {
	case "", "server":
		return benchProgram{name: "server", files: Files{"go.mod": GoModule("example.com/bench")}, main: "main.go", pkg: ".", src: benchSource}.at(0)
	case "operator":
		_, files := vcsimFiles(t)
		return benchProgram{name: "operator", files: files, main: "cmd/bench/main.go", pkg: "./cmd/bench", src: operatorSource}.at(0)
	default:
		t.Fatalf("DEVLOOP_BENCH_PROGRAM=%q: want server or operator", p)
		return benchProgram{}
	}
}

// at is the program's module with its main at version v.
func (p benchProgram) at(v int) benchProgram {
	files := Files{}
	for k, s := range p.files {
		files[k] = s
	}
	files[p.main] = p.src(v)
	p.files = files
	return p
}

// operatorSource is the operator-sized program at version v: the fixture's
// informers started (in the benchmark's pods they run without rights and
// log so; what matters is what is linked), then the bench server's answer.
func operatorSource(v int) string {
	return fmt.Sprintf(`package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"example.dev/vcsim/pkg/cluster"
)

var version = "%s%08d"

func main() {
	v, _ := strconv.Atoi(version[len(version)-8:])
	cluster.Watch(context.Background(), "bench")
	answer := fmt.Sprintf("version %%d iteration %%s\n", v, os.Getenv("ITERATION"))
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, answer) })
	if err := http.ListenAndServe(":8080", nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`, versionMarker, v)
}

// devloopPath is how devloop's arm ships a change: "binary" (the local go
// build's output pushed, as the small server is), "delta" (that output
// pushed with push --delta, as a delta against the last one pushed whole)
// or "source" (the edited source pushed, compiled by the image's warm
// builder next to the cluster). DEVLOOP_BENCH_DEVLOOP_PATH chooses;
// without it the benchmark takes the fastest measured: delta (home link,
// 2026-11-29: push --watch p50 4.99 s by delta, 7.09 s by source for the
// operator-sized binary; locally, once the operator read the delta's base
// from its store, 1.15 s by delta and 1.36 s by binary for the small
// server).
func devloopPath(prog benchProgram) string {
	if p := os.Getenv("DEVLOOP_BENCH_DEVLOOP_PATH"); p != "" {
		return p
	}
	return "delta"
}

// warmBuiltImage is the image of the source path: the module compiled by a
// warm builder on a build cache claim, modules from this machine's cache.
func warmBuiltImage(prog benchProgram, goproxy string) v1alpha1.ImageSpec {
	run := GoBuild(goImage, []string{"go", "build", "-trimpath", "-ldflags=-s -w", "-o", "out/server", prog.pkg}, vcsimBuildEnv(goproxy)...)
	size := resource.MustParse("2Gi")
	run.Cache, run.KeepWarm = &v1alpha1.BuildCache{Size: &size}, true
	paths := []string{"go.mod"}
	if _, ok := prog.files["go.sum"]; ok {
		paths = append(paths, "go.sum")
	}
	if prog.name == "operator" {
		paths = append(paths, "pkg", "cmd")
	} else {
		paths = append(paths, prog.main)
	}
	return Image("server", Paths(paths...), Run(run), Program("out/server", "/server"))
}
