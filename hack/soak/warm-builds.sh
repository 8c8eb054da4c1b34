#!/usr/bin/env bash
# Soak: three long warm builds on a loaded machine, the operator watched.
#
# Issue 36 saw the operator killed (exit 137) in the middle of long warm
# builds on two loaded cores. This runs the same shape on the local
# cluster that `make dev-up` brought up: one environment, three images of
# the sample's source, each compiled in its own warm builder with `go build
# -a` (the whole standard library, then the sample, recompiled: minutes of
# `-v` output streamed over each build's exec), while CPU hogs
# keep the load near LOAD. Every INTERVAL seconds it prints the manager
# process's resident memory, its container's restart count, the load and
# the environment's Ready condition, until the three builds are done or
# MAX_SECONDS pass; then the peak memory, the restarts and how many
# "Websocket Ping failed" lines the manager logged.
#
# Usage (root, after `make dev-up`): hack/soak/warm-builds.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LOAD=${LOAD:-20}
INTERVAL=${INTERVAL:-15}
MAX_SECONDS=${MAX_SECONDS:-1800}
# What each warm builder runs; it must leave out/web.
BUILD=${BUILD:-go build -a -v std && go build -a -v -trimpath -o out/web ./cmd/web}
NS=devloop-sample
ENV=soak
eval "$("$ROOT/hack/cluster/cluster.sh" env)"

hogs=()
cleanup() {
  # Stop what this script started, by PID.
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  kubectl -n "$NS" delete devenv "$ENV" --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

image() { # NAME: a warm Go build of the sample's web binary, all packages rebuilt
  cat <<EOF
    - name: $1
      source: app
      run:
        image: 10.250.0.1:5000/devloop/golang:dev
        command: [sh, -c, "$BUILD"]
        env:
        - {name: CGO_ENABLED, value: "0"}
        - {name: GOFLAGS, value: -buildvcs=false}
        # A path of its own per image: images of one source and builder
        # image with the same cache paths share one claim and take turns
        # (issue 34), and this soak wants three builds at once.
        cache: {size: 2Gi, paths: [/home/devloop/.cache, /go/pkg/mod, /tmp/soak-$1]}
        keepWarm: true
        timeout: 2h
      layers:
      - {from: out/web, to: /web, mode: "0755"}
      entrypoint: [/web]
EOF
}

kubectl apply -f - <<EOF
apiVersion: devloop.dev/v1alpha1
kind: DevEnvironment
metadata: {name: $ENV, namespace: $NS}
spec:
  serviceAccountName: deployer
  registry: {prefix: 10.250.0.1:5000/$NS/soak, insecure: true}
  sources:
  - name: app
    oci: {repository: 10.250.0.1:5000/$NS/src, tag: dev, insecure: true}
  components:
  - name: builds
    images:
$(image one)
$(image two)
$(image three)
EOF

for _ in $(seq "$LOAD"); do (while :; do :; done) & hogs+=($!); done

pod=$(kubectl -n devloop-system get pods -l app.kubernetes.io/name=devloop -o name | head -1)
manager_pid() { pgrep -f '^/manager( |$)' | head -1 || true; }
start=$(date +%s) peak=0
printf '%6s %8s %8s %6s  %s\n' secs rss_mib restarts load ready
while :; do
  now=$(($(date +%s) - start))
  pid=$(manager_pid)
  rss=0
  [ -z "$pid" ] || rss=$(awk '/VmRSS/{print int($2/1024)}' "/proc/$pid/status" 2>/dev/null || echo 0)
  [ "$rss" -le "$peak" ] || peak=$rss
  restarts=$(kubectl -n devloop-system get "$pod" -o jsonpath='{.status.containerStatuses[0].restartCount}' 2>/dev/null || echo '?')
  ready=$(kubectl -n "$NS" get devenv "$ENV" -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.reason}{end}' 2>/dev/null || true)
  printf '%6d %8d %8s %6s  %s\n' "$now" "$rss" "$restarts" "$(cut -d' ' -f1 /proc/loadavg)" "$ready"
  case $ready in "True "*) break ;; esac
  [ "$now" -lt "$MAX_SECONDS" ] || { echo "soak: not Ready after ${MAX_SECONDS}s"; break; }
  sleep "$INTERVAL"
done
pings=$(kubectl -n devloop-system logs "$pod" --since=2h 2>/dev/null | grep -c 'Websocket Ping failed' || true)
echo "soak: peak manager RSS ${peak} MiB, restarts ${restarts}, 'Websocket Ping failed' lines ${pings}, $(($(date +%s) - start)) s"
