package liveupdate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/supervisor"
	"github.com/devloop-dev/devloop/test/builder"
)

// streamExec plays the container's side of the execs a live update makes:
// `sync --stream` answers frames as the supervisor does (unless it is an
// old supervisor, or told to die after some frames), `sync --digest=D`
// answers once. Only the operator's session logic is tested with it; the
// supervisor's stream is tested in internal/supervisor, both together in
// the e2e live update test.
type streamExec struct {
	mu sync.Mutex
	// noStream plays a supervisor without --stream.
	noStream bool
	// dieAfter ends a stream after that many frames (0: never).
	dieAfter int
	// fail answers frames of this digest with an error.
	fail string
	// execs are the commands run, users who ran them; frames the digests
	// and sizes streamed.
	execs  [][]string
	users  []string
	frames []string
}

func (x *streamExec) Exec(ctx context.Context, t *identity.Tenant, _, _, _ string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	x.mu.Lock()
	x.execs = append(x.execs, command)
	x.users = append(x.users, t.Describe())
	noStream, dieAfter, fail := x.noStream, x.dieAfter, x.fail
	x.mu.Unlock()
	last := command[len(command)-1]
	if last != "--stream" {
		data, _ := io.ReadAll(stdin)
		digest := strings.TrimPrefix(last, "--digest=")
		x.record(fmt.Sprintf("once %s %d", digest, len(data)))
		return json.NewEncoder(stdout).Encode(supervisor.SyncResult{Digest: digest, RestartedMs: 3})
	}
	if noStream {
		fmt.Fprintln(stderr, "flag provided but not defined: -stream")
		return errors.New("command terminated with exit code 2")
	}
	r := bufio.NewReader(stdin)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil // stdin closed: the session ends
		}
		var f supervisor.Frame
		if err := json.Unmarshal(line, &f); err != nil {
			return err
		}
		data := make([]byte, f.Size)
		if _, err := io.ReadFull(r, data); err != nil {
			return err
		}
		x.record(fmt.Sprintf("frame %s %d", f.Digest, len(data)))
		reply := supervisor.StreamReply{SyncResult: supervisor.SyncResult{Digest: f.Digest, RestartedMs: 2}}
		if f.Digest == fail {
			reply.Error = "the program could not be started"
		}
		if err := json.NewEncoder(stdout).Encode(reply); err != nil {
			return err
		}
		if n == dieAfter {
			return errors.New("connection reset")
		}
	}
}

func (x *streamExec) record(s string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.frames = append(x.frames, s)
}

func (x *streamExec) seen() ([][]string, []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.execs), slices.Clone(x.frames)
}

func testTenant() *identity.Tenant { return tenantOf("team-a") }

// tenantOf is the environment dev of namespace ns, acting as its
// ServiceAccount deployer.
func tenantOf(ns string) *identity.Tenant {
	return (&identity.Identity{}).For(builder.Env(ns, "dev").ServiceAccount("deployer").Obj())
}

// testEnvUID is testTenant's environment's UID.
const testEnvUID = types.UID("uid-team-a-dev")

var target = Target{Namespace: "team-a", Pod: "web-1", Container: "web", Running: true}

// Consecutive syncs of a container share one exec: one `sync --stream`,
// a frame each.
func TestSyncsShareOneSession(t *testing.T) {
	g := NewWithT(t)
	x := &streamExec{}
	e := &Engine{Exec: x, Sessions: true}
	ctx := context.Background()
	for i, digest := range []string{"sha256:one", "sha256:two", "sha256:three"} {
		res, err := e.syncOne(ctx, testTenant(), testEnvUID, target, digest, []byte(strings.Repeat("x", i+1)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Digest).To(Equal(digest))
	}
	execs, frames := x.seen()
	g.Expect(execs).To(Equal([][]string{{supervisor.Path, "sync", "--stream"}}))
	g.Expect(frames).To(Equal([]string{"frame sha256:one 1", "frame sha256:two 2", "frame sha256:three 3"}))
}

// A supervisor without --stream is synced by one exec per sync, and not
// asked to stream again.
func TestSyncWithoutStreamFallsBackToOneExec(t *testing.T) {
	g := NewWithT(t)
	x := &streamExec{noStream: true}
	e := &Engine{Exec: x, Sessions: true}
	ctx := context.Background()
	for _, digest := range []string{"sha256:one", "sha256:two"} {
		res, err := e.syncOne(ctx, testTenant(), testEnvUID, target, digest, []byte("tar"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Digest).To(Equal(digest))
	}
	execs, frames := x.seen()
	g.Expect(execs).To(Equal([][]string{
		{supervisor.Path, "sync", "--stream"},
		{supervisor.Path, "sync", "--digest=sha256:one"},
		{supervisor.Path, "sync", "--digest=sha256:two"},
	}))
	g.Expect(frames).To(Equal([]string{"once sha256:one 3", "once sha256:two 3"}))
}

// A session that breaks is replaced by a new one on the next sync; an
// error the supervisor answers is the sync's failure, not retried.
func TestBrokenSessionIsReopenedAndSupervisorErrorsFail(t *testing.T) {
	g := NewWithT(t)
	x := &streamExec{dieAfter: 1, fail: "sha256:bad"}
	e := &Engine{Exec: x, Sessions: true}
	ctx := context.Background()
	_, err := e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:one", []byte("a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { e.mu.Lock(); defer e.mu.Unlock(); return len(e.sessions) }).Should(BeZero(), "the broken session is dropped")
	_, err = e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:two", []byte("b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() int { e.mu.Lock(); defer e.mu.Unlock(); return len(e.sessions) }).Should(BeZero())
	x.mu.Lock()
	x.dieAfter = 0
	x.mu.Unlock()
	_, err = e.syncOne(ctx, testTenant(), testEnvUID, target, "sha256:bad", []byte("c"))
	g.Expect(err).To(MatchError("the program could not be started"))
	execs, frames := x.seen()
	g.Expect(execs).To(HaveLen(3), "a stream, a new stream after it broke, a third after the second broke; no one-shot exec")
	g.Expect(frames).To(Equal([]string{"frame sha256:one 1", "frame sha256:two 1", "frame sha256:bad 1"}))
}

// Two namespaces each with a ServiceAccount named deployer are two users:
// team-b's sync never rides the session team-a's deployer opened into a
// container, nor does another environment of the same namespace and
// ServiceAccount; each opens its own exec, as its own user.
func TestSessionsAreNotSharedAcrossNamespacesOrEnvironments(t *testing.T) {
	g := NewWithT(t)
	x := &streamExec{}
	e := &Engine{Exec: x, Sessions: true}
	ctx := context.Background()
	for _, s := range []struct {
		tenant *identity.Tenant
		uid    types.UID
		digest string
	}{
		{tenantOf("team-a"), "uid-a", "sha256:a1"},
		{tenantOf("team-b"), "uid-b", "sha256:b1"},
		{tenantOf("team-a"), "uid-a", "sha256:a2"},
		{tenantOf("team-a"), "uid-a-other", "sha256:c1"},
	} {
		res, err := e.syncOne(ctx, s.tenant, s.uid, target, s.digest, []byte("x"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Digest).To(Equal(s.digest))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	g.Expect(x.users).To(Equal([]string{
		"system:serviceaccount:team-a:deployer",
		"system:serviceaccount:team-b:deployer",
		"system:serviceaccount:team-a:deployer",
	}), "one session each for team-a's environment, team-b's and team-a's other one; team-a's second sync reuses its own")
}
