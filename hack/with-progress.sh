#!/usr/bin/env bash
# with-progress.sh LABEL CMD...: runs CMD with its output kept aside, saying
# every 20 s how many lines it has written so far (a package each for
# `go build -v`), and its output's tail if it fails (hack/lib.sh).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
label=$1
shift
with_progress "$label" "" "$@"
