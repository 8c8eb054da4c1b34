package teamcache

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Prog is a GOCACHEPROG program (`manager helper gocacheprog`, in builder
// pods): the go command's build cache on local disk (Dir, on the
// environment's cache volume) and, on a local miss, the team cache
// (Remote) — the environment's own entries, then those of the environments
// it may read. What the go command puts is kept locally and uploaded to
// the environment's own cache in the background. The protocol is
// cmd/go/internal/cacheprog's: JSON lines on stdin and stdout.
type Prog struct {
	Dir    string
	Remote *Client // nil: local only
	Log    io.Writer

	out      sync.Mutex
	enc      *json.Encoder
	uploads  chan upload
	wg       sync.WaitGroup
	down     atomic.Bool
	hits     atomic.Int64
	uploaded atomic.Int64
}

// progRequest and progResponse are cacheprog.Request and Response.
type progRequest struct {
	ID       int64
	Command  string
	ActionID []byte `json:",omitempty"`
	OutputID []byte `json:",omitempty"`
	BodySize int64  `json:",omitempty"`
}

type progResponse struct {
	ID            int64
	Err           string     `json:",omitempty"`
	KnownCommands []string   `json:",omitempty"`
	Miss          bool       `json:",omitempty"`
	OutputID      []byte     `json:",omitempty"`
	Size          int64      `json:",omitempty"`
	Time          *time.Time `json:",omitempty"`
	DiskPath      string     `json:",omitempty"`
}

type upload struct{ action, output []byte }

// Bounds of the background work: uploads waiting, uploaders, concurrent
// remote reads, and how long close waits for uploads.
const (
	uploadQueue   = 4096
	uploaders     = 4
	remoteReaders = 8
	closeWait     = 2 * time.Minute
)

// Serve answers the go command on in and out until "close" or the end of
// in.
func (p *Prog) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	for _, d := range []string{"a", "o", "tmp"} {
		if err := os.MkdirAll(filepath.Join(p.Dir, d), 0o755); err != nil {
			return err
		}
	}
	p.enc = json.NewEncoder(out)
	p.uploads = make(chan upload, uploadQueue)
	for range uploaders {
		p.wg.Add(1)
		go p.uploader(ctx)
	}
	p.send(progResponse{KnownCommands: []string{"get", "put", "close"}})
	dec := json.NewDecoder(bufio.NewReaderSize(in, 1<<20))
	readers := make(chan struct{}, remoteReaders)
	var gets sync.WaitGroup
	for {
		var req progRequest
		if err := dec.Decode(&req); err != nil {
			gets.Wait()
			p.finish()
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch req.Command {
		case "get":
			readers <- struct{}{}
			gets.Add(1)
			go func() {
				defer func() { <-readers; gets.Done() }()
				p.send(p.get(ctx, req))
			}()
		case "put":
			var body []byte
			if req.BodySize > 0 {
				if err := dec.Decode(&body); err != nil {
					return fmt.Errorf("reading a put's body: %w", err)
				}
			}
			p.send(p.put(req, body))
		case "close":
			gets.Wait()
			p.finish()
			p.send(progResponse{ID: req.ID})
			return nil
		default:
			p.send(progResponse{ID: req.ID, Err: "unknown command " + strconv.Quote(req.Command)})
		}
	}
}

func (p *Prog) send(r progResponse) {
	p.out.Lock()
	defer p.out.Unlock()
	_ = p.enc.Encode(r)
}

// LogPrefix starts every line the program writes into the build's log:
// a failed build's message skips them for the compiler's last words.
const LogPrefix = "devloop build cache: "

func (p *Prog) logf(format string, args ...any) {
	if p.Log != nil {
		_, _ = fmt.Fprintf(p.Log, LogPrefix+format+"\n", args...)
	}
}

// finish waits (a bounded time) for the uploads queued so far.
func (p *Prog) finish() {
	close(p.uploads)
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		p.logf("gave up waiting for %d uploads", len(p.uploads))
	}
	if p.Remote != nil {
		p.logf("%d entries from the team cache, %d uploaded", p.hits.Load(), p.uploaded.Load())
	}
}

func (p *Prog) actionPath(a []byte) string { return filepath.Join(p.Dir, "a", hex.EncodeToString(a)) }
func (p *Prog) outputPath(o []byte) string { return filepath.Join(p.Dir, "o", hex.EncodeToString(o)) }

// get answers from the local disk, then from the team cache.
func (p *Prog) get(ctx context.Context, req progRequest) progResponse {
	if len(req.ActionID) != IDLen {
		return progResponse{ID: req.ID, Err: "bad action ID"}
	}
	if r, ok := p.local(req); ok {
		return r
	}
	if p.Remote == nil || p.down.Load() {
		return progResponse{ID: req.ID, Miss: true}
	}
	tmp, err := os.CreateTemp(filepath.Join(p.Dir, "tmp"), "get-")
	if err != nil {
		return progResponse{ID: req.ID, Err: err.Error()}
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	output, _, miss, err := p.Remote.Get(ctx, req.ActionID, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A cache that cannot answer is a miss: the build compiles.
		if !errors.Is(err, ErrCorrupt) && p.down.CompareAndSwap(false, true) {
			p.logf("team cache unavailable, building without it: %v", err)
		}
		return progResponse{ID: req.ID, Miss: true}
	}
	if miss {
		return progResponse{ID: req.ID, Miss: true}
	}
	if err := os.Rename(tmp.Name(), p.outputPath(output)); err != nil {
		return progResponse{ID: req.ID, Err: err.Error()}
	}
	info, err := os.Stat(p.outputPath(output))
	if err != nil {
		return progResponse{ID: req.ID, Err: err.Error()}
	}
	now := time.Now()
	if err := p.writeAction(req.ActionID, output, info.Size(), now); err != nil {
		return progResponse{ID: req.ID, Err: err.Error()}
	}
	p.hits.Add(1)
	return progResponse{ID: req.ID, OutputID: output, Size: info.Size(), Time: &now, DiskPath: p.outputPath(output)}
}

// local is a hit on the local disk: an action file naming an output
// whose file is there with its size.
func (p *Prog) local(req progRequest) (progResponse, bool) {
	b, err := os.ReadFile(p.actionPath(req.ActionID))
	if err != nil {
		return progResponse{}, false
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return progResponse{}, false
	}
	output, err1 := hex.DecodeString(f[0])
	size, err2 := strconv.ParseInt(f[1], 10, 64)
	nanos, err3 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || len(output) != IDLen {
		return progResponse{}, false
	}
	info, err := os.Stat(p.outputPath(output))
	if err != nil || info.Size() != size {
		return progResponse{}, false
	}
	t := time.Unix(0, nanos)
	return progResponse{ID: req.ID, OutputID: output, Size: size, Time: &t, DiskPath: p.outputPath(output)}, true
}

func (p *Prog) writeAction(action, output []byte, size int64, t time.Time) error {
	return writeFileAtomic(filepath.Join(p.Dir, "tmp"), p.actionPath(action),
		[]byte(fmt.Sprintf("%x %d %d\n", output, size, t.UnixNano())))
}

// put keeps the body locally and queues its upload.
func (p *Prog) put(req progRequest, body []byte) progResponse {
	if len(req.ActionID) != IDLen || len(req.OutputID) != IDLen || int64(len(body)) != req.BodySize {
		return progResponse{ID: req.ID, Err: "bad put request"}
	}
	if sum := sha256.Sum256(body); !bytes.Equal(sum[:], req.OutputID) {
		return progResponse{ID: req.ID, Err: "the body does not match its output ID"}
	}
	if err := writeFileAtomic(filepath.Join(p.Dir, "tmp"), p.outputPath(req.OutputID), body); err != nil {
		return progResponse{ID: req.ID, Err: err.Error()}
	}
	if err := p.writeAction(req.ActionID, req.OutputID, req.BodySize, time.Now()); err != nil {
		return progResponse{ID: req.ID, Err: err.Error()}
	}
	if p.Remote != nil && !p.down.Load() {
		select {
		case p.uploads <- upload{action: req.ActionID, output: req.OutputID}:
		default: // the queue is full: this entry stays local
		}
	}
	return progResponse{ID: req.ID, DiskPath: p.outputPath(req.OutputID)}
}

func (p *Prog) uploader(ctx context.Context) {
	defer p.wg.Done()
	for u := range p.uploads {
		if p.down.Load() {
			continue
		}
		f, err := os.Open(p.outputPath(u.output))
		if err != nil {
			continue
		}
		info, err := f.Stat()
		if err == nil {
			err = p.Remote.Put(ctx, u.action, u.output, f, info.Size())
		}
		_ = f.Close()
		var refused *StatusError
		if errors.As(err, &refused) && refused.refusedEntry() {
			continue
		}
		if err != nil {
			if p.down.CompareAndSwap(false, true) {
				p.logf("team cache unavailable, no more uploads: %v", err)
			}
			continue
		}
		p.uploaded.Add(1)
	}
}

func writeFileAtomic(tmpDir, dst string, data []byte) error {
	f, err := os.CreateTemp(tmpDir, "w-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}
