// Package deploy puts a component's objects into the cluster and says when
// they are ready:
//
//   - Helm releases through package helm (internal/deploy/helm, the only
//     package that imports the Helm SDK): this package composes their
//     values as Helm users expect (values.go, values_files.go), compiles
//     their patches and pins their images (engine_helm_render.go), counts
//     failed attempts and stalls on too many, corrects drift and skips
//     Helm altogether for a release it last deployed unchanged
//     (engine_helm*.go);
//   - plain YAML and kustomize directories rendered in-process (no remote
//     bases, nothing outside the source), applied with server-side apply
//     under the environment's own field manager (devloop/<ns>/<name>),
//     inventoried and pruned;
//   - render-time patches (patches.go) and images rewritten to the built,
//     digest-pinned references in every pod template, for both;
//   - readiness by kstatus, and drift by server-side dry run.
//
// Engine (engine*.go) drives these for one component at a time, as the
// environment's tenant; the reconciler calls it in DAG order.
package deploy
