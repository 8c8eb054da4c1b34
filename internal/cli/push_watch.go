package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchAndPush pushes once, then again after every burst of changes under
// the directory, until ctx ends (Ctrl-C) or the user types q. A failed
// push or rollout is reported and the watch goes on: the next save may fix
// it. Lines on stdin steer it: p pauses, r resumes, an empty line pushes
// now. A change made while a rollout is followed is pushed as soon as its
// debounce ends; the follow of the older change stops then.
func (a *app) watchAndPush(ctx context.Context, s *session, t *pushTarget, f *pushFlags) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", t.dir, err)
	}
	defer w.Close()
	m, err := loadIgnore(t.dir)
	if err != nil {
		return err
	}
	if err := watchTree(w, t.dir, t.dir, m); err != nil {
		return err
	}
	// Each change is pushed from the environment as this watch keeps it,
	// not from a read per change.
	t.feed = a.feedEnvironment(ctx, s, t.read)
	commands := make(chan string)
	done := make(chan struct{})
	defer close(done)
	go readCommands(a, commands, done)
	if f.portForward {
		defer a.startPortForwards(ctx, s, t.env, f.label)()
	}

	// A change is pushed as soon as its debounce ends, also while the
	// change before it is still followed: that follow is stopped (the
	// operator supersedes it anyway) rather than waited for.
	var stopFollow context.CancelFunc
	var followed chan struct{}
	stopFollowing := func(newer bool) {
		if stopFollow == nil {
			return
		}
		select {
		case <-followed:
		default:
			if newer {
				fmt.Fprintln(a.out(), "a newer change: no longer following the one before it")
			}
		}
		stopFollow()
		<-followed
		stopFollow = nil
	}
	defer stopFollowing(false)
	watching := func() {
		if ctx.Err() == nil {
			fmt.Fprintf(a.out(), "watching %s for changes (p pause, r resume, Enter push now, q stop)\n", t.dir)
		}
	}
	// changes is the burst since the last push (push_settle.go).
	var changes burst
	push := func() {
		changes.pushed()
		stopFollowing(true)
		follow, err := a.pushChange(ctx, s, t, f)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(a.errOut(), "push failed:", err)
		}
		if follow == nil {
			watching()
			return
		}
		fctx, cancel := context.WithCancel(ctx)
		stopFollow, followed = cancel, make(chan struct{})
		go func(done chan<- struct{}) {
			defer close(done)
			if err := follow(fctx); err != nil && fctx.Err() == nil {
				fmt.Fprintln(a.errOut(), "push failed:", err)
			}
			if fctx.Err() == nil {
				watching()
			}
		}(followed)
	}
	push()

	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	paused, dirty := false, false
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(a.out(), "stopped watching")
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("the file watcher stopped")
			}
			rel, err := filepath.Rel(t.dir, ev.Name)
			if err != nil || rel == "." {
				continue
			}
			rel = filepath.ToSlash(rel)
			base := filepath.Base(ev.Name)
			if base == ".gitignore" || base == DevloopIgnoreFile {
				if nm, err := loadIgnore(t.dir); err == nil {
					m = nm
				}
			}
			isDir := false
			if ev.Has(fsnotify.Create) {
				if err := watchTree(w, t.dir, ev.Name, m); err == nil {
					isDir = isDirectory(ev.Name)
				}
			}
			if m.Exclude(rel, isDir) {
				continue
			}
			dirty = true
			changes.note(ev)
			if !paused {
				debounce.Reset(changes.quiet(f.debounce))
			}
		case err := <-w.Errors:
			fmt.Fprintln(a.errOut(), "watch:", err)
		case <-debounce.C:
			if dirty && !paused {
				dirty = false
				push()
			}
		case cmd := <-commands:
			switch cmd {
			case "p":
				paused = true
				debounce.Stop()
				fmt.Fprintln(a.out(), "paused: changes are noted, not pushed (r resumes)")
			case "r":
				paused = false
				fmt.Fprintln(a.out(), "resumed")
				if dirty {
					dirty = false
					push()
				}
			case "":
				dirty = false
				push()
			case "q":
				fmt.Fprintln(a.out(), "stopped watching")
				return nil
			default:
				fmt.Fprintf(a.out(), "unknown command %q: p pause, r resume, Enter push now, q stop\n", cmd)
			}
		}
	}
}

// readCommands sends each line of stdin, trimmed, until stdin ends.
func readCommands(a *app, out chan<- string, done <-chan struct{}) {
	if a.streams.In == nil {
		return
	}
	sc := bufio.NewScanner(a.streams.In)
	for sc.Scan() {
		select {
		case out <- strings.TrimSpace(strings.ToLower(sc.Text())):
		case <-done:
			return
		}
	}
}

// watchTree watches dir and every directory below it that is not ignored
// (fsnotify watches are not recursive).
func watchTree(w *fsnotify.Watcher, root, dir string, m *ignoreMatcher) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if rel, err := filepath.Rel(root, path); err == nil && rel != "." && m.Exclude(filepath.ToSlash(rel), true) {
			return fs.SkipDir
		}
		return w.Add(path)
	})
}

func isDirectory(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}
