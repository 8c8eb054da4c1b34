package teamcache

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Issue 44 (Must show): while tenant B floods the shared cache — more
// stalled uploads than it may hold at once and writes past its share —
// the service keeps answering tenant A, A's entries stay, and the bytes
// on the operator's work volume stay within the store's bound.
func TestServiceAnswersAWhileBFloods(t *testing.T) {
	const bound = 4 << 20
	svc, srv, _ := newCountingService(t, &Store{Root: t.TempDir(), MaxBytes: bound})
	a := newTenantEnv(t, "flood-a-", srv)
	b := newTenantEnv(t, "flood-b-", srv)
	g := NewWithT(t)

	var mine []testEntry
	for i := range 16 {
		e := newEntry(fmt.Sprint("A's action ", i), fmt.Sprint(strings.Repeat("a", 32<<10), i))
		put(t, a.client, e)
		mine = append(mine, e)
	}

	// B: twice as many large uploads as a namespace may run at once, each
	// left one byte short, then a stream of writes past its share.
	var stalled []*rawUpload
	for i := range 2 * svc.Store.maxUploads() {
		e := newEntry(fmt.Sprint("B's stalled action ", i), fmt.Sprint(strings.Repeat("s", 1<<20), i))
		stalled = append(stalled, startRawUpload(t, srv.Listener.Addr().String(), b.token(t), e, len(e.body)-1))
	}
	t.Cleanup(func() {
		for _, u := range stalled {
			u.close()
		}
	})
	for i := range 96 {
		e := newEntry(fmt.Sprint("B's action ", i), fmt.Sprint(strings.Repeat("b", 64<<10), i))
		_ = b.client.Put(context.Background(), e.action, e.output, bytes.NewReader(e.body), int64(len(e.body)))
	}

	// A is still answered, in full, and still writes.
	for _, e := range mine {
		body, _ := get(t, a.client, e)
		g.Expect(body == string(e.body)).To(BeTrue(), "A's entry %q after B's flood: %d bytes back, want %d", e.action, len(body), len(e.body))
	}
	after := newEntry("A's action during the flood", strings.Repeat("n", 256<<10))
	g.Eventually(func() error {
		return a.client.Put(context.Background(), after.action, after.output, bytes.NewReader(after.body), int64(len(after.body)))
	}).WithTimeout(time.Minute).Should(Succeed())
	body, _ := get(t, a.client, after)
	g.Expect(body == string(after.body)).To(BeTrue(), "A's entry written during the flood: %d bytes back", len(body))

	if n := diskBytes(t, svc.Store.Root); n > bound {
		t.Fatalf("%d bytes on the work volume during B's flood, over the store's bound %d", n, bound)
	}
}
