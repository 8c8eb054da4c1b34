package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// DebugAnnotation lists the images in debug mode, comma-separated
// "component/image" entries ("api/server,worker/worker"). `kubectl devloop
// debug` writes it (with the resourceVersion it read); `debug --off`
// removes an entry. It lives on the DevEnvironment so debug mode survives
// operator restarts. An image in debug mode is built with optimizations
// off and delve added at DebugDelvePath, and the containers running it
// start under delve.
const DebugAnnotation = "devloop.dev/debug"

// DebugDelvePath is where a debug build puts the delve binary in the image.
const DebugDelvePath = "/dlv"

// DebugPort is the port delve listens on in a debugged container.
const DebugPort = 40000

// DebugTarget is one entry of DebugAnnotation.
type DebugTarget struct {
	Component, Image string
}

// String is the entry as the annotation writes it.
func (t DebugTarget) String() string { return t.Component + "/" + t.Image }

// DebugTargets are the entries of DebugAnnotation, sorted, without
// duplicates; malformed entries are dropped (ParseDebugList reports them).
func (e *DevEnvironment) DebugTargets() []DebugTarget {
	out, _ := ParseDebugList(e.Annotations[DebugAnnotation])
	return out
}

// ParseDebugList splits a DebugAnnotation value into sorted, distinct
// targets. An entry that is not "component/image" is an error naming it;
// the well-formed entries are returned with it.
func ParseDebugList(v string) ([]DebugTarget, error) {
	var out []DebugTarget
	var bad []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		comp, img, ok := strings.Cut(s, "/")
		if !ok || comp == "" || img == "" || strings.Contains(img, "/") {
			bad = append(bad, fmt.Sprintf("%q", s))
			continue
		}
		out = append(out, DebugTarget{Component: comp, Image: img})
	}
	slices.SortFunc(out, func(a, b DebugTarget) int { return strings.Compare(a.String(), b.String()) })
	out = slices.Compact(out)
	if len(bad) > 0 {
		return out, fmt.Errorf("annotation %s: entries %s are not component/image", DebugAnnotation, strings.Join(bad, ", "))
	}
	return out, nil
}

// FormatDebugList is the DebugAnnotation value for targets.
func FormatDebugList(targets []DebugTarget) string {
	s := make([]string, 0, len(targets))
	for _, t := range targets {
		s = append(s, t.String())
	}
	out, _ := ParseDebugList(strings.Join(s, ","))
	s = s[:0]
	for _, t := range out {
		s = append(s, t.String())
	}
	return strings.Join(s, ",")
}

// DebugsImage says whether the image named image is in debug mode in
// some component.
func (e *DevEnvironment) DebugsImage(image string) bool {
	return slices.ContainsFunc(e.DebugTargets(), func(t DebugTarget) bool { return t.Image == image })
}
