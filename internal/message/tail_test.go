package message

import (
	"strings"
	"testing"
)

// TestTailKeepsTheEnd: however much is written, the last Max bytes are
// kept, without trailing newlines.
func TestTailKeepsTheEnd(t *testing.T) {
	tail := &Tail{Max: 10}
	for i := 0; i < 1000; i++ {
		if _, err := tail.Write([]byte("line " + strings.Repeat("x", i%3) + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = tail.Write([]byte("the end\n\n"))
	if got := tail.String(); got != "\nthe end" {
		t.Fatalf("kept %q, want the last 10 bytes without trailing newlines", got)
	}
}
