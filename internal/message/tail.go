package message

import (
	"strings"
	"sync"
)

// Tail is a writer that keeps the last Max bytes written to it: the end
// of a command's output, however long it runs. Safe for concurrent
// writers (a command's stdout and stderr).
type Tail struct {
	Max int

	mu sync.Mutex
	b  []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.Max:]...)
	}
	return len(p), nil
}

// String is what was kept, without trailing newlines.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimRight(string(t.b), "\n")
}
