package teamcache

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment of this test binary when the go command starts it as its
// GOCACHEPROG (TestMain).
const (
	envProgDir   = "DEVLOOP_TEST_GOCACHEPROG_DIR"
	envProgURL   = "DEVLOOP_TEST_GOCACHEPROG_URL"
	envProgToken = "DEVLOOP_TEST_GOCACHEPROG_TOKEN"
)

func runTestProg(dir string) int {
	p := &Prog{Dir: dir, Log: os.Stderr}
	if url := os.Getenv(envProgURL); url != "" {
		p.Remote = &Client{URL: url, TokenFile: os.Getenv(envProgToken)}
	}
	if err := p.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		_, _ = os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

// A real go build through GOCACHEPROG: A builds cold and uploads; B,
// reading A by name, builds the same tree with an empty local cache and
// compiles nothing; C, not naming A, compiles everything.
func TestGoBuildReadsTeamCache(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newService(t)
	a := newTenantEnv(t, "gobuild-a-", srv)
	b := newTenantEnv(t, "gobuild-b-", srv, sourceOf(a))
	c := newTenantEnv(t, "gobuild-c-", srv)
	grantReadCache(t, a, b)

	// DEVLOOP_TEAMCACHE_MODULE and DEVLOOP_TEAMCACHE_PACKAGE build another
	// tree (its modules in the host's module cache), e.g.
	// test/e2e/testdata/vcsim and ./cmd/controller-manager, for figures.
	module, pkg := os.Getenv("DEVLOOP_TEAMCACHE_MODULE"), os.Getenv("DEVLOOP_TEAMCACHE_PACKAGE")
	if module == "" {
		module, pkg = t.TempDir(), "."
		write := func(name, text string) {
			if err := os.WriteFile(filepath.Join(module, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("go.mod", "module example.com/teamcache\n\ngo 1.24\n")
		write("main.go", "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n)\n\nfunc main() { b, _ := json.Marshal(1); fmt.Println(string(b)) }\n")
	}

	build := func(te tenantEnv) (compiles int, hits string, took time.Duration) {
		t.Helper()
		cmd := exec.Command(goBin, "build", "-x", "-o", filepath.Join(t.TempDir(), "out"), pkg)
		cmd.Dir = module
		cmd.Env = append(os.Environ(),
			"GOCACHEPROG="+self, "GOCACHE="+t.TempDir(), "GOFLAGS=", "GOTOOLCHAIN=local", "GOPROXY=off", "CGO_ENABLED=0",
			envProgDir+"="+t.TempDir(), envProgURL+"="+srv.URL, envProgToken+"="+te.client.TokenFile)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took = time.Since(start)
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, tail(out))
		}
		compiles = len(regexp.MustCompile(`(?m)/compile -o `).FindAll(out, -1))
		m := regexp.MustCompile(`devloop build cache: (\d+) entries from the team cache, (\d+) uploaded`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no summary from the cache program:\n%s", tail(out))
		}
		return compiles, string(m[1]) + " hits, " + string(m[2]) + " uploaded", took
	}

	compilesA, statsA, tookA := build(a)
	compilesB, statsB, tookB := build(b)
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("load average: %s", strings.TrimSpace(string(load)))
	t.Logf("A cold: %d compiles, %s, %v", compilesA, statsA, tookA)
	t.Logf("B reading A: %d compiles, %s, %v (%.0fx)", compilesB, statsB, tookB, tookA.Seconds()/tookB.Seconds())
	if compilesA == 0 {
		t.Fatal("A compiled nothing: the test does not build cold")
	}
	if compilesB != 0 {
		t.Fatalf("B compiled %d packages, want every one read from A's cache", compilesB)
	}
	if pkg != "." {
		return // figures for another tree: C would only compile it all again
	}
	compilesC, statsC, tookC := build(c)
	t.Logf("C not reading A: %d compiles, %s, %v", compilesC, statsC, tookC)
	if compilesC != compilesA || !strings.HasPrefix(statsC, "0 hits") {
		t.Fatalf("C compiled %d packages (%s), want all %d: C does not name A", compilesC, statsC, compilesA)
	}
}

func tail(b []byte) string {
	const n = 3000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strconv.Quote(string(b))
}
