package supervisor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Frame heads one sync in a stream: a JSON line, then Size bytes of the
// sync's tar. `sync --stream` reads frames from stdin until it closes and
// answers each with one JSON line on stdout (a StreamReply), so the
// operator can keep one exec per container open and pay its setup once,
// not on every live update.
type Frame struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
	// Delta: the body is a delta frame's (DeltaTar), its files deltas
	// against those the previous sync wrote.
	Delta bool `json:"delta,omitempty"`
}

// StreamReply answers a Frame: the sync's result, or why it failed (the
// stream goes on either way).
type StreamReply struct {
	SyncResult
	Error string `json:"error,omitempty"`
}

// maxFrameHeader bounds a frame's header line.
const maxFrameHeader = 4096

// Stream runs the syncs framed on in, each bounded by timeout, answering
// each on out, until in ends (nil) or a frame cannot be read (an error:
// the stream is out of step and must end).
func Stream(ctx context.Context, root, orig string, timeout time.Duration, in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	enc := json.NewEncoder(out)
	for {
		line, err := readLine(r)
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading a frame: %w", err)
		}
		var f Frame
		if err := json.Unmarshal(line, &f); err != nil || f.Size < 0 {
			return fmt.Errorf("malformed frame %q", truncate(line))
		}
		body := io.LimitReader(r, f.Size)
		syncCtx, cancel := context.WithTimeout(ctx, timeout)
		var res SyncResult
		if f.Delta {
			if err = readDeltaMagic(body); err == nil {
				res, err = syncTar(syncCtx, root, orig, f.Digest, body, true)
			}
		} else {
			res, err = syncTar(syncCtx, root, orig, f.Digest, body, false)
		}
		cancel()
		// Whatever the tar held past its end, or all of it after a
		// failure, belongs to this frame.
		if _, derr := io.Copy(io.Discard, body); derr != nil {
			return fmt.Errorf("reading frame %s: %w", f.Digest, derr)
		}
		reply := StreamReply{SyncResult: res}
		if err != nil {
			reply.Error = err.Error()
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
}

// ErrLineTooLong is a line longer than ReadLine's bound.
var ErrLineTooLong = errors.New("line too long")

// ReadLine reads one line of at most max bytes (its newline counted)
// without its newline; a longer one is refused with ErrLineTooLong before
// more than a buffer's worth past max is held. Both ends of the protocol
// read what the other side wrote through it: the supervisor a frame's
// header, the operator a sync's answer from the tenant's container.
func ReadLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max {
			return nil, ErrLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

// readLine reads a frame's header line, refusing a long one.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := ReadLine(r, maxFrameHeader)
	if errors.Is(err, ErrLineTooLong) {
		return nil, fmt.Errorf("frame header longer than %d bytes", maxFrameHeader)
	}
	return line, err
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
