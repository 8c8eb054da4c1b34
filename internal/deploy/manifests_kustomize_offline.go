package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
)

// Kustomize's loader cannot be given an HTTP client or a git cloner
// through krusty: it downloads URL files with a client of its own over
// http.DefaultTransport and clones git URLs by running git, from wherever
// it runs. So devloop runs it where neither can reach anything: a child
// process of the operator's own binary (offlineEnv set) whose
// http.DefaultTransport refuses every request and whose PATH finds no git.
// The checks on the kustomization before (checkKustomization) only give a
// clearer message earlier; this is what guarantees that no kustomization,
// whatever field or form a URL hides in, makes a request.

// offlineEnv, set to "1", makes a process that links this package a
// kustomize builder: it reads an offlineRequest on stdin, writes the
// built objects as a JSON array on stdout, and exits before main.
const offlineEnv = "DEVLOOP_KUSTOMIZE_OFFLINE"

// Bounds of one offline build.
const (
	offlineTimeout   = 2 * time.Minute
	maxOfflineOutput = 64 << 20
	maxOfflineErr    = 64 << 10
)

type offlineRequest struct {
	Root, Dir string
}

func init() {
	if os.Getenv(offlineEnv) != "1" {
		return
	}
	os.Exit(runOffline(os.Stdin, os.Stdout, os.Stderr))
}

// errOffline is what every request kustomize makes gets.
var errOffline = errors.New("kustomize may not reach the network: vendor remote files and bases into the source")

type offlineTransport struct{}

func (offlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, errOffline
}

// goOffline cuts this process off the network as kustomize reaches it.
func goOffline() {
	http.DefaultTransport = offlineTransport{}
	http.DefaultClient = &http.Client{Transport: offlineTransport{}}
	// git (remote bases), helm (chart inflation, disabled anyway) and
	// any other program are looked up on PATH.
	os.Setenv("PATH", "")
	for _, v := range []string{"GIT_EXEC_PATH", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		os.Unsetenv(v)
	}
}

// runOffline is the child process.
func runOffline(in io.Reader, out, errOut io.Writer) int {
	goOffline()
	var req offlineRequest
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&req); err != nil {
		fmt.Fprintf(errOut, "reading the request: %v", err)
		return 2
	}
	objs, err := kustomizeBuild(req.Root, req.Dir)
	if err != nil {
		fmt.Fprint(errOut, err.Error())
		return 1
	}
	if err := json.NewEncoder(out).Encode(objs); err != nil {
		fmt.Fprint(errOut, err.Error())
		return 2
	}
	return 0
}

// kustomizeBuild runs krusty on dir, reading only root and below.
func kustomizeBuild(root, dir string) ([]json.RawMessage, error) {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	opts.PluginConfig = types.DisabledPluginConfig()
	resMap, err := krusty.MakeKustomizer(opts).Run(newRootedFS(root), dir)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, resMap.Size())
	for _, r := range resMap.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// kustomizeOffline builds dir (inside root) in an offline child process
// and returns its objects. It is the loader devloop gives kustomize: no
// request leaves it, whatever the kustomization says. builds, when not
// nil, remembers the output and serves it again.
func kustomizeOffline(ctx context.Context, root, dir string, builds *buildCache) ([]*unstructured.Unstructured, error) {
	out, ok := builds.get(root, dir)
	if !ok {
		var err error
		if out, err = runOfflineChild(ctx, root, dir); err != nil {
			return nil, err
		}
		builds.put(root, dir, out)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(raw))
	for _, b := range raw {
		// Through JSON, so numbers are int64 as unstructured expects.
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// runOfflineChild runs the offline child on dir and returns its output.
func runOfflineChild(ctx context.Context, root, dir string) ([]byte, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("kustomize: finding the operator's binary: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, offlineTimeout)
	defer cancel()
	in, err := json.Marshal(offlineRequest{Root: root, Dir: dir})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = []string{offlineEnv + "=1", "PATH=", "HOME=" + os.TempDir(), "TMPDIR=" + os.TempDir()}
	cmd.Stdin = bytes.NewReader(in)
	stdout := &capped{max: maxOfflineOutput}
	stderr := &capped{max: maxOfflineErr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("took longer than %s", offlineTimeout)
	case stdout.over:
		return nil, fmt.Errorf("its output is larger than %d MiB", maxOfflineOutput>>20)
	case err != nil:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) && exitErr.ExitCode() == 1 {
			return nil, errors.New(strings.TrimSpace(stderr.String()))
		}
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// buildCache remembers recent builds: a fetched source's directory never
// changes (it is named by its content and shared read-only), and a
// component is rendered on every reconcile, so a build is run once per
// content, not once per reconcile. Bounded in entries and bytes; the
// oldest go first. Each deploy engine has its own (Engine.kustomizeBuilds),
// so two operators in one process share none; a nil one keeps nothing.
type buildCache struct {
	mu                   sync.Mutex
	maxEntries, maxBytes int
	keys                 []string
	outputs              map[string][]byte
	bytes                int
}

// newBuildCache is a deploy engine's: 64 builds, 64 MiB at most.
func newBuildCache() *buildCache { return &buildCache{maxEntries: 64, maxBytes: 64 << 20} }

func (c *buildCache) get(root, dir string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out, ok := c.outputs[root+"\x00"+dir]
	return out, ok
}

func (c *buildCache) put(root, dir string, out []byte) {
	if c == nil || len(out) > c.maxBytes/4 {
		return
	}
	key := root + "\x00" + dir
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outputs == nil {
		c.outputs = map[string][]byte{}
	}
	if _, ok := c.outputs[key]; ok {
		return
	}
	for len(c.keys) > 0 && (len(c.keys) >= c.maxEntries || c.bytes+len(out) > c.maxBytes) {
		c.bytes -= len(c.outputs[c.keys[0]])
		delete(c.outputs, c.keys[0])
		c.keys = c.keys[1:]
	}
	c.keys = append(c.keys, key)
	c.outputs[key] = out
	c.bytes += len(out)
}

// capped keeps at most max bytes written to it and notes whether more
// came; the rest is read and dropped, so the child never blocks on it.
type capped struct {
	bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); len(p) > room {
		c.over = true
		if room > 0 {
			c.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
