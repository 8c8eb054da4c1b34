package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// notice is what sync tells the supervisor over the socket, one JSON line.
type notice struct {
	// Digest is the image digest whose files are now under the live root.
	Digest string `json:"digest"`
	// Changed is false when nothing was written (the digest was already
	// current, or the tar was empty): the supervisor then only opens its
	// start gate.
	Changed bool `json:"changed"`
}

// reply is the supervisor's answer, one JSON line.
type reply struct {
	// RestartedMs is how long the after-action took, from the notice to
	// the program started again (or the command done).
	RestartedMs int64 `json:"restartedMs"`
	// Started is true when the notice opened the start gate.
	Started bool   `json:"started,omitempty"`
	Error   string `json:"error,omitempty"`
}

// tell sends n to the supervisor listening at socket and waits for its
// reply, until ctx ends.
func tell(ctx context.Context, socket string, n notice) (reply, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return reply{}, fmt.Errorf("no supervisor answers at %s (is the container running under %s?): %w", socket, Path, err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(n); err != nil {
		return reply{}, fmt.Errorf("telling the supervisor: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(conn, maxLine)).ReadBytes('\n')
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return reply{}, fmt.Errorf("waiting for the supervisor's answer: %w", err)
	}
	var r reply
	if err := json.Unmarshal(line, &r); err != nil {
		return reply{}, fmt.Errorf("the supervisor's answer %q: %w", line, err)
	}
	if r.Error != "" {
		return r, errors.New(r.Error)
	}
	return r, nil
}

// maxLine bounds a notice or a reply read from the socket (each a short
// JSON line): a line past it is read as cut short, an error.
const maxLine = 64 << 10

// request is a notice received by the supervisor, with where to answer.
type request struct {
	notice
	received time.Time
	answer   chan<- reply
}

// serve accepts notices on l and hands them to the supervisor's loop, each
// answered on its own connection.
func serve(l net.Listener, requests chan<- request) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return // the listener was closed
		}
		go func() {
			defer conn.Close()
			line, err := bufio.NewReader(io.LimitReader(conn, maxLine)).ReadBytes('\n')
			if err != nil {
				return
			}
			var n notice
			if err := json.Unmarshal(line, &n); err != nil {
				_ = json.NewEncoder(conn).Encode(reply{Error: fmt.Sprintf("supervisor: malformed notice %q", line)})
				return
			}
			answer := make(chan reply, 1)
			requests <- request{notice: n, received: time.Now(), answer: answer}
			_ = json.NewEncoder(conn).Encode(<-answer)
		}()
	}
}
