package registryauth

import (
	"regexp"
	"strings"
)

// Access is one entry of a token's "access" claim: actions granted on a
// named resource.
type Access struct {
	Type    string   `json:"type"`
	Name    string   `json:"name"`
	Actions []string `json:"actions"`
}

// maxScopes bounds how many scopes one token request may name, and
// maxScopeLen one scope's length: the query is the caller's.
const (
	maxScopes   = 16
	maxScopeLen = 512
)

// repositoryName is the distribution registry's repository name grammar
// (path components of lowercase alphanumerics and separators).
var repositoryName = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$`)

// grantable are the actions this service ever grants.
var grantable = map[string]bool{"pull": true, "push": true}

// parseScope reads "repository:team-a/src:pull,push". ok is false for a
// scope this service never grants (another type, a malformed name); such
// scopes are left out of the token, as the protocol allows.
func parseScope(scope string) (a Access, ok bool) {
	if len(scope) > maxScopeLen {
		return Access{}, false
	}
	typ, rest, found := strings.Cut(scope, ":")
	if !found || typ != "repository" {
		return Access{}, false
	}
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		return Access{}, false
	}
	name, actions := rest[:i], rest[i+1:]
	if !repositoryName.MatchString(name) {
		return Access{}, false
	}
	a = Access{Type: typ, Name: name}
	seen := map[string]bool{}
	for _, act := range strings.Split(actions, ",") {
		if grantable[act] && !seen[act] {
			seen[act] = true
			a.Actions = append(a.Actions, act)
		}
	}
	return a, len(a.Actions) > 0
}

// namespaceOf is the namespace a repository belongs to: its first path
// component. A repository of one component belongs to nobody.
func namespaceOf(repository string) (string, bool) {
	ns, _, found := strings.Cut(repository, "/")
	if !found || !validNamespace(ns) {
		return "", false
	}
	return ns, true
}

// dns1123Label is a namespace name.
var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func validNamespace(s string) bool { return len(s) <= 63 && dns1123Label.MatchString(s) }
