package teamcache

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Issue 44: one tenant writing its own cache past the store's bound
// evicted every other tenant's entries. Now a namespace's writes evict
// its own entries first: after B writes as much as the whole store
// holds, A's entries are all still there.
func TestWritesEvictTheWritersOwnShare(t *testing.T) {
	const bound = 4 << 20
	svc, srv := newServiceWith(t, &Store{Root: t.TempDir(), MaxBytes: bound})
	a := newTenantEnv(t, "share-a-", srv)
	b := newTenantEnv(t, "share-b-", srv)

	var mine []testEntry
	for i := range 20 {
		e := newEntry(fmt.Sprint("A's action ", i), fmt.Sprint(strings.Repeat("a", 16<<10), i))
		put(t, a.client, e)
		mine = append(mine, e)
	}
	// B writes the store's whole bound, every write accepted.
	var last testEntry
	for i := range 64 {
		last = newEntry(fmt.Sprint("B's action ", i), fmt.Sprint(strings.Repeat("b", 64<<10), i))
		put(t, b.client, last)
	}
	kept := 0
	for _, e := range mine {
		if body, _ := get(t, a.client, e); body == string(e.body) {
			kept++
		}
	}
	if kept != len(mine) {
		t.Fatalf("after B wrote %d bytes into a %d-byte store, %d of A's %d entries are left", 64<<16, bound, kept, len(mine))
	}
	if body, _ := get(t, b.client, last); body != string(last.body) {
		t.Fatalf("B's newest entry is not there")
	}
	if svc.Store.Size() > bound {
		t.Fatalf("the store holds %d bytes, over its bound %d", svc.Store.Size(), bound)
	}
}

// Issue 44: uploads in flight were not counted, so B's stalled uploads
// held as much disk as B cared to open. Room is reserved before a body
// is read: a dozen uploads B leaves one byte short hold no more than B's
// share on disk, and A still writes its own share meanwhile.
func TestStalledUploadsHoldOnlyTheirShare(t *testing.T) {
	const bound = 4 << 20
	svc, srv, conns := newCountingService(t, &Store{Root: t.TempDir(), MaxBytes: bound})
	a := newTenantEnv(t, "stall-a-", srv)
	b := newTenantEnv(t, "stall-b-", srv)
	share := svc.Store.namespaceShare()
	g := NewWithT(t)

	var stalled []*rawUpload
	for i := range 12 {
		e := newEntry(fmt.Sprint("B's stalled action ", i), fmt.Sprint(strings.Repeat("s", 512<<10), i))
		stalled = append(stalled, startRawUpload(t, srv.Listener.Addr().String(), b.token(t), e, len(e.body)-1))
	}
	// Each upload was either answered (refused) or the service read all
	// B sent of it.
	g.Eventually(func() []string {
		var waiting []string
		for i, u := range stalled {
			if _, answered := u.answer(); !answered && conns.read(u.local) < u.sent {
				waiting = append(waiting, fmt.Sprint(i))
			}
		}
		return waiting
	}).WithTimeout(time.Minute).Should(BeEmpty(), "uploads neither answered nor read through")
	if n := diskBytes(t, svc.Store.Root); n > share {
		t.Fatalf("B's stalled uploads hold %d bytes on disk, more than B's share %d (store bound %d)", n, share, bound)
	}

	// A writes its share while B's uploads stall.
	for i := range 24 {
		e := newEntry(fmt.Sprint("A's action ", i), fmt.Sprint(strings.Repeat("a", 64<<10), i))
		put(t, a.client, e)
	}
	if n := diskBytes(t, svc.Store.Root); n > bound {
		t.Fatalf("%d bytes on disk, over the store's bound %d", n, bound)
	}

	// B hangs up: its reservations are released and it writes again.
	for _, u := range stalled {
		u.close()
	}
	again := newEntry("B's action after hanging up", strings.Repeat("c", 1<<20))
	g.Eventually(func() error {
		return b.client.Put(context.Background(), again.action, again.output, bytes.NewReader(again.body), int64(len(again.body)))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// Issue 44: a body could take 10 minutes to arrive. A body that trickles
// is cut after a short while and its reservation released.
func TestTricklingUploadIsCut(t *testing.T) {
	const bound = 4 << 20
	svc, srv, _ := newCountingService(t, &Store{Root: t.TempDir(), MaxBytes: bound})
	svc.BodyGrace, svc.MinBodyRate = time.Second, 1<<30
	b := newTenantEnv(t, "trickle-b-", srv)
	g := NewWithT(t)

	big := strings.Repeat("t", 1536<<10)
	slow := startRawUpload(t, srv.Listener.Addr().String(), b.token(t), newEntry("B's trickling action", big), 1024)
	slow.trickle()
	g.Eventually(func() bool { _, answered := slow.answer(); return answered }).WithTimeout(time.Minute).Should(BeTrue(), "the trickling upload was never cut")
	if code, _ := slow.answer(); code != 408 && code != 0 {
		t.Fatalf("the trickling upload was answered %d, want 408 (or the connection closed)", code)
	}
	// Its reservation is gone: B's share holds another upload as large.
	after := newEntry("B's upload after the cut", big+"!")
	g.Eventually(func() error {
		return b.client.Put(context.Background(), after.action, after.output, bytes.NewReader(after.body), int64(len(after.body)))
	}).WithTimeout(time.Minute).Should(Succeed())
}

func diskBytes(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
