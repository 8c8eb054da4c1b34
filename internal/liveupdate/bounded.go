package liveupdate

import (
	"bufio"
	"errors"
	"fmt"
	"sync"

	"github.com/devloop-dev/devloop/internal/supervisor"
)

// What a sync reads back comes from the tenant's container: the program
// at the supervisor's path is the image's to choose. Every read of it is
// bounded, so a container that answers without end fails its own sync
// rather than growing the operator's heap until every tenant stops.

// maxAnswer bounds the supervisor's answer to one sync (a JSON line of a
// digest, a duration and at most a short error: well under 1 KiB).
const maxAnswer = 64 << 10

// maxStderr bounds the stderr kept of a sync's exec, for its error.
const maxStderr = 4 << 10

// errAnswerTooLong is an answer past maxAnswer.
var errAnswerTooLong = fmt.Errorf("the supervisor's answer is longer than %d KiB", maxAnswer>>10)

// readAnswer reads one line of at most maxAnswer bytes, without its
// newline.
func readAnswer(r *bufio.Reader) ([]byte, error) {
	line, err := supervisor.ReadLine(r, maxAnswer)
	if errors.Is(err, supervisor.ErrLineTooLong) {
		return nil, errAnswerTooLong
	}
	return line, err
}

// boundedBuffer keeps what is written up to max bytes. Past it, with
// refuse, a write fails (the exec's copy stops: the answer is refused);
// without, the rest is dropped (stderr, kept only to explain a failure).
// It is safe for the exec's writer and a reader.
type boundedBuffer struct {
	max    int
	refuse bool

	mu   sync.Mutex
	b    []byte
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - len(b.b)
	if len(p) <= room {
		b.b = append(b.b, p...)
		return len(p), nil
	}
	b.over = true
	if b.refuse {
		return 0, errAnswerTooLong
	}
	b.b = append(b.b, p[:max(room, 0)]...)
	return len(p), nil
}

// String is what was kept.
func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}

// Over reports whether more than max bytes were written.
func (b *boundedBuffer) Over() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}
