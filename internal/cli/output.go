package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// palette colours words on a terminal and is a no-op elsewhere.
type palette struct{ on bool }

const (
	ansiRed    = "31"
	ansiGreen  = "32"
	ansiYellow = "33"
	ansiFaint  = "2"
	ansiBold   = "1"
)

func (p palette) paint(code, s string) string {
	if !p.on || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// state colours a phase, a result or a condition status by what it means.
func (p palette) state(s string) string {
	switch s {
	case string(v1alpha1.PhaseReady), string(v1alpha1.ResultPassed), "True", string(v1alpha1.BuildSucceeded):
		return p.paint(ansiGreen, s)
	case string(v1alpha1.PhaseFailed), string(v1alpha1.ResultTimedOut), string(v1alpha1.ResultError), "False", "Stalled":
		return p.paint(ansiRed, s)
	case string(v1alpha1.ResultCancelled), string(v1alpha1.PhaseDisabled):
		return p.paint(ansiFaint, s)
	default:
		return p.paint(ansiYellow, s)
	}
}

func (p palette) faint(s string) string { return p.paint(ansiFaint, s) }
func (p palette) bold(s string) string  { return p.paint(ansiBold, s) }

// colorFor decides colours for w: forced by the options, off with NO_COLOR
// or when w is not a terminal.
func (a *app) colorFor(w io.Writer) palette {
	if a.opts.Color != nil {
		return palette{on: *a.opts.Color}
	}
	if os.Getenv("NO_COLOR") != "" {
		return palette{}
	}
	f, ok := w.(*os.File)
	return palette{on: ok && term.IsTerminal(int(f.Fd()))}
}

// shortDigest is the first 12 hex digits of a digest, as `docker images`
// shows them.
func shortDigest(d string) string {
	_, hex, ok := strings.Cut(d, ":")
	if !ok {
		hex = d
	}
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}

// shortRevision shortens the digest in a revision like
// "dev@sha256:<hex>" or "main@sha1:<hex>".
func shortRevision(r string) string {
	ref, d, ok := strings.Cut(r, "@")
	if !ok {
		return r
	}
	algo, _, _ := strings.Cut(d, ":")
	return ref + "@" + algo + ":" + shortDigest(d)
}

// seconds formats a duration for progress lines: 0.4s, 12.3s, 2m05s.
func seconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// firstLine is the first line of a message, for one-line summaries,
// printable.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return printable(s)
}
