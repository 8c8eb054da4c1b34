// Package ownwrites keeps a reconcile from working on an environment
// older than the operator's own last write of it.
//
// The reconciler reads its DevEnvironment from the manager's cache, which
// learns of a status write only when the watch delivers it. A reconcile
// that starts right after the previous one wrote status (a pod event, a
// Helm action ending, a requeue) can read the version before that write,
// redo what it did, and write the older status back: the status patch is
// a merge patch, and status.components, a list, is replaced whole. Issue
// 33's chart case on a loaded cluster: a reconcile saw a chart image
// serving live again while the upgrade that had just pinned its newest
// build ran, and upgraded the release back to the older digest.
package ownwrites
