package supervisor

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A stream takes delta frames: a file made from the one the previous sync
// wrote and a few new bytes; one made against a file changed meanwhile is
// refused and changes nothing; a delta outside a delta frame, or a delta
// frame read as a plain tar (a supervisor that knows no deltas), is
// refused before anything is written.
func TestStreamAppliesDeltaFrames(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	orig, root := filepath.Join(dir, "orig"), filepath.Join(dir, "live")
	g.Expect(os.MkdirAll(orig, 0o755)).To(Succeed())
	g.Expect(os.MkdirAll(root, 0o777)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(orig, "server"), []byte("image"), 0o755)).To(Succeed())
	_, err := seed(root, orig)
	g.Expect(err).NotTo(HaveOccurred())
	fakeSupervisor(t, root)

	in, feed := io.Pipe()
	out, replies := io.Pipe()
	go func() {
		_ = Stream(context.Background(), root, orig, 10*time.Second, in, replies)
		replies.Close()
	}()
	t.Cleanup(func() { feed.Close() })
	lines := bufio.NewReader(out)
	send := func(digest string, delta bool, body []byte) StreamReply {
		t.Helper()
		go func() {
			fmt.Fprintf(feed, `{"digest":%q,"size":%d,"delta":%t}`+"\n", digest, len(body), delta)
			_, _ = feed.Write(body)
		}()
		line, err := lines.ReadBytes('\n')
		g.Expect(err).NotTo(HaveOccurred())
		var r StreamReply
		g.Expect(json.Unmarshal(line, &r)).To(Succeed())
		return r
	}
	server := filepath.Join(root, "server")

	v1 := randomBinary(1 << 20)
	tar1 := tarBytes(t, tarEntry{name: "/server", body: string(v1), typeflag: tar.TypeReg, mode: 0o755})
	// The first sync's base would be the image's original, a link out of
	// the live root: never a base.
	body, ok, err := DeltaTar(tarBytes(t, tarEntry{name: "/server", body: string(v1[:1000]) + "x" + string(v1[1001:]), typeflag: tar.TypeReg, mode: 0o755}), tar1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	r := send("sha256:one", true, body)
	g.Expect(r.Error).To(ContainSubstring("not the one the delta was made against"))
	g.Expect(os.Readlink(server)).To(Equal(filepath.Join(orig, "server")), "nothing written")
	r = send("sha256:one", false, tar1)
	g.Expect(r.Error).To(BeEmpty())
	g.Expect(os.ReadFile(server)).To(Equal(v1))

	v2 := bytes.Clone(v1)
	copy(v2[5000:], "version 2")
	tar2 := tarBytes(t, tarEntry{name: "/server", body: string(v2), typeflag: tar.TypeReg, mode: 0o755})
	body, ok, err = DeltaTar(tar1, tar2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(len(body)).To(BeNumerically("<", 4096), "the delta frame carries what changed, not the file")
	r = send("sha256:two", true, body)
	g.Expect(r.Error).To(BeEmpty())
	g.Expect(r.Files).To(Equal(1))
	g.Expect(os.ReadFile(server)).To(Equal(v2))
	st, err := os.Stat(server)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o755)))

	// The file changed by hand: the next delta (made against v2) is
	// refused and the file left as it is.
	edited := bytes.Clone(v2)
	copy(edited[9000:], "edited by hand")
	g.Expect(os.WriteFile(server, edited, 0o755)).To(Succeed())
	v3 := bytes.Clone(v2)
	copy(v3[5000:], "version 3")
	tar3 := tarBytes(t, tarEntry{name: "/server", body: string(v3), typeflag: tar.TypeReg, mode: 0o755})
	body, _, err = DeltaTar(tar2, tar3)
	g.Expect(err).NotTo(HaveOccurred())
	r = send("sha256:three", true, body)
	g.Expect(r.Error).To(ContainSubstring("not the one the delta was made against"))
	g.Expect(os.ReadFile(server)).To(Equal(edited))

	// The same body as a plain frame: what a supervisor without deltas
	// does with it (the magic is no tar header).
	r = send("sha256:three", false, body)
	g.Expect(r.Error).To(ContainSubstring("reading the tar of changed files"))
	g.Expect(os.ReadFile(server)).To(Equal(edited))
	// A delta entry without the magic, outside a delta frame.
	r = send("sha256:three", false, body[len(DeltaMagic):])
	g.Expect(r.Error).To(ContainSubstring("a delta outside a delta frame"))
	g.Expect(os.ReadFile(server)).To(Equal(edited))

	// Sent whole, it is written.
	r = send("sha256:three", false, tar3)
	g.Expect(r.Error).To(BeEmpty())
	g.Expect(os.ReadFile(server)).To(Equal(v3))
}

func randomBinary(n int) []byte {
	rng := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
