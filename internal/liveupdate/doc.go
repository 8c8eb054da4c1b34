// Package liveupdate is the operator's side of live update: after a
// component's images are built it decides, per changed file, whether the
// newest build may reach the running pods in place (decide), writes the
// changed files as a tar (deliver_tar), execs the supervisor's sync in
// every running pod as the environment's ServiceAccount (deliver), and
// brings pods started later to the same files (converge). The
// in-container side is internal/supervisor; docs/live-update.md tells the
// whole story.
package liveupdate
