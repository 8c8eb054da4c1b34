package source

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"time"
)

// Downloads are bounded while they stream, not after: an artifact body by
// a LimitReader, an OCI layer by its descriptor's size (which the registry
// client enforces as it reads) checked against downloadLimit first, and a
// git pack, which go-git writes to disk itself, by watching the disk it
// takes (watchSize).

// downloadLimit bounds the bytes downloaded for a source of at most
// maxSize extracted bytes: archives carry headers and padding (a tar entry
// takes at least 512 bytes), and a git object database holds history.
func downloadLimit(maxSize int64) int64 {
	return 2*maxSize + downloadSlack
}

// downloadSlack is what any source may download beyond twice its size.
var downloadSlack int64 = 64 << 20

// errTooMuchDownloaded is the cause of a context a size watch cancelled.
var errTooMuchDownloaded = errors.New("download exceeds its limit")

// watchSize returns a context that is cancelled once the files under dir
// take more than limit bytes, checked every interval. stop ends the watch
// and reports whether the files went over the limit.
func watchSize(ctx context.Context, dir string, limit int64) (context.Context, func() bool) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	fired := make(chan bool, 1)
	go func() {
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				fired <- false
				return
			case <-ctx.Done():
				fired <- context.Cause(ctx) == errTooMuchDownloaded
				return
			case <-t.C:
				if dirBytes(dir) > limit {
					cancel(errTooMuchDownloaded)
				}
			}
		}
	}()
	return ctx, func() bool {
		close(done)
		over := <-fired
		cancel(nil)
		// A download that finished between two looks is judged the same.
		return over || dirBytes(dir) > limit
	}
}

// watchInterval is how often watchSize looks; a download outruns it by at
// most what arrives in that time.
var watchInterval = 200 * time.Millisecond

// dirBytes sums the sizes of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
