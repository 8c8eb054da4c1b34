package cli

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// followWatch watches env from the version read, passing each new version
// to seen, until seen says done (true, with seen's error), the watch
// ends or cannot be opened, expired is closed or ctx ends (false: the
// caller reads again after its poll interval, so a watch that a proxy
// cuts as it opens costs a poll, never a busy loop, or stops).
func (a *app) followWatch(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, expired <-chan struct{},
	seen func(*v1alpha1.DevEnvironment) (bool, error)) (bool, error) {
	if s.watcher == nil {
		return false, nil
	}
	list := &v1alpha1.DevEnvironmentList{}
	w, err := s.watcher.Watch(ctx, list, client.InNamespace(env.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", env.Name)},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: env.ResourceVersion, AllowWatchBookmarks: true}})
	if err != nil {
		return false, nil // no watch (forbidden, say): the caller polls
	}
	defer w.Stop()
	// The progress line's "still" reminder is printed on a look; a
	// quiet watch looks again at what it saw last, without a read.
	remind := time.NewTicker(a.opts.PollInterval)
	defer remind.Stop()
	last := env
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				next, ok := ev.Object.(*v1alpha1.DevEnvironment)
				if !ok {
					continue
				}
				last = next
				if done, err := seen(next); done {
					return true, err
				}
			case watch.Bookmark:
			default: // deleted (the next read says so), or the watch's error (410 Gone: read again)
				return false, nil
			}
		case <-remind.C:
			if done, err := seen(last); done {
				return true, err
			}
		case <-expired:
			return false, nil
		case <-ctx.Done():
			return false, nil
		}
	}
}
