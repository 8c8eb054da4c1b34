package liveupdate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/internal/identity"
)

// floodExec plays a container whose own script sits at the supervisor's
// path and answers every sync, streamed or not, with size bytes and no
// end of line: what a tenant's image can do to the operator's memory.
type floodExec struct{ size int }

func (x floodExec) Exec(ctx context.Context, _ *identity.Tenant, _, _, _ string, command []string, stdin io.Reader, stdout, _ io.Writer) error {
	if command[len(command)-1] == "--stream" {
		// Read the frame's header line, then flood instead of answering.
		if _, err := bufio.NewReader(stdin).ReadSlice('\n'); err != nil {
			return err
		}
	} else if _, err := io.Copy(io.Discard, stdin); err != nil {
		return err
	}
	chunk := make([]byte, 32<<10) // reused: the flood costs this side nothing
	for i := range chunk {
		chunk[i] = 'x'
	}
	for sent := 0; sent < x.size; sent += len(chunk) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, err := stdout.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

// An answer far larger than any the supervisor gives (64 MiB) costs the
// operator less than 16 MiB of allocations, streamed or over one exec,
// and fails that one sync naming the pod.
func TestOversizedSupervisorAnswerIsRefused(t *testing.T) {
	const flood = 64 << 20
	for _, sessions := range []bool{true, false} {
		t.Run(fmt.Sprintf("sessions=%v", sessions), func(t *testing.T) {
			g := NewWithT(t)
			e := &Engine{Exec: floodExec{size: flood}, Sessions: sessions}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			synced, err := e.syncAll(context.Background(), testTenant(), testEnvUID, nil, []Target{target}, "sha256:one", []byte("tar"))
			runtime.ReadMemStats(&after)
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("a %d MiB answer: the operator allocated %.1f MiB during the sync", flood>>20, float64(grew)/(1<<20))
			g.Expect(synced).To(BeEmpty())
			var failed *SyncError
			g.Expect(errors.As(err, &failed)).To(BeTrue(), "error: %v", err)
			g.Expect(failed.Pod).To(Equal("team-a/web-1"))
			g.Expect(err.Error()).To(ContainSubstring("sync failed on pod team-a/web-1: container web: the supervisor's answer is longer than"))
			g.Expect(grew).To(BeNumerically("<", 16<<20), "allocations while reading the answer")
		})
	}
}
