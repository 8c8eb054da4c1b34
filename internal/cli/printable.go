package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// printable is s as the plugin prints a string a tenant controls
// (condition and component messages, build and test log tails, update
// reasons, errors quoting them): a build, a test or a chart can write
// those, and a terminal acts on the control sequences in what it is
// sent — set the window title (ESC ] 0; ... BEL), clear the screen
// (ESC [ 2J), rewrite a line (CR), reorder text (bidi overrides), and on
// some terminals answer back as if typed. Every control character but
// newline and tab is replaced by a visible escape (\x1b, \r, \u009b,
// \u202e), as are bytes that are not UTF-8. The plugin's own colours are
// added after this, around text already made printable.
func printable(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControlRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape says whether printable changes s.
func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || isControlRune(r) {
			return true
		}
		i += size
	}
	return false
}

// isControlRune is a C1 control (8-bit CSI, OSC, ...) or a character
// that reorders or hides the text around it (bidi marks, embeddings,
// overrides and isolates).
func isControlRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
