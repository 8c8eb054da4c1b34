package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// One stream carries several syncs, each answered on its own line: the
// gate opened, a new binary serving, a refused tar answered with its
// error while the stream goes on, and the old binary back.
func TestStreamSyncsEachFrame(t *testing.T) {
	g := NewWithT(t)
	program, root := image(t)
	s := startSupervisor(t, root, []string{"AFTER=restart", "GATE=1m"}, program)
	g.Eventually(filepath.Join(root, SocketName), 10*time.Second).Should(BeAnExistingFile(), "the supervisor listens")

	in, feed := io.Pipe()
	out, replies := io.Pipe()
	ended := make(chan error, 1)
	go func() {
		ended <- Stream(context.Background(), root, root+"/orig", 10*time.Second, in, replies)
		replies.Close()
	}()
	lines := bufio.NewReader(out)
	send := func(digest string, tarball []byte) StreamReply {
		t.Helper()
		go func() {
			fmt.Fprintf(feed, `{"digest":%q,"size":%d}`+"\n", digest, len(tarball))
			_, _ = feed.Write(tarball)
		}()
		line, err := lines.ReadBytes('\n')
		g.Expect(err).NotTo(HaveOccurred())
		var r StreamReply
		g.Expect(json.Unmarshal(line, &r)).To(Succeed())
		return r
	}

	r := send("sha256:one", tarOf(t))
	g.Expect(r.Error).To(BeEmpty())
	g.Expect(r.Started).To(BeTrue())
	s.waitServing(t, "v1", 10*time.Second)

	r = send("sha256:two", tarOf(t, program, serverBinary(t, "v2")))
	g.Expect(r.Error).To(BeEmpty())
	g.Expect(r.SyncResult).To(Equal(SyncResult{Digest: "sha256:two", RestartedMs: r.RestartedMs, Files: 1}))
	s.waitServing(t, "v2", 10*time.Second)

	r = send("sha256:bad", tarOf(t, "../escape", "x"))
	g.Expect(r.Error).To(ContainSubstring("climbs with .."))
	g.Expect(s.get()).To(HavePrefix("v2 "), "a refused sync changes nothing")

	r = send("sha256:three", tarOf(t, program, serverBinary(t, "v1")))
	g.Expect(r.Error).To(BeEmpty())
	s.waitServing(t, "v1", 10*time.Second)

	// stdin closed: the stream ends cleanly.
	g.Expect(feed.Close()).To(Succeed())
	g.Eventually(ended, 5*time.Second).Should(Receive(BeNil()))
}

// A frame header that is not one ends the stream with an error.
func TestStreamRefusesAMalformedFrame(t *testing.T) {
	g := NewWithT(t)
	err := Stream(context.Background(), t.TempDir(), t.TempDir(), time.Second,
		strings.NewReader("not json\n"), io.Discard)
	g.Expect(err).To(MatchError(ContainSubstring(`malformed frame "not json"`)))
}
