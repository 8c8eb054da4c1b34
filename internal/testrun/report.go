package testrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// Bounds of a suite's report: the file read (a larger one is refused,
// not cut, since a cut XML or JSON file would misreport), a test's name,
// how many failure names a run keeps, and the summary the report step
// writes as its termination message (the kubelet keeps 4 KiB of it).
const (
	MaxReportSize  = 16 << 20
	MaxTestName    = 256
	MaxFailedNames = 16
	MaxSummarySize = 4096
)

// Summary is what the report step of a test pod reads from the suite's
// report: counts, the first failures' names, or why there is none.
type Summary struct {
	Passed   int32    `json:"passed"`
	Failed   int32    `json:"failed"`
	Skipped  int32    `json:"skipped"`
	Failures []string `json:"failures,omitempty"`
	// Error says why there are no results: no file, a malformed one.
	Error string `json:"error,omitempty"`
}

// tally counts tests as a parser meets their outcomes.
type tally struct {
	s    Summary
	seen map[string]bool
}

type outcome int

const (
	passed outcome = iota
	failed
	skipped
)

func (t *tally) add(name string, o outcome) {
	switch o {
	case passed:
		t.s.Passed++
	case skipped:
		t.s.Skipped++
	case failed:
		t.s.Failed++
		name = TestName(name)
		if t.seen == nil {
			t.seen = map[string]bool{}
		}
		if len(t.s.Failures) < MaxFailedNames && !t.seen[name] {
			t.seen[name] = true
			t.s.Failures = append(t.s.Failures, name)
		}
	}
}

// TestName bounds a test's name to MaxTestName bytes, never splitting a
// UTF-8 character.
func TestName(name string) string {
	if len(name) <= MaxTestName {
		return name
	}
	n := MaxTestName
	for n > 0 && !utf8.RuneStart(name[n]) {
		n--
	}
	return name[:n]
}

// ParseReport reads a report in format from r.
func ParseReport(r io.Reader, format v1alpha1.TestReportFormat) (Summary, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxReportSize+1))
	if err != nil {
		return Summary{}, err
	}
	if len(data) > MaxReportSize {
		return Summary{}, fmt.Errorf("larger than %d MiB", MaxReportSize>>20)
	}
	switch format {
	case v1alpha1.ReportJUnit:
		return parseJUnit(data)
	case v1alpha1.ReportGoTestJSON:
		return parseGoTestJSON(data)
	default:
		return Summary{}, fmt.Errorf("unknown report format %q", format)
	}
}

// ReadReport is the summary of the report file at path; a missing or
// malformed file is a summary with an Error naming the file.
func ReadReport(path string, format v1alpha1.TestReportFormat) Summary {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Summary{Error: "the suite wrote no report at " + path}
	}
	if err != nil {
		return Summary{Error: err.Error()}
	}
	defer f.Close()
	s, err := ParseReport(f, format)
	if err != nil {
		return Summary{Error: fmt.Sprintf("report %s is not valid %s: %v", path, format, err)}
	}
	return s
}

// Encode is s as JSON in at most MaxSummarySize bytes: failure names are
// dropped from the end until it fits (the count still says how many).
func (s Summary) Encode() []byte {
	if len(s.Error) > 1024 {
		s.Error = s.Error[:1024]
	}
	for {
		data, _ := json.Marshal(s)
		if len(data) <= MaxSummarySize || len(s.Failures) == 0 {
			return data
		}
		s.Failures = s.Failures[:len(s.Failures)-1]
	}
}

// DecodeSummary reads the report step's termination message into a run's
// results; with none, the second value says why.
func DecodeSummary(msg string) (*v1alpha1.TestResults, string) {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return nil, "the report step wrote no summary"
	}
	var s Summary
	if err := json.Unmarshal([]byte(msg), &s); err != nil {
		return nil, "the report step failed: " + Tail(msg, 512)
	}
	if s.Error != "" {
		return nil, s.Error
	}
	r := &v1alpha1.TestResults{Passed: max(s.Passed, 0), Failed: max(s.Failed, 0), Skipped: max(s.Skipped, 0)}
	for _, f := range s.Failures {
		if len(r.Failures) == MaxFailedNames {
			break
		}
		r.Failures = append(r.Failures, TestName(f))
	}
	return r, ""
}
