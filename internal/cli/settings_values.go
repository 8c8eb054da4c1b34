package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// parseValues reads a YAML values document. Numbers keep their JSON text
// (json.Number), so a large integer is written back as it was read, not
// rounded through a float (1.10 is still the number 1.1, as Helm reads
// it). Parser errors are reduced to their line: they may quote
// the file, and a settings file may hold credentials.
func parseValues(data []byte) (map[string]any, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, errors.New("not valid YAML" + yamlLine(err))
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("not valid YAML")
	}
	switch m := v.(type) {
	case nil: // an empty file
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	}
	return nil, errors.New("not a YAML map of values")
}

var yamlLineRE = regexp.MustCompile(`line \d+`)

func yamlLine(err error) string {
	if l := yamlLineRE.FindString(err.Error()); l != "" {
		return " (" + l + ")"
	}
	return ""
}

// mergeValues merges src into dst as Helm merges values files: maps key
// by key, anything else replaced. dst is changed and returned.
func mergeValues(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// setValue sets a dot-separated path, making maps on the way (and
// replacing what is not one, as helm --set does).
func setValue(vals map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	m := vals
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// hasValue says whether a dot-separated path is set.
func hasValue(vals map[string]any, path string) bool {
	var cur any = vals
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[p]; !ok {
			return false
		}
	}
	return true
}

// helmTyped types a --set value as Helm's --set does: true, false and
// null, integers without a leading zero, and strings for the rest (a
// version "1.10" or a zip code "01234" stays a string).
func helmTyped(s string) any {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && (s == "0" || !strings.HasPrefix(strings.TrimPrefix(s, "-"), "0")) && !strings.HasPrefix(s, "+") {
		return n
	}
	return s
}

// marshalValues writes the values as YAML with sorted keys, so the same
// settings give the same bytes and an unchanged write changes nothing.
func marshalValues(vals map[string]any) ([]byte, error) {
	out, err := yaml.Marshal(vals)
	if err != nil {
		return nil, fmt.Errorf("writing the values as YAML: %w", err)
	}
	return out, nil
}

// leafPaths lists the dot paths of the values' leaves, sorted: what the
// settings set, without their values.
func leafPaths(v any, prefix string) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		if prefix == "" {
			return nil
		}
		return []string{prefix}
	}
	var out []string
	for k, sub := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, leafPaths(sub, p)...)
	}
	slices.Sort(out)
	return out
}

// summarizePaths lists at most 20 paths and says how many more.
func summarizePaths(paths []string) string {
	const most = 20
	switch {
	case len(paths) == 0:
		return "no values"
	case len(paths) > most:
		return fmt.Sprintf("%s and %d more", strings.Join(paths[:most], ", "), len(paths)-most)
	}
	return strings.Join(paths, ", ")
}
