// Everything under bin/ (build outputs, the local cluster's state, builder
// cache volumes holding Go module caches) is outside the devloop module:
// this go.mod makes bin/ a module of its own, so `go vet ./...` and
// `go test ./...` never walk into it (test/layout checks it).
module devloop.local/bin

go 1.26
