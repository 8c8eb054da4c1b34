package operatortest

import (
	"fmt"
	"sync"

	"github.com/go-logr/logr"
)

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

// recordingSink passes every line to the sink it wraps and keeps the
// ERROR ones.
type recordingSink struct {
	logr.LogSink
	values []any
}

func recordErrors(sink logr.LogSink) logr.LogSink { return &recordingSink{LogSink: sink} }

func (s *recordingSink) Error(err error, msg string, kv ...any) {
	ns := ""
	all := append(append([]any{}, s.values...), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		if all[i] == "namespace" {
			ns = fmt.Sprint(all[i+1])
		}
	}
	errorLog.mu.Lock()
	errorLog.byNamespace[ns] = append(errorLog.byNamespace[ns], fmt.Sprintf("%s: %v", msg, err))
	errorLog.mu.Unlock()
	s.LogSink.Error(err, msg, kv...)
}

func (s *recordingSink) WithValues(kv ...any) logr.LogSink {
	return &recordingSink{LogSink: s.LogSink.WithValues(kv...), values: append(append([]any{}, s.values...), kv...)}
}

func (s *recordingSink) WithName(name string) logr.LogSink {
	return &recordingSink{LogSink: s.LogSink.WithName(name), values: s.values}
}
