// Package teamcache is a team's Go build cache read by trust
// (spec.cache.readFrom, docs/team-cache.md): the operator keeps one
// content-addressed store of Go build cache entries per environment
// (Store), serves it to builder pods over HTTP (Server), and builder pods
// reach it through GOCACHEPROG (Prog, `manager helper gocacheprog`, with
// Client).
//
// The rules:
//   - a caller is a builder pod, proven by a projected ServiceAccount token
//     of the cache's own audience bound to that pod; the pod names its
//     environment by label and must run as the environment's
//     ServiceAccount;
//   - it writes only its own environment's entries;
//   - it reads its own, then those of the environments its spec.cache.
//     readFrom names, each only while its ServiceAccount may readcache
//     that DevEnvironment (a verb of its own, not in view;
//     SubjectAccessReview, CheckReadFrom): an entry
//     another tenant wrote is never read by an environment that did not
//     name it;
//   - every body is checked against its output ID (the SHA-256 the go
//     command computes of the bytes) when stored, when served and when
//     received, so a body cannot pass for another output. An action ID's
//     answer cannot be checked (the go command computes it from inputs
//     the cache never sees): that is what the trust above is for;
//   - the store is bounded, per namespace and whole (shares.go): a
//     namespace's writes evict its own least recently used entries first,
//     an upload's room is reserved before its body is read, a namespace
//     has a bounded number of uploads at once, and a slow body is cut.
package teamcache
