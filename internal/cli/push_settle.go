package cli

import (
	"os"
	"time"

	"github.com/fsnotify/fsnotify"
)

// moveSettle is how long a burst of files moved into place must be quiet
// before it is pushed.
const moveSettle = 10 * time.Millisecond

// burst is the changes seen since the last push, as far as they tell how
// long to wait for the next one. go build, and most tools that write an
// output, write it aside and rename it into place: the file is whole when
// it appears, and waiting the debounce after it only delays the change.
// A burst of such files alone settles after moveSettle, also with a
// temporary file that appeared empty and was removed within it (go build
// makes one beside its output to learn the umask) and mode changes; a
// write in place, a removal of another file, or a file that appears empty
// and stays (created, then written) waits the whole debounce, as an
// editor's save of several files needs.
type burst struct {
	seen, onlyMoves bool
	// empty are the files that appeared empty in this burst and are still
	// there: being written, or temporary.
	empty map[string]bool
}

// note adds one event of the burst.
func (b *burst) note(ev fsnotify.Event) {
	if !b.seen {
		b.seen, b.onlyMoves, b.empty = true, true, map[string]bool{}
	}
	if !b.onlyMoves {
		return
	}
	switch {
	case ev.Has(fsnotify.Write):
		b.onlyMoves = false
	case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		if !b.empty[ev.Name] {
			b.onlyMoves = false
		}
		delete(b.empty, ev.Name)
	case ev.Has(fsnotify.Create):
		info, err := os.Lstat(ev.Name)
		switch {
		case err != nil:
			// Gone already: a temporary file, if its removal follows.
			b.empty[ev.Name] = true
		case !info.Mode().IsRegular():
			b.onlyMoves = false
		case info.Size() == 0:
			b.empty[ev.Name] = true
		}
	}
}

// quiet is how long the burst must be quiet before it is pushed.
func (b *burst) quiet(debounce time.Duration) time.Duration {
	if b.seen && b.onlyMoves && len(b.empty) == 0 {
		return min(debounce, moveSettle)
	}
	return debounce
}

// pushed starts the next burst.
func (b *burst) pushed() { *b = burst{} }
