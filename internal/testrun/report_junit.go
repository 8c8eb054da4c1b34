package testrun

import (
	"encoding/xml"
	"errors"
	"fmt"
	"strings"
)

// junitSuite is a <testsuites> or <testsuite> element: both may hold
// suites (nested suites, as some tools write) and test cases.
type junitSuite struct {
	XMLName xml.Name
	Suites  []junitSuite `xml:"testsuite"`
	Cases   []junitCase  `xml:"testcase"`
}

type junitCase struct {
	Name      string    `xml:"name,attr"`
	Classname string    `xml:"classname,attr"`
	Failure   *struct{} `xml:"failure"`
	Error     *struct{} `xml:"error"`
	Skipped   *struct{} `xml:"skipped"`
}

// parseJUnit counts the test cases of a JUnit XML report: one with a
// <failure> or <error> failed, one with <skipped> was skipped, any other
// passed. A case is named classname.name, the classname cut to its last
// path element (go-junit-report's package path), so names match the go
// test -json parser's.
func parseJUnit(data []byte) (Summary, error) {
	var root junitSuite
	if err := xml.Unmarshal(data, &root); err != nil {
		return Summary{}, err
	}
	if n := root.XMLName.Local; n != "testsuites" && n != "testsuite" {
		return Summary{}, fmt.Errorf("the root element is <%s>, not <testsuites> or <testsuite>", n)
	}
	var t tally
	var walk func(s *junitSuite, depth int) error
	walk = func(s *junitSuite, depth int) error {
		if depth > 64 {
			return errors.New("test suites nested more than 64 deep")
		}
		for _, c := range s.Cases {
			name := c.Name
			if c.Classname != "" {
				name = lastElement(c.Classname) + "." + name
			}
			switch {
			case c.Failure != nil || c.Error != nil:
				t.add(name, failed)
			case c.Skipped != nil:
				t.add(name, skipped)
			default:
				t.add(name, passed)
			}
		}
		for i := range s.Suites {
			if err := walk(&s.Suites[i], depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(&root, 0); err != nil {
		return Summary{}, err
	}
	return t.s, nil
}

// lastElement is a package path's last element ("util" for
// volcano.sh/volcano/pkg/scheduler/util).
func lastElement(path string) string {
	return path[strings.LastIndexByte(path, '/')+1:]
}
