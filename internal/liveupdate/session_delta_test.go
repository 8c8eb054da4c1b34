package liveupdate

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/supervisor"
)

// supervisorExec runs the real supervisor's `sync --stream` in-process on
// a live root (its after-action answered at once), counting the bytes
// each exec's stdin carried. old plays a supervisor that knows no deltas:
// the frames' delta field is dropped before it reads them.
type supervisorExec struct {
	root, orig string
	old        bool
	mu         sync.Mutex
	execs      int
	sent       int64
}

func (x *supervisorExec) Exec(ctx context.Context, _ *identity.Tenant, _, _, _ string, command []string, stdin io.Reader, stdout, _ io.Writer) error {
	x.mu.Lock()
	x.execs++
	x.mu.Unlock()
	in := io.Reader(&countingReader{r: stdin, n: &x.sent, mu: &x.mu})
	if x.old {
		in = dropDelta(in)
	}
	return supervisor.Stream(ctx, x.root, x.orig, 10*time.Second, in, stdout)
}

type countingReader struct {
	r  io.Reader
	n  *int64
	mu *sync.Mutex
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	*c.n += int64(n)
	c.mu.Unlock()
	return n, err
}

// dropDelta rewrites each frame's header as a supervisor without deltas
// reads it (the field ignored).
func dropDelta(in io.Reader) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		r := bufio.NewReader(in)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			var f supervisor.Frame
			if err := json.Unmarshal(line, &f); err != nil {
				pw.CloseWithError(err)
				return
			}
			f.Delta = false
			head, _ := json.Marshal(f)
			if _, err := pw.Write(append(head, '\n')); err != nil {
				return
			}
			if _, err := io.CopyN(pw, r, f.Size); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

func (x *supervisorExec) counts() (int, int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.execs, x.sent
}

// liveRoot is a live root with the image's /server as a link to its
// original, and a supervisor socket that answers every notice.
func liveRoot(t *testing.T) (root, orig string) {
	t.Helper()
	dir := t.TempDir()
	orig, root = filepath.Join(dir, "orig"), filepath.Join(dir, "live")
	for _, d := range []string{orig, root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(orig, "server"), []byte("image"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(orig, "server"), filepath.Join(root, "server")); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(root, supervisor.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = bufio.NewReader(c).ReadBytes('\n')
			_, _ = c.Write([]byte("{}\n"))
			c.Close()
		}
	}()
	return root, orig
}

func serverTar(t *testing.T, content []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "/server", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write(content)
	_ = tw.Close()
	return buf.Bytes()
}

// rebuilt is v with a few bytes changed, as a rebuilt binary is.
func rebuilt(v []byte, at int, s string) []byte {
	n := bytes.Clone(v)
	copy(n[at:], s)
	return n
}

// Over a session, the second sync of a container sends its binary as a
// delta against the first: a few KiB instead of the file. A file changed
// in the container meanwhile makes the supervisor refuse the delta, and
// the same session carries the file whole; the files are right each time.
func TestSessionSendsDeltasAgainstTheLastSync(t *testing.T) {
	g := NewWithT(t)
	root, orig := liveRoot(t)
	x := &supervisorExec{root: root, orig: orig}
	e := &Engine{Exec: x, Sessions: true}
	t.Cleanup(func() { closeAll(e) })
	ctx := context.Background()
	server := filepath.Join(root, "server")

	rng := rand.New(rand.NewPCG(5, 6))
	v1 := make([]byte, 2<<20)
	for i := range v1 {
		v1[i] = byte(rng.Uint32())
	}
	res, err := e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:one", serverTar(t, v1))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Sent).To(BeNumerically(">", len(v1)), "the first sync has no base: the file whole")
	g.Expect(os.ReadFile(server)).To(Equal(v1))

	v2 := rebuilt(v1, 4096, "version 2")
	_, before := x.counts()
	res, err = e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:two", serverTar(t, v2))
	g.Expect(err).NotTo(HaveOccurred())
	_, after := x.counts()
	g.Expect(res.Sent).To(BeNumerically("<", 4096))
	g.Expect(after-before).To(BeNumerically("<", 4096), "what the exec carried")
	g.Expect(os.ReadFile(server)).To(Equal(v2))

	edited := rebuilt(v2, 100_000, "edited by hand")
	g.Expect(os.WriteFile(server, edited, 0o755)).To(Succeed())
	v3 := rebuilt(v2, 4096, "version 3")
	res, err = e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:three", serverTar(t, v3))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Sent).To(BeNumerically(">", len(v3)), "the delta refused, the file whole")
	g.Expect(os.ReadFile(server)).To(Equal(v3))
	execs, _ := x.counts()
	g.Expect(execs).To(Equal(1), "one session carried all three")

	// Deltas again from there.
	v4 := rebuilt(v3, 4096, "version 4")
	res, err = e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:four", serverTar(t, v4))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Sent).To(BeNumerically("<", 4096))
	g.Expect(os.ReadFile(server)).To(Equal(v4))
}

// A supervisor that knows no deltas (an image of an older operator)
// refuses the first delta frame as a tar without writing; the session
// sends the file whole and sends no delta again.
func TestSessionStopsDeltasForASupervisorWithout(t *testing.T) {
	g := NewWithT(t)
	root, orig := liveRoot(t)
	x := &supervisorExec{root: root, orig: orig, old: true}
	e := &Engine{Exec: x, Sessions: true}
	t.Cleanup(func() { closeAll(e) })
	ctx := context.Background()
	server := filepath.Join(root, "server")

	v1 := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for i, v := range [][]byte{v1, rebuilt(v1, 500, "v2"), rebuilt(v1, 500, "v3")} {
		_, before := x.counts()
		tarball := serverTar(t, v)
		res, err := e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:"+strings.Repeat("a", i+1), tarball)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.ReadFile(server)).To(Equal(v))
		_, after := x.counts()
		g.Expect(res.Sent).To(BeNumerically(">", len(v)))
		if i == 1 {
			g.Expect(after-before).To(BeNumerically(">", len(tarball)+len(supervisor.DeltaMagic)), "a delta frame tried, then the file whole")
		}
		if i == 2 {
			g.Expect(after-before).To(BeNumerically("<", len(tarball)+256), "no delta tried again: one frame (its header line and the tar)")
		}
	}
}

// closeAll ends the engine's sessions.
func closeAll(e *Engine) {
	e.mu.Lock()
	var all []*session
	for _, s := range e.sessions {
		all = append(all, s)
	}
	e.mu.Unlock()
	for _, s := range all {
		e.closeSession(s)
	}
}

// The tars sessions keep as bases are bounded for all of them together: a
// session whose tar would pass maxBaseBytes keeps none (its next sync is
// whole), and a session that ends gives its base's bytes back.
func TestSessionBasesAreBounded(t *testing.T) {
	g := NewWithT(t)
	root, orig := liveRoot(t)
	x := &supervisorExec{root: root, orig: orig}
	e := &Engine{Exec: x, Sessions: true}
	ctx := context.Background()

	v1 := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	e.mu.Lock()
	e.baseBytes = maxBaseBytes - int64(len(v1)) // others' bases: no room for this one
	e.mu.Unlock()
	_, err := e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:one", serverTar(t, v1))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:two", serverTar(t, rebuilt(v1, 100, "v2")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Sent).To(BeNumerically(">", len(v1)), "no base kept past the bound: whole")

	e.mu.Lock()
	e.baseBytes = 0
	e.mu.Unlock()
	_, err = e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:three", serverTar(t, rebuilt(v1, 100, "v3")))
	g.Expect(err).NotTo(HaveOccurred())
	res, err = e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:four", serverTar(t, rebuilt(v1, 100, "v4")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Sent).To(BeNumerically("<", 4096), "room again: a delta")
	e.mu.Lock()
	kept := e.baseBytes
	s := e.sessions[sessionKey(testTenant(), testEnvUID, target)]
	e.mu.Unlock()
	g.Expect(kept).To(BeNumerically(">", len(v1)))

	e.closeSession(s)
	<-s.done
	e.mu.Lock()
	defer e.mu.Unlock()
	g.Expect(e.baseBytes).To(BeZero(), "an ended session keeps no base")
}
