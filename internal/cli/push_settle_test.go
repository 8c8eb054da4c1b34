package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// A file moved into place whole (as go build writes its output) settles
// after moveSettle; a write in place, an empty file then written, or a
// removal waits the whole debounce. The events are the kernel's, through
// the watcher push --watch uses.
func TestABinaryMovedIntoPlaceSettlesAtOnce(t *testing.T) {
	const debounce = 300 * time.Millisecond
	aside := t.TempDir()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir string)
		want   time.Duration
	}{
		{"moved into place, over the last build", func(t *testing.T, dir string) {
			write(t, filepath.Join(aside, "server"), "new build")
			if err := os.Rename(filepath.Join(aside, "server"), filepath.Join(dir, "server")); err != nil {
				t.Fatal(err)
			}
		}, moveSettle},
		{"go build's own way: a temporary file beside it, then the output moved in", func(t *testing.T, dir string) {
			tmp := filepath.Join(dir, "server-go-tmp-umask")
			write(t, tmp, "")
			if err := os.Remove(tmp); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(aside, "server"), "new build")
			if err := os.Rename(filepath.Join(aside, "server"), filepath.Join(dir, "server")); err != nil {
				t.Fatal(err)
			}
		}, moveSettle},
		{"go build -o into the watched directory", func(t *testing.T, dir string) {
			mod := t.TempDir()
			write(t, filepath.Join(mod, "go.mod"), "module example.com/settle\n")
			write(t, filepath.Join(mod, "main.go"), "package main\n\nfunc main() { println(\"v2\") }\n")
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "built"), ".")
			cmd.Dir = mod
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
		}, moveSettle},
		{"mode changed (go build of the same output)", func(t *testing.T, dir string) {
			if err := os.Chmod(filepath.Join(dir, "server"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, moveSettle},
		{"written in place", func(t *testing.T, dir string) { write(t, filepath.Join(dir, "server"), "edited") }, debounce},
		{"created empty, then written", func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "new.go"))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond) // the create's event is read before the write
			_, _ = f.WriteString("package main")
			_ = f.Close()
		}, debounce},
		{"removed", func(t *testing.T, dir string) { _ = os.Remove(filepath.Join(dir, "server")) }, debounce},
		{"moved into place beside an empty file that stays", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "new.go"), "")
			write(t, filepath.Join(aside, "server"), "new build")
			if err := os.Rename(filepath.Join(aside, "server"), filepath.Join(dir, "server")); err != nil {
				t.Fatal(err)
			}
		}, debounce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, filepath.Join(dir, "server"), "last build")
			w, err := fsnotify.NewWatcher()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := w.Add(dir); err != nil {
				t.Fatal(err)
			}
			var b burst
			tc.change(t, dir)
			// Every event of the change, until the watcher is quiet.
			for seen := 0; ; seen++ {
				select {
				case ev := <-w.Events:
					b.note(ev)
					continue
				case <-time.After(200 * time.Millisecond):
				}
				if seen == 0 {
					t.Fatal("no event")
				}
				break
			}
			if got := b.quiet(debounce); got != tc.want {
				t.Errorf("quiet %s, want %s", got, tc.want)
			}
			b.pushed()
			if got := b.quiet(debounce); got != debounce {
				t.Errorf("after the push: quiet %s, want the debounce", got)
			}
		})
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}
