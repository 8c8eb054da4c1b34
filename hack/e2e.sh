#!/usr/bin/env bash
# Runs the end-to-end suite on the local cluster and says how long each
# case took, the way .ci/run says how long each step took. The test binary
# compiles while the cluster comes up (they do not depend on each other);
# the cluster is stopped afterwards whatever happened.
#
#   hack/e2e.sh [go test flags, e.g. -run '^TestSample$' -timeout 55m]
#   NODES=2 hack/e2e.sh ...   with a second node (hack/cluster/node2.sh)
#
# The whole output is kept in bin/e2e.log.
set -uo pipefail
cd "$(dirname "$0")/.."
log=bin/e2e.log
mkdir -p bin
start=$SECONDS

# The test binary, compiled beside the cluster's start.
go test -c -tags e2e -o bin/e2e.test ./test/e2e/ >bin/e2e-compile.log 2>&1 &
compile=$!
t=$SECONDS
hack/cluster/cluster.sh up || { kill "$compile" 2>/dev/null; exit 1; }
echo "e2e: 'cluster up' took $((SECONDS - t))s"
if [ "${NODES:-1}" = 2 ]; then
	t=$SECONDS
	hack/cluster/node2.sh up || { kill "$compile" 2>/dev/null; hack/cluster/cluster.sh down; exit 1; }
	echo "e2e: 'node 2 up' took $((SECONDS - t))s"
fi
t=$SECONDS
if ! wait "$compile"; then
	cat bin/e2e-compile.log >&2
	hack/cluster/cluster.sh down
	exit 1
fi
echo "e2e: 'compile the test binary' took $((SECONDS - t))s more"

# go test's flags, as the test binary's (-run X is -test.run X).
args=()
for a in "$@"; do
	case $a in -*) args+=("-test.${a#-}") ;; *) args+=("$a") ;; esac
done
t=$SECONDS
# Cases marked t.Parallel (those that only wait, and the one compile of a
# tree) run together after the others; go test's default -parallel is
# the number of cores, too few for cases that mostly wait.
(cd test/e2e && ../../bin/e2e.test -test.v -test.count=1 -test.parallel=8 "${args[@]}") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
took=$((SECONDS - t))
hack/cluster/cluster.sh down

# Each case's time, in the order they ended (the parallel ones last).
echo "e2e: case times (go test's own figures):"
hack/e2e-times.sh <"$log"
echo "e2e: 'go test' took ${took}s; in all (with cluster up and down) $((SECONDS - start))s; exit $rc"
exit "$rc"
