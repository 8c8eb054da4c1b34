#!/usr/bin/env bash
# go-test.sh ARGS...: `go test ARGS ./...`, saying every 20 s which test
# binaries run and for how long. go test prints a package's result only
# after the packages before it, so a long one (controllers' envtests) would
# otherwise hold the output for minutes.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# go test builds and runs the test binaries under GOTMPDIR: one of this run's
# own, so the heartbeat names only this run's binaries, not those of other
# go test runs on the machine.
GOTMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/go-test.XXXXXX")
export GOTMPDIR
trap 'rm -rf "$GOTMPDIR"' EXIT

running_tests() {
  local running
  running=$(ps -eo etimes=,args= | awk -v dir="$GOTMPDIR/" 'index($2, dir) == 1 { n = split($2, p, "/") } index($2, dir) == 1 && p[n] ~ /\.test$/ { printf "%s%s (%ss)", sep, p[n], $1; sep = ", " }')
  echo "running ${running:-no test binary (compiling)}"
}

with_heartbeat "go test" running_tests go test "$@" ./...
