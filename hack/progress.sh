# Sourced by the build scripts: run a long command and say how far it has
# got at least every 20 seconds, so no step of `make dev-up` or `make test`
# is silent for long.
#
#   with_progress LABEL TOTAL CMD...   CMD's output goes to a log; every 20 s
#                                      "LABEL: N/TOTAL, Ts" (N: lines of the
#                                      log, e.g. packages `go build -v` has
#                                      compiled); on failure, the log's tail.
#                                      TOTAL may be empty (lines only).

with_progress() {
  local label=$1 total=$2; shift 2
  local log start=$SECONDS next=20 pid rc n
  log=$(mktemp)
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - start)) -ge $next ]; then
      n=$(wc -l <"$log")
      echo "$label: ${n}${total:+/$total}, $((SECONDS - start))s" >&2
      next=$((next + 20))
    fi
  done
  rc=0
  wait "$pid" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "$label: failed (exit $rc) after $((SECONDS - start))s; last lines:" >&2
    tail -n 30 "$log" >&2
  else
    echo "$label: done in $((SECONDS - start))s" >&2
  fi
  rm -f "$log"
  return $rc
}
