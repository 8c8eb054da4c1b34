package ownwrites_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/ownwrites"
	"github.com/devloop-dev/devloop/internal/testenv"
)

var admin client.Client

func TestMain(m *testing.M) {
	os.Exit(testenv.RunWithClient(m, func(_ *envtest.Environment, c client.Client) { admin = c }))
}

// laggingCache is a cache whose watch has not delivered the writes since
// hold: it reads every environment as it was then. The writes go to the
// API server.
type laggingCache struct {
	client.Client
	held *v1alpha1.DevEnvironment
}

func (l *laggingCache) hold(env *v1alpha1.DevEnvironment) { l.held = env.DeepCopy() }

func (l *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if env, ok := obj.(*v1alpha1.DevEnvironment); ok && l.held != nil {
		l.held.DeepCopyInto(env)
		return nil
	}
	return l.Client.Get(ctx, key, obj, opts...)
}

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	reads atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.reads.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestReadsAreNeverOlderThanTheLastWrite: a status written through the
// client is what the next read returns although the cache still holds
// the version before it (read through the cache alone, the older status
// comes back, which a reconcile would work from and write back). A cache
// that is current costs no read of the API server; one that holds
// someone else's later write costs one, then none.
func TestReadsAreNeverOlderThanTheLastWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, admin, "ownwrites")
	env := &v1alpha1.DevEnvironment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "env"}}
	g.Expect(admin.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	cache := &laggingCache{Client: admin}
	live := &countingReader{Reader: admin}
	c := ownwrites.New(cache, live)

	cur := &v1alpha1.DevEnvironment{}
	g.Expect(c.Get(ctx, key, cur)).To(Succeed())
	cache.hold(cur)
	before := cur.DeepCopy()
	cur.Status.ObservedGeneration = 7
	g.Expect(c.Status().Patch(ctx, cur, client.MergeFrom(before))).To(Succeed())

	stale := &v1alpha1.DevEnvironment{}
	g.Expect(cache.Get(ctx, key, stale)).To(Succeed())
	g.Expect(stale.Status.ObservedGeneration).To(BeZero(), "the cache lags the write")
	read := &v1alpha1.DevEnvironment{}
	g.Expect(c.Get(ctx, key, read)).To(Succeed())
	g.Expect(read.Status.ObservedGeneration).To(Equal(int64(7)), "the client reads the written status")
	g.Expect(read.ResourceVersion).To(Equal(cur.ResourceVersion))
	g.Expect(live.reads.Load()).To(Equal(int32(1)))

	// The cache catches up: no read of the API server.
	cache.hold(read)
	g.Expect(c.Get(ctx, key, &v1alpha1.DevEnvironment{})).To(Succeed())
	g.Expect(live.reads.Load()).To(Equal(int32(1)))

	// Someone else writes, and the cache has it: one read finds the cache
	// current, and the cache is trusted again.
	patched := read.DeepCopy()
	patched.Annotations = map[string]string{"someone": "else"}
	g.Expect(admin.Patch(ctx, patched, client.MergeFrom(read))).To(Succeed())
	cache.hold(patched)
	for range 2 {
		got := &v1alpha1.DevEnvironment{}
		g.Expect(c.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Annotations).To(HaveKeyWithValue("someone", "else"))
	}
	g.Expect(live.reads.Load()).To(Equal(int32(2)))
}
