package operatortest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
)

// fakeTest is a test whose log and cleanups are kept to look at.
type fakeTest struct {
	testing.TB
	lines    []string
	cleanups []func()
}

func (f *fakeTest) Log(args ...any)  { f.lines = append(f.lines, fmt.Sprint(args...)) }
func (f *fakeTest) Cleanup(c func()) { f.cleanups = append(f.cleanups, c) }
func (f *fakeTest) end() {
	for _, c := range f.cleanups {
		c()
	}
}
func (f *fakeTest) logged() string       { return strings.Join(f.lines, "\n") }
func newFakeTest(t *testing.T) *fakeTest { return &fakeTest{TB: t} }

// TestOperatorErrorsGoToTheirTestsLog: an ERROR line about an environment
// goes to the log of the test that made its namespace (shown only if that
// test fails), not to stderr, where go test would print it with every
// other test's whenever one of the package fails; once the test ended,
// lines about its namespace are dropped; a line about no namespace still
// reaches stderr. Every line is kept for ErrorLogLines.
func TestOperatorErrorsGoToTheirTestsLog(t *testing.T) {
	g := NewWithT(t)
	var stderr bytes.Buffer
	logs := &testLogs{byNamespace: map[string]testing.TB{}}
	log := logr.New(newTestSink(nil, &stderr, logs)).WithName("devenvironment")

	a, b := newFakeTest(t), newFakeTest(t)
	saved := testLog // logTo registers in testLog
	testLog = logs
	defer func() { testLog = saved }()
	logTo(a, "ns-a")
	logTo(b, "ns-b")

	reconcile := log.WithValues("controller", "devenvironment", "namespace", "ns-a", "name", "web")
	reconcile.Error(errors.New("registry unavailable"), "Reconciler error")
	log.Info("starting workers") // Info is dropped unless verbose

	g.Expect(stderr.String()).To(BeEmpty())
	g.Expect(a.logged()).To(ContainSubstring("Reconciler error: registry unavailable"))
	g.Expect(a.logged()).To(ContainSubstring("name=web"))
	g.Expect(a.logged()).NotTo(ContainSubstring("controller="), "the keys every line repeats are left out")
	g.Expect(b.lines).To(BeEmpty(), "a line about ns-a in ns-b's test")
	g.Expect(ErrorLogLines("ns-a")).To(ContainElement("Reconciler error: registry unavailable"))

	a.end()
	reconcile.Error(errors.New("being deleted"), "Reconciler error")
	g.Expect(a.logged()).NotTo(ContainSubstring("being deleted"), "logged to a test that ended")
	g.Expect(stderr.String()).To(BeEmpty(), "a line about an ended test's namespace")

	log.Error(errors.New("leader election lost"), "problem running manager")
	g.Expect(stderr.String()).To(ContainSubstring("problem running manager: leader election lost"))
}
