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
// A burst of such files alone settles after moveSettle; a write in place,
// a removal, or a file that appears empty (created, then written) waits
// the whole debounce, as an editor's save of several files needs.
type burst struct {
	seen, onlyMoves bool
}

// note adds one event of the burst.
func (b *burst) note(ev fsnotify.Event) {
	if !b.seen {
		b.seen, b.onlyMoves = true, true
	}
	if !b.onlyMoves {
		return
	}
	if ev.Op != fsnotify.Create {
		b.onlyMoves = false
		return
	}
	info, err := os.Lstat(ev.Name)
	if err != nil || !info.Mode().IsRegular() || info.Size() == 0 {
		b.onlyMoves = false
	}
}

// quiet is how long the burst must be quiet before it is pushed.
func (b *burst) quiet(debounce time.Duration) time.Duration {
	if b.seen && b.onlyMoves {
		return min(debounce, moveSettle)
	}
	return debounce
}

// pushed starts the next burst.
func (b *burst) pushed() { *b = burst{} }
