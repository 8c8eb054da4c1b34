package source

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/internal/testregistry"
)

// blobChecks records the blobs a client asked the registry about (HEAD
// /v2/<repo>/blobs/<digest>): over a link, one round trip each.
type blobChecks struct {
	base http.RoundTripper
	mu   sync.Mutex
	head map[v1.Hash]int
}

func newBlobChecks() *blobChecks {
	return &blobChecks{base: http.DefaultTransport, head: map[v1.Hash]int{}}
}

func (c *blobChecks) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, digest, ok := strings.Cut(r.URL.Path, "/blobs/"); ok && r.Method == http.MethodHead {
		if h, err := v1.NewHash(digest); err == nil {
			c.mu.Lock()
			c.head[h]++
			c.mu.Unlock()
		}
	}
	return c.base.RoundTrip(r)
}

// asked are the blobs asked about since the last call.
func (c *blobChecks) asked() map[v1.Hash]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.head
	c.head = map[v1.Hash]int{}
	return out
}

// manifestBlobs are the layers and config of img.
func manifestBlobs(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	out := []v1.Hash{m.Config.Digest}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

func editFile(t testing.TB, root, rel, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(rel)), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// expectFetchedTree fetches ref's artifact as the operator does and checks
// it is root's tree exactly.
func expectFetchedTree(t *testing.T, host, repo, root string) {
	t.Helper()
	ctx := context.Background()
	fetchedTreeIs(ctx, t, host+"/"+repo, root)
}

// TestAPushAfterAnEditAsksOnlyAboutNewBlobs (issue 46): against the real
// registry, a push after a one-file edit asks the registry about none of
// the blobs the last push's manifest named, both in the same process
// (push --watch: one Pusher) and in a new one (push: a new Pusher reading
// the memory's file); what the operator fetches is the edited tree.
func TestAPushAfterAnEditAsksOnlyAboutNewBlobs(t *testing.T) {
	host := testregistry.Start(t)
	ctx := context.Background()
	root := projectTree(t, 300, 4)
	ref := host + "/team/src:dev"
	dir := t.TempDir()
	checks := newBlobChecks()
	o := PushOptions{Insecure: true, Transport: checks}

	push := func(p *Pusher) (v1.Image, PushStats) {
		t.Helper()
		img, err := PackDir(root, nil, CompressionNone)
		if err != nil {
			t.Fatal(err)
		}
		stats, err := p.Push(ctx, img, ref)
		if err != nil {
			t.Fatal(err)
		}
		return img, stats
	}
	watch := NewPusher(o, &Remembered{Dir: dir})
	img, stats := push(watch)
	t.Logf("first push: %s", stats)
	checks.asked()
	last := manifestBlobs(t, img)

	for i, c := range []struct {
		how    string
		pusher func() *Pusher
		edit   string
	}{
		{"the same process", func() *Pusher { return watch }, "pkg/p010/f1.go"},
		{"a new process", func() *Pusher { return NewPusher(o, &Remembered{Dir: dir}) }, "pkg/p200/f3.go"},
	} {
		editFile(t, root, c.edit, "package p // edit "+string(rune('a'+i))+"\n")
		img, stats := push(c.pusher())
		t.Logf("%s: %s", c.how, stats)
		asked := checks.asked()
		for _, h := range last {
			if asked[h] > 0 {
				t.Errorf("%s: the registry was asked about %s, which the last push's manifest named", c.how, h)
			}
		}
		if stats.Remembered == 0 || len(asked) == 0 || len(asked) > stats.Checked {
			t.Errorf("%s: %d blobs taken from the last push, %d asked about (%d checked): want most remembered and the new ones asked", c.how, stats.Remembered, len(asked), stats.Checked)
		}
		expectFetchedTree(t, host, "team/src", root)
		last = manifestBlobs(t, img)
	}
}

// TestARegistryThatLostABlobIsGivenItAgain: a blob the memory names but
// the registry no longer holds (deleted, as a garbage collection would)
// makes the registry refuse the manifest; the push then asks about every
// blob, uploads the lost one and succeeds, and the fetched tree is whole.
func TestARegistryThatLostABlobIsGivenItAgain(t *testing.T) {
	host := testregistry.Start(t)
	ctx := context.Background()
	root := projectTree(t, 300, 4)
	ref := host + "/team/src:dev"
	p := NewPusher(PushOptions{Insecure: true}, &Remembered{Dir: t.TempDir()})
	img, err := PackDir(root, nil, CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Push(ctx, img, ref); err != nil {
		t.Fatal(err)
	}
	// The first layer holds pkg/p000; the edit is elsewhere, so the next
	// artifact names the lost blob again.
	lost := manifestBlobs(t, img)[1]
	req, _ := http.NewRequest(http.MethodDelete, "http://"+host+"/v2/team/src/blobs/"+lost.String(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("deleting blob %s: %v %v", lost, resp, err)
	}
	resp.Body.Close()

	editFile(t, root, "pkg/p250/f0.go", "package p250 // edited\n")
	img, err = PackDir(root, nil, CompressionNone)
	if err != nil {
		t.Fatal(err)
	}
	if manifestBlobs(t, img)[1] != lost {
		t.Fatal("the edit changed the first layer: the case needs it unchanged")
	}
	stats, err := p.Push(ctx, img, ref)
	if err != nil {
		t.Fatalf("the push after the registry lost a blob: %v", err)
	}
	t.Logf("after the loss: %s", stats)
	expectFetchedTree(t, host, "team/src", root)
}
