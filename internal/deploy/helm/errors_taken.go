package helm

import (
	"fmt"
	"regexp"
)

// TakenObjectError is Helm's refusal to install or upgrade over an object
// that exists and is not this release's: another release's (a chart whose
// CRDs are templates, installed by two environments) or no release's.
// Helm's own text dumps its ownership checks; this says whose it is.
type TakenObjectError struct {
	// Kind and Name (and Namespace, "" for a cluster-scoped object) of
	// the object.
	Kind, Name, Namespace string
	// Release and ReleaseNamespace name the release it belongs to; both
	// "" when it belongs to none (Helm's managed-by label is missing).
	Release, ReleaseNamespace string
}

func (e *TakenObjectError) Error() string {
	what := e.Kind + " " + e.Name
	if e.Namespace != "" {
		what = e.Kind + " " + e.Namespace + "/" + e.Name
	}
	if e.ReleaseNamespace == "" {
		return what + " exists and belongs to no Helm release: Helm does not take it over"
	}
	return fmt.Sprintf("%s belongs to release %s in namespace %s: Helm does not take over another release's object", what, e.Release, e.ReleaseNamespace)
}

// Helm's text (pkg/action/validate.go): `Kind "name" in namespace "ns"
// exists and cannot be imported into the current release: invalid
// ownership metadata; ...`, each failed check as `key "K" must equal "V":
// current value is "C"` or `missing key "K": must be set to "V"`.
var (
	takenPattern        = regexp.MustCompile(`(\S+) "([^"]*)" in namespace "([^"]*)" exists and cannot be imported into the current release`)
	takenNamePattern    = regexp.MustCompile(`key "meta\.helm\.sh/release-name" must equal "[^"]*": current value is "([^"]*)"`)
	takenNSPattern      = regexp.MustCompile(`key "meta\.helm\.sh/release-namespace" must equal "[^"]*": current value is "([^"]*)"`)
	takenUnmanagedMatch = regexp.MustCompile(`missing key "(app\.kubernetes\.io/managed-by|meta\.helm\.sh/release-namespace)"`)
)

// takenObject reads Helm's refusal of an existing object out of err, nil
// when err is not one. release and namespace are the release being
// installed's: Helm names only the checks that failed, so an owner whose
// name (or namespace) matches ours is not in its text.
func takenObject(err error, release, namespace string) *TakenObjectError {
	msg := err.Error()
	m := takenPattern.FindStringSubmatch(msg)
	if m == nil {
		return nil
	}
	e := &TakenObjectError{Kind: m[1], Name: m[2], Namespace: m[3]}
	if takenUnmanagedMatch.MatchString(msg) {
		return e
	}
	e.Release, e.ReleaseNamespace = release, namespace
	if n := takenNamePattern.FindStringSubmatch(msg); n != nil {
		e.Release = n[1]
	}
	if ns := takenNSPattern.FindStringSubmatch(msg); ns != nil {
		e.ReleaseNamespace = ns[1]
	}
	return e
}
