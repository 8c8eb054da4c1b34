#!/usr/bin/env bash
# Runs a command as on a machine with one core of this one: what "a machine
# twice as slow" costs (issue 43; docs/fresh-machine.md), measured instead
# of estimated. Two slow cores and one fast core do the same compiling work
# per second; the local cluster's waits (pods, rollouts, the registry) do
# not change.
#
#   hack/one-core.sh [--cpu N] CMD...      e.g. hack/one-core.sh bash .ci/run
#
# The CPU affinity (taskset) is inherited by every process CMD starts, the
# local cluster's containerd and kubelet included. A container's processes
# are moved into a cpuset cgroup by runc (k8s.io/<id>, the kubelet runs
# with cgroupsPerQOS off), and moving a task into a cpuset resets its
# affinity to the cgroup's CPUs: so while CMD runs, the cgroup k8s.io and
# its children are held to the same core (every second; a cgroup a runc
# creates copies its parent's CPUs).
set -euo pipefail
cpu=1
if [ "${1:-}" = --cpu ]; then cpu=$2; shift 2; fi
[ $# -gt 0 ] || { echo "usage: $0 [--cpu N] CMD..." >&2; exit 2; }
cpuset=/sys/fs/cgroup/cpuset
[ -w "$cpuset/cpuset.cpus" ] || { echo "$0: no cgroup v1 cpuset at $cpuset (root only)" >&2; exit 1; }

hold() {
  local d=$cpuset/k8s.io
  while sleep 1; do
    if [ ! -d "$d" ]; then
      mkdir -p "$d" 2>/dev/null || continue
      cat "$cpuset/cpuset.mems" >"$d/cpuset.mems"
      echo "$cpu" >"$d/cpuset.cpus"
      continue
    fi
    # Children first: a parent's CPUs must hold each child's.
    for c in "$d"/*/; do
      [ -f "$c/cpuset.cpus" ] || continue
      [ "$(cat "$c/cpuset.cpus")" = "$cpu" ] || echo "$cpu" >"$c/cpuset.cpus" 2>/dev/null || true
    done
    [ "$(cat "$d/cpuset.cpus")" = "$cpu" ] || echo "$cpu" >"$d/cpuset.cpus" 2>/dev/null || true
  done
}
# Afterwards every core again, for what runs on after CMD (parent first).
release() {
  local d=$cpuset/k8s.io all
  kill "$holder" 2>/dev/null || true
  all=$(cat "$cpuset/cpuset.cpus")
  [ -d "$d" ] || return 0
  echo "$all" >"$d/cpuset.cpus" 2>/dev/null || true
  for c in "$d"/*/; do [ -f "$c/cpuset.cpus" ] && echo "$all" >"$c/cpuset.cpus" 2>/dev/null; done
  rmdir "$d" 2>/dev/null || true
}
hold &
holder=$!
trap release EXIT
echo "one-core: CPU $cpu only, for: $*" >&2
rc=0
taskset -c "$cpu" "$@" || rc=$?
exit $rc
