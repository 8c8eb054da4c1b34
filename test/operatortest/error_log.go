package operatortest

import "sync"

// errorLog keeps the ERROR lines the operator logs, by the namespace of
// the object they are about, so a test can say which of its environments
// logged one (an expected wait must not).
var errorLog = &errorLines{byNamespace: map[string][]string{}}

type errorLines struct {
	mu          sync.Mutex
	byNamespace map[string][]string
}

// ErrorLogLines are the messages of the ERROR lines the operator logged
// for objects in ns ("Reconciler error: registry unavailable ...").
func ErrorLogLines(ns string) []string {
	errorLog.mu.Lock()
	defer errorLog.mu.Unlock()
	return append([]string(nil), errorLog.byNamespace[ns]...)
}

func (l *errorLines) add(ns, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byNamespace[ns] = append(l.byNamespace[ns], line)
}
