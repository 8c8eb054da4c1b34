// Package message bounds the human text devloop writes into status,
// conditions and events: a message is short, and never a dump.
package message

import "strings"

// MaxEventNote keeps an event's note below the API's 1 KiB limit.
const MaxEventNote = 1000

// Truncate cuts s to at most n bytes, marking the cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// LastLine is the last non-empty line of s (a log's tail), at most 300
// bytes.
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return Truncate(s, 300)
}

// Condense puts a multi-line message (a Helm error listing its causes,
// "1 error occurred:\n\t* job failed: BackoffLimitExceeded") on one line,
// so a status column or a condition shows the cause and not just the
// first line: lines trimmed, list bullets dropped, a line ending in ':'
// followed by a space, others by "; ".
func Condense(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimSpace(strings.TrimPrefix(line, "* "))
		if line == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(line)
	}
	return b.String()
}
