// Package devcluster puts devloop on the local single-node cluster of
// hack/cluster, the way a newcomer's `make dev-up` and the end-to-end suite
// both need it: the operator image and a Go builder image assembled with
// devloop's own go-containerregistry code (no Docker, no public registry),
// the operator installed in the cluster from its own Helm chart, and the
// sample environment of config/samples/dev applied and followed to Ready.
//
// Every step is idempotent: running it again with nothing changed pushes
// nothing new, upgrades no release and leaves the sample as it is.
package devcluster
