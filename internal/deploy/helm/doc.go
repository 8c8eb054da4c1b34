// Package helm is devloop's one door to the Helm v3 SDK: no other product
// package imports it (test/layout checks). It holds
//
//   - thin wrappers over Helm's actions (install, upgrade, rollback,
//     uninstall, history; action.go) with a config factory as the test
//     seam, impersonation built in and discovery cached per identity
//     (config.go, discovery.go);
//   - Releases.Reconcile: one remediation action at a time (install,
//     upgrade, rollback, uninstall, unlock of a pending release) over the
//     stored history, a storage observer recording every revision written
//     (release.go, observer.go), and the operator's actions in flight, which
//     go on outside a reconcile once they take longer than a second
//     (inflight.go); a Releases is one operator's memory of all this
//     (releases.go);
//   - the edits of what Helm renders, manifest and hooks alike: the
//     caller's patches and mutator, applied by post-render and when Helm
//     stores the pending revision (postrender.go, render.go);
//   - charts from a fetched source, an OCI registry or an HTTP repository,
//     their dependencies resolved as `helm dependency build` does with the
//     environment's chart credentials, downloads capped and egress-checked
//     (chart_*.go), and a chart's own values files (chart_files.go).
//
// The deploy engine (package deploy) decides what to deploy and reads the
// result through plain types: ReleaseRequest, Outcome, ReleaseInfo,
// Revision (a stored revision's info, manifest and time), Patcher and
// Mutator. Chart is Helm's chart type under this package's name, handed
// through without being looked into.
package helm
