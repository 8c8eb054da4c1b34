package operatortest

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/devloop-dev/devloop/internal/pods"
)

// FakeLogs serves container logs the way the kubelet would, from what a
// test sets.
type FakeLogs struct {
	mu   sync.Mutex
	logs map[string]string // namespace/pod/container -> log
}

// Set is the log of the container.
func (f *FakeLogs) Set(ns, pod, container, log string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logs == nil {
		f.logs = map[string]string{}
	}
	f.logs[ns+"/"+pod+"/"+container] = log
}

func (f *FakeLogs) TailLog(_ context.Context, ns, pod, container string, _ int64) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.logs[ns+"/"+pod+"/"+container]
	if !ok {
		return "", fmt.Errorf("no log for %s/%s/%s", ns, pod, container)
	}
	return l, nil
}

// CountLines counts the lines of the log the test set that match.
func (f *FakeLogs) CountLines(ctx context.Context, ns, pod, container string, match func(string) bool) (int, error) {
	l, err := f.TailLog(ctx, ns, pod, container, 0)
	if err != nil {
		return 0, err
	}
	return pods.CountMatching(strings.NewReader(l), match)
}
