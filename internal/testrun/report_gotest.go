package testrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// goTestEvent is the part of a `go test -json` event the parser reads.
type goTestEvent struct {
	Action  string
	Package string
	Test    string
}

// parseGoTestJSON counts the tests of `go test -json` output by each
// test's last pass, fail or skip event. Package-level events (no Test)
// are not tests; subtests are tests of their own, named Parent/Sub. A
// test is named package.Test with the package cut to its last path
// element, as the JUnit parser names go-junit-report's cases. Lines that
// are not JSON objects (stderr mixed into the file) are skipped; a JSON
// line that does not decode makes the file malformed.
func parseGoTestJSON(data []byte) (Summary, error) {
	type key struct{ pkg, test string }
	last := map[key]string{}
	var order []key
	events := 0
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var ev goTestEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return Summary{}, fmt.Errorf("line %d: %v", i+1, err)
		}
		events++
		if ev.Test == "" {
			continue
		}
		switch ev.Action {
		case "pass", "fail", "skip":
		default:
			continue
		}
		k := key{ev.Package, ev.Test}
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = ev.Action
	}
	if events == 0 && len(bytes.TrimSpace(data)) > 0 {
		return Summary{}, errors.New("no go test -json events in it")
	}
	var t tally
	for _, k := range order {
		name := k.test
		if k.pkg != "" {
			name = lastElement(k.pkg) + "." + name
		}
		switch last[k] {
		case "pass":
			t.add(name, passed)
		case "fail":
			t.add(name, failed)
		case "skip":
			t.add(name, skipped)
		}
	}
	return t.s, nil
}
