package operatortest

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
)

// One operator runs for the whole package, and most of what it logs as an
// error is what a test caused on purpose: a registry taken down, a spec
// that must stall, a conflict retried. Written to stderr, those lines are
// pages of stacks in `make test` whenever any test of the package fails,
// and hide the failure. So each ERROR line goes to the log of the test
// whose namespace it is about (t.Log: printed only when that test fails,
// or with -v); a line about a namespace no running test owns (an
// environment deleted after its test) is dropped; a line about no
// namespace at all (the manager's own) still goes to stderr.
// DEVLOOP_TEST_VERBOSE=1 writes every line to stderr, Info included.

// testLogs are the tests running now, by the namespaces they made.
type testLogs struct {
	mu          sync.RWMutex
	byNamespace map[string]testing.TB
}

var testLog = &testLogs{byNamespace: map[string]testing.TB{}}

// logTo sends the operator's ERROR lines about objects in ns to t's log
// until t ends.
func logTo(t testing.TB, ns string) {
	testLog.mu.Lock()
	testLog.byNamespace[ns] = t
	testLog.mu.Unlock()
	// Cleanups run before t is done, and the write below holds the read
	// lock while it logs, so nothing is logged to t after it ended (which
	// would panic).
	t.Cleanup(func() {
		testLog.mu.Lock()
		delete(testLog.byNamespace, ns)
		testLog.mu.Unlock()
	})
}

// write logs line to the test that owns ns, and says whether one did.
func (l *testLogs) write(ns, line string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	t, ok := l.byNamespace[ns]
	if ok {
		t.Log(line)
	}
	return ok
}

// testSink is the operator's log in the tests: every ERROR line is kept
// by namespace (ErrorLogLines) and written where the comment above says.
type testSink struct {
	verbose logr.LogSink // DEVLOOP_TEST_VERBOSE: everything, to stderr
	stderr  io.Writer    // ERROR lines about no namespace
	logs    *testLogs
	name    string
	values  []any
}

func newTestSink(verbose logr.LogSink, stderr io.Writer, logs *testLogs) *testSink {
	return &testSink{verbose: verbose, stderr: stderr, logs: logs}
}

func (s *testSink) Init(info logr.RuntimeInfo) {
	if s.verbose != nil {
		s.verbose.Init(info)
	}
}

// Enabled drops Info lines unless verbose; Error lines are always passed.
func (s *testSink) Enabled(level int) bool {
	return s.verbose != nil && s.verbose.Enabled(level)
}

func (s *testSink) Info(level int, msg string, kv ...any) {
	if s.verbose != nil {
		s.verbose.Info(level, msg, kv...)
	}
}

func (s *testSink) Error(err error, msg string, kv ...any) {
	all := append(append([]any{}, s.values...), kv...)
	ns := namespaceOf(all)
	errorLog.add(ns, fmt.Sprintf("%s: %v", msg, err))
	if s.verbose != nil {
		s.verbose.Error(err, msg, kv...)
		return
	}
	line := errorLine(s.name, msg, err, all)
	if ns == "" {
		fmt.Fprintln(s.stderr, line)
		return
	}
	s.logs.write(ns, line)
}

func (s *testSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(append([]any{}, s.values...), kv...)
	if s.verbose != nil {
		c.verbose = s.verbose.WithValues(kv...)
	}
	return &c
}

func (s *testSink) WithName(name string) logr.LogSink {
	c := *s
	c.name = name
	if s.name != "" {
		c.name = s.name + "." + name
	}
	if s.verbose != nil {
		c.verbose = s.verbose.WithName(name)
	}
	return &c
}

func namespaceOf(kv []any) string {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "namespace" {
			return fmt.Sprint(kv[i+1])
		}
	}
	return ""
}

// errorLine is one line, without the stack and without the keys
// controller-runtime repeats on every line of the one controller.
func errorLine(name, msg string, err error, kv []any) string {
	var b strings.Builder
	b.WriteString("operator ERROR ")
	if name != "" {
		b.WriteString(name + ": ")
	}
	fmt.Fprintf(&b, "%s: %v", msg, err)
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i] {
		case "controller", "controllerGroup", "controllerKind", "DevEnvironment":
			continue
		}
		fmt.Fprintf(&b, " %v=%v", kv[i], kv[i+1])
	}
	return b.String()
}
