package testrun

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

var suites = []v1alpha1.TestSuite{
	{Name: "unit-tests", Labels: []string{"fast"}},
	{Name: "e2e-scheduling", Labels: []string{"e2e"}},
	{Name: "e2e-jobs", Labels: []string{"e2e", "slow"}},
}

func TestParseAndResolve(t *testing.T) {
	cases := []struct {
		value  string
		cancel bool
		token  string
		want   []string
		err    string // substring of Parse's or Resolve's error
	}{
		{value: "unit-tests", want: []string{"unit-tests"}},
		{value: " unit-tests ", want: []string{"unit-tests"}},
		{value: "e2e-jobs,unit-tests", want: []string{"unit-tests", "e2e-jobs"}}, // spec order
		{value: "unit-tests, unit-tests", want: []string{"unit-tests"}},
		{value: "all", want: []string{"unit-tests", "e2e-scheduling", "e2e-jobs"}},
		{value: "label:e2e", want: []string{"e2e-scheduling", "e2e-jobs"}},
		{value: "label:slow,unit-tests", want: []string{"unit-tests", "e2e-jobs"}},
		{value: "unit-tests@abc123", token: "abc123", want: []string{"unit-tests"}},
		{value: "label:e2e@v2", token: "v2", want: []string{"e2e-scheduling", "e2e-jobs"}},
		{value: "cancel:unit-tests", cancel: true, want: []string{"unit-tests"}},
		{value: "cancel:unit-tests,e2e-jobs", cancel: true, want: []string{"unit-tests", "e2e-jobs"}},
		{value: "cancel:all", cancel: true, want: []string{"unit-tests", "e2e-scheduling", "e2e-jobs"}},
		{value: "cancel:label:e2e@t1", cancel: true, token: "t1", want: []string{"e2e-scheduling", "e2e-jobs"}},
		{value: "", err: "names no suite"},
		{value: "@tok", err: "names no suite"},
		{value: "unit-tests@", err: "empty token"},
		{value: "unit-tests,", err: "an empty name"},
		{value: "Unit_Tests", err: `"Unit_Tests" is not a suite name`},
		{value: "label:", err: "not a valid label"},
		{value: "unit-tests,cancel:e2e-jobs", err: "both starts and cancels"},
		{value: "unit-test", err: `no test suite named "unit-test"; nothing was started or cancelled. Suites: unit-tests, e2e-scheduling, e2e-jobs`},
		{value: "unit-tests,nope", err: `no test suite named "nope"`},
		{value: "label:gpu", err: `no test suite labelled "gpu"; nothing was started or cancelled. Suites: unit-tests, e2e-scheduling, e2e-jobs; labels: e2e, fast, slow`},
		{value: "cancel:nope", err: `no test suite named "nope"`},
	}
	for _, c := range cases {
		t.Run(c.value, func(t *testing.T) {
			g := NewWithT(t)
			tr, err := Parse(c.value)
			var got []string
			if err == nil {
				got, err = tr.Resolve(suites)
			}
			if c.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(c.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(c.want))
			g.Expect(tr.Cancel).To(Equal(c.cancel))
			g.Expect(tr.Token).To(Equal(c.token))
			g.Expect(tr.Value).To(Equal(c.value))
		})
	}
}

func TestResolveAllWithoutSuites(t *testing.T) {
	tr, err := Parse("all")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, err = tr.Resolve(nil)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`no test suite named "all"; nothing was started or cancelled. Suites: (none)`)))
}

func TestParseRefusesHugeValues(t *testing.T) {
	long := make([]byte, MaxValue+1)
	for i := range long {
		long[i] = 'a'
	}
	_, err := Parse(string(long))
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("at most 1024")))
}

// A key remembers its last MaxTokens tokens, the latest as written and
// the earlier ones as short hashes in one entry, newest first; the
// oldest past that is forgotten; the other key's entry is kept; every
// entry fits the CRD's item bound.
func TestTokenHistoryIsBounded(t *testing.T) {
	g := NewWithT(t)
	env := &v1alpha1.DevEnvironment{}
	RecordToken(env, v1alpha1.TriggerAnnotationPrefixed, "all@x")
	long := "unit@" + strings.Repeat("t", 1200)
	RecordToken(env, v1alpha1.TriggerAnnotation, long)
	for i := 1; i <= MaxTokens; i++ {
		RecordToken(env, v1alpha1.TriggerAnnotation, fmt.Sprintf("unit@t%d", i))
	}
	tokens := env.Status.HandledTriggerTokens
	g.Expect(tokens).To(HaveLen(3))
	g.Expect(tokens[0]).To(Equal(fmt.Sprintf("trigger=unit@t%d", MaxTokens)))
	g.Expect(tokens[1]).To(MatchRegexp(`^trigger#[0-9a-f]{16}(,[0-9a-f]{16}){14}$`), "15 earlier tokens")
	g.Expect(tokens[1]).To(HavePrefix("trigger#"+tokenHash(fmt.Sprintf("unit@t%d", MaxTokens-1))), "newest first")
	g.Expect(tokens[2]).To(Equal(v1alpha1.TriggerAnnotationPrefixed + "=all@x"))
	for i := 1; i <= MaxTokens; i++ {
		g.Expect(TokenHandled(env, v1alpha1.TriggerAnnotation, fmt.Sprintf("unit@t%d", i))).To(BeTrue(), "t%d", i)
	}
	g.Expect(TokenHandled(env, v1alpha1.TriggerAnnotation, long)).To(BeFalse(), "the 17th newest is forgotten")
	g.Expect(TokenHandled(env, v1alpha1.TriggerAnnotation, "unit@t0")).To(BeFalse())
	g.Expect(TokenHandled(env, v1alpha1.TriggerAnnotationPrefixed, "all@x")).To(BeTrue())
	g.Expect(TokenHandled(env, v1alpha1.TriggerAnnotationPrefixed, "unit@t1")).To(BeFalse(), "per key")

	// Before it is forgotten, a long (hashed) value is remembered as well.
	env = &v1alpha1.DevEnvironment{}
	RecordToken(env, v1alpha1.TriggerAnnotation, long)
	RecordToken(env, v1alpha1.TriggerAnnotation, "unit@t1")
	g.Expect(TokenHandled(env, v1alpha1.TriggerAnnotation, long)).To(BeTrue())
	// Handled again, an earlier token becomes the latest, once.
	RecordToken(env, v1alpha1.TriggerAnnotation, long)
	g.Expect(env.Status.HandledTriggerTokens).To(HaveLen(2))
	g.Expect(TokenIsLatest(env, v1alpha1.TriggerAnnotation, long)).To(BeTrue())
	g.Expect(TokenHandled(env, v1alpha1.TriggerAnnotation, "unit@t1")).To(BeTrue())
	for _, rec := range env.Status.HandledTriggerTokens {
		g.Expect(len(rec)).To(BeNumerically("<=", 1100))
	}
}
