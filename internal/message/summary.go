package message

import (
	"regexp"
	"strings"
)

// MaxSummary bounds the one-line summary kubectl shows in the STATUS
// column (status.summary): a line of `kubectl get devenv -A` stays
// readable. The whole message stays in the Ready condition.
const MaxSummary = 120

var (
	// digestHex is the hex of a sha256 digest past its first 12
	// characters: enough to tell digests apart in a summary.
	digestHex = regexp.MustCompile(`(sha256:[0-9a-f]{12})[0-9a-f]{52}`)
	// httpPrefix is how Go's HTTP client names the request that failed
	// (`Get "https://host/v2/": `): the URL repeats the host the rest
	// names, once per scheme tried.
	httpPrefix = regexp.MustCompile(`\b(?:Get|Head|Put|Post|Patch|Delete) "[^"]*": `)
	// fieldPath is the spec field a message tells the user to check.
	fieldPath = regexp.MustCompile(`\bspec\.[A-Za-z0-9_.\[\]-]*[A-Za-z0-9_\]]`)
)

// Summary is msg as one short sentence of at most MaxSummary bytes: the
// component (the message's first part), what is wrong (its next part and
// its root cause, its last part) and the spec field to check when msg
// names one. Digests are cut to 12 hex characters, the URLs of failed
// requests dropped and repeated clauses said once: a pull failure quoted
// a digest three times, an unknown host gave the https and the http error
// in full, and STATUS cells reached 800 characters.
func Summary(msg string) string {
	s := Condense(msg)
	s = digestHex.ReplaceAllString(s, "$1")
	s = httpPrefix.ReplaceAllString(s, "")
	s = dropRepeatedClauses(s)
	if len(s) <= MaxSummary {
		return s
	}
	hint := ""
	if f := fieldPath.FindString(s); f != "" && len(f) < MaxSummary/2 {
		hint = " (check " + f + ")"
	}
	return Truncate(headAndTail(strings.Split(s, ": "), MaxSummary-len(hint)), MaxSummary-len(hint)) + hint
}

// dropRepeatedClauses keeps the first of clauses ("; "-separated) that
// say the same, ignoring the parts of them that were cut above.
func dropRepeatedClauses(s string) string {
	clauses := strings.Split(s, "; ")
	seen := map[string]bool{}
	kept := clauses[:0]
	for _, c := range clauses {
		if key := strings.TrimSpace(c); !seen[key] {
			seen[key] = true
			kept = append(kept, c)
		}
	}
	return strings.Join(kept, "; ")
}

// headAndTail joins the first parts (what failed, and what went wrong)
// and as many of the last parts (the root cause) as fit in n bytes, with
// "..." where parts were left out.
func headAndTail(parts []string, n int) string {
	const gap = ": ... "
	// The head takes what went wrong when it fits, and further parts
	// while a short root cause ("no such host", "not found") still fits
	// after them.
	const roomForCause = 20
	head := parts[0]
	i := 1
	if len(parts) > 2 && len(head)+2+len(parts[1]) <= n {
		head += ": " + parts[1]
		i++
	}
	for i < len(parts)-1 && len(head)+2+len(parts[i])+len(gap)+roomForCause <= n {
		head += ": " + parts[i]
		i++
	}
	tail := ""
	for j := len(parts) - 1; j >= i; j-- {
		next := parts[j]
		if tail != "" {
			next += ": " + tail
		}
		if len(head)+len(gap)+len(next) > n {
			break
		}
		tail = next
		if j == i {
			return head + ": " + tail
		}
	}
	if tail == "" {
		return head
	}
	return head + gap + tail
}
