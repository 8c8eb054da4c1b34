#!/usr/bin/env bash
# Prefixes each line of standard input with the time since the start and,
# at the end, says how long the longest silence between two lines was, and
# before which line: how a long step (`make dev-up` in .ci/run) is checked
# to say what it is doing at least every 30 s.
#
#   make dev-up 2>&1 | hack/stamp.sh [LABEL]
set -uo pipefail
label=${1:-output}
start=$(date +%s)
last=$start longest=0 after=""
while IFS= read -r line; do
  now=$(date +%s)
  if [ $((now - last)) -gt "$longest" ]; then longest=$((now - last)) after=$line; fi
  last=$now
  printf '%5ss %s\n' "$((now - start))" "$line"
done
echo "$label: $(( $(date +%s) - start ))s in all; longest silence ${longest}s, ended by: ${after:0:160}"
