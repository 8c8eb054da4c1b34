// Package deploy puts a component's objects into the cluster and says when
// they are ready:
//
//   - Helm releases through thin wrappers over the Helm v3 SDK (install,
//     upgrade, rollback, uninstall, history) with a config factory as the
//     test seam and impersonation built in, charts from a source directory,
//     an OCI registry or an HTTP repository, values layered as Helm users
//     expect, and ReconcileRelease: one remediation action at a time
//     (install, upgrade, rollback, uninstall, unlock of a pending release);
//   - plain YAML and kustomize directories rendered in-process (no remote
//     bases, nothing outside the source), applied with server-side apply
//     under the environment's own field manager (devloop/<ns>/<name>),
//     inventoried and pruned;
//   - images rewritten to the built, digest-pinned references in every pod
//     template, for both;
//   - readiness by kstatus, and drift by server-side dry run.
//
// Engine (engine*.go) drives these for one component at a time, as the
// environment's tenant; the reconciler calls it in DAG order.
package deploy
