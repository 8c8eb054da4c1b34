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
