package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/ui"
)

// The logs code prints "[pod/container] text" lines, possibly in pieces;
// the page gets one LogLine per line with its stream, and an endless line
// is passed on in bounded pieces.
func TestLineEmitterSplitsStreamsAndBoundsLines(t *testing.T) {
	var got []ui.LogLine
	l := &lineEmitter{emit: func(x ui.LogLine) { got = append(got, x) }}
	fmt.Fprint(l, "[web-1/web] hello ")
	fmt.Fprint(l, "world\nplain line\n[not a stream] x\n")
	want := []string{"web-1/web|hello world", "|plain line", "|[not a stream] x"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if s := got[i].Stream + "|" + got[i].Text; s != w {
			t.Errorf("line %d: %q, want %q", i, s, w)
		}
	}
	got = nil
	fmt.Fprint(l, strings.Repeat("x", 70<<10))
	if len(got) != 1 || len(l.rest) != 0 {
		t.Fatalf("an endless line: %d lines emitted, %d bytes held; want it passed on", len(got), len(l.rest))
	}
}
