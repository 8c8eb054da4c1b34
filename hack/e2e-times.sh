#!/usr/bin/env bash
# Reads go test -v output on standard input and prints each top-level
# case's time and result, in the order the cases ended, the way .ci/run
# prints its steps: e2e: 'TestSample' took 124s (PASS). Subtests (indented)
# and lines a case logged are left out.
#
#   hack/e2e-times.sh < bin/e2e.log
set -euo pipefail
sed -n -E 's/^--- (PASS|FAIL|SKIP): ([^ ]+) \(([0-9.]+)s\)$/\2 \3 \1/p' |
	awk '{ printf "e2e: %-46s took %5.0fs (%s)\n", sprintf("\047%s\047", $1), $2, $3 }'
