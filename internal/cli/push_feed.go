package cli

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// envFeed is the newest version of one environment a watch delivered,
// kept for the whole of a push --watch session: each change is pushed
// from it instead of reading the environment first (issue 46: a read is a
// round trip before the upload, 40 ms on a home uplink, on every change).
// What a push takes from it is safe a moment stale: the spec (rarely
// changed mid-session; the next version follows within the watch's lag),
// the source digest status names (a match is still checked against the
// registry before anything is skipped) and the annotations a merge patch
// is computed from (it sends only the keys it sets).
type envFeed struct {
	mu   sync.Mutex
	last *v1alpha1.DevEnvironment // nil while no watch is open
}

// latest is the environment as the open watch last saw it; nil when no
// watch is open (the caller reads it then).
func (f *envFeed) latest() *v1alpha1.DevEnvironment {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *envFeed) set(env *v1alpha1.DevEnvironment) {
	f.mu.Lock()
	f.last = env
	f.mu.Unlock()
}

// feedEnvironment opens a watch of env from the version read and keeps
// what it delivers until ctx ends. The first watch is opened before it
// returns, so the session's second push already has it; a watch that
// cannot be opened (a user who may get but not watch) leaves the feed
// empty and every push reads, as before. A watch that ends (the API
// server's timeout, 410 Gone) is opened again from a fresh read after the
// poll interval; the feed is empty meanwhile.
func (a *app) feedEnvironment(ctx context.Context, s *session, env *v1alpha1.DevEnvironment) *envFeed {
	f := &envFeed{}
	if s.watcher == nil || env == nil {
		return f
	}
	w := openEnvWatch(ctx, s, env)
	if w == nil {
		return f
	}
	f.set(env)
	go func() {
		for {
			f.follow(w, env)
			f.set(nil)
			select {
			case <-ctx.Done():
				return
			case <-time.After(a.opts.PollInterval):
			}
			read, err := s.getEnv(ctx, env.Name)
			if err != nil {
				continue
			}
			if w = openEnvWatch(ctx, s, read); w == nil {
				continue
			}
			env = read
			f.set(env)
		}
	}()
	return f
}

// follow keeps each version w delivers until it ends.
func (f *envFeed) follow(w watch.Interface, env *v1alpha1.DevEnvironment) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			if next, ok := ev.Object.(*v1alpha1.DevEnvironment); ok {
				f.set(next)
			}
		case watch.Bookmark:
		default: // deleted, or the watch's error: read again
			return
		}
	}
}

// openEnvWatch watches env from its version; nil when it cannot.
func openEnvWatch(ctx context.Context, s *session, env *v1alpha1.DevEnvironment) watch.Interface {
	w, err := s.watcher.Watch(ctx, &v1alpha1.DevEnvironmentList{}, client.InNamespace(env.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", env.Name)},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: env.ResourceVersion, AllowWatchBookmarks: true}})
	if err != nil {
		return nil
	}
	return w
}
