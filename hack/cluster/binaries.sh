#!/usr/bin/env bash
# Builds every binary the local cluster runs, from Go modules, once, cached
# under bin/ keyed by version:
#   etcd, kube-apiserver, kubectl        hack/test-binaries.sh's outputs (bin/k8s/v<K8S>-etcd<ETCD>/)
#   kube-controller-manager, kube-scheduler, kube-proxy
#                                        bin/k8s/cluster-v<K8S>/
#   kubelet                              bin/k8s/kubelet-v<KUBELET>/   (1.36's kubelet needs a staging
#                                        module the proxy lacks; 1.35 is within the supported skew)
#   coredns                              bin/k8s/coredns-v<COREDNS>/
# Wrapper modules live under bin/.k8s-build/. A second run with the same
# versions builds nothing. Prints nothing on stdout but `NAME=PATH` lines
# (one per binary) so callers can `eval` them.
#
# Usage: hack/cluster/binaries.sh [--paths] [names...]   (default: all;
#        --paths prints where the binaries are or would be, building nothing)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.8}
KUBELET_VERSION=${KUBELET_VERSION:-1.35.4}
COREDNS_VERSION=${COREDNS_VERSION:-1.14.7}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$ROOT/bin/.k8s-build
NICE=${NICE:-nice -n 15}

export GONOSUMDB=${GONOSUMDB:-k8s.io}
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local

log() { echo "cluster: $*" >&2; }

# timed NAME CMD...: runs CMD, logs how long it took.
timed() {
  local name=$1 start=$SECONDS; shift
  "$@"
  log "built $name in $((SECONDS - start))s"
}

# kube_wrapper DIR VERSION CMD...: a module requiring k8s.io/kubernetes VERSION
# with its staging modules pinned to the published v0.x versions, and a
# tools.go importing every k8s.io/kubernetes/cmd/CMD (so `go mod tidy` keeps
# what they need, e.g. sigs.k8s.io/knftables for kube-proxy).
kube_wrapper() {
  local dir=$1 version=$2; shift 2
  local minor=${version#*.}; minor=${minor%%.*}
  local want="" c
  for c in "$@"; do want+="	_ \"k8s.io/kubernetes/cmd/$c\""$'\n'; done
  mkdir -p "$dir"
  if [ -f "$dir/go.mod" ] && [ -f "$dir/tools.go" ] && grep -q "k8s.io/kubernetes v$version" "$dir/go.mod" \
     && [ "$(sed -n '/^import (/,/^)/p' "$dir/tools.go" | grep '_ "' )" = "${want%$'\n'}" ]; then
    return 0
  fi
  log "preparing wrapper module for k8s.io/kubernetes v$version ($*)"
  local gomod
  gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  {
    echo "module devloop.local/k8sbuild"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v$version"
    echo
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 v0.'"$minor"'.'"${version##*.}"'#p' "$gomod"
  } >"$dir/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package k8sbuild"
    echo
    echo "import ("
    printf '%s' "$want"
    echo ")"
  } >"$dir/tools.go"
  (cd "$dir" && $NICE go mod tidy >/dev/null)
}

# build_kube DIR VERSION OUT CMD
build_kube() {
  local dir=$1 version=$2 out=$3 cmd=$4
  local minor=${version#*.}; minor=${minor%%.*}
  log "building $cmd v$version (minutes on a cold cache)"
  (cd "$dir" && CGO_ENABLED=0 $NICE go build -o "$out/$cmd.tmp" \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    "k8s.io/kubernetes/cmd/$cmd")
  mv "$out/$cmd.tmp" "$out/$cmd"
}

build_coredns() {
  local dir=$WORK/coredns-v$COREDNS_VERSION out=$1
  mkdir -p "$dir"
  if [ ! -f "$dir/go.mod" ] || ! grep -q "github.com/coredns/coredns v$COREDNS_VERSION" "$dir/go.mod"; then
    log "preparing wrapper module for coredns v$COREDNS_VERSION"
    cat >"$dir/go.mod" <<MOD
module devloop.local/corednsbuild

go 1.26

require github.com/coredns/coredns v$COREDNS_VERSION
MOD
    cat >"$dir/tools.go" <<'GO'
//go:build tools

package corednsbuild

import _ "github.com/coredns/coredns"
GO
    (cd "$dir" && $NICE go mod tidy >/dev/null)
  fi
  log "building coredns v$COREDNS_VERSION"
  (cd "$dir" && CGO_ENABLED=0 $NICE go build -o "$out/coredns.tmp" -ldflags "-s -w" github.com/coredns/coredns)
  mv "$out/coredns.tmp" "$out/coredns"
}

TB_ASSETS=$ROOT/bin/k8s/v$K8S_VERSION-etcd$ETCD_VERSION
CP=$ROOT/bin/k8s/cluster-v$K8S_VERSION
KL=$ROOT/bin/k8s/kubelet-v$KUBELET_VERSION
DNS=$ROOT/bin/k8s/coredns-v$COREDNS_VERSION

PATHS_ONLY=0
if [ "${1:-}" = --paths ]; then PATHS_ONLY=1; shift; fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kube-proxy kubelet coredns)

for n in "${names[@]}"; do
  case $n in
    etcd|kube-apiserver|kubectl)
      if [ $PATHS_ONLY = 0 ] && [ ! -x "$TB_ASSETS/$n" ]; then
        start=$SECONDS
        K8S_VERSION=$K8S_VERSION ETCD_VERSION=$ETCD_VERSION $NICE "$ROOT/hack/test-binaries.sh" >/dev/null
        log "hack/test-binaries.sh took $((SECONDS - start))s"
      fi
      path=$TB_ASSETS/$n ;;
    kube-controller-manager|kube-scheduler|kube-proxy)
      if [ $PATHS_ONLY = 0 ] && [ ! -x "$CP/$n" ]; then
        mkdir -p "$CP"
        kube_wrapper "$WORK/cluster-kubernetes-v$K8S_VERSION" "$K8S_VERSION" kube-controller-manager kube-proxy kube-scheduler
        timed "$n" build_kube "$WORK/cluster-kubernetes-v$K8S_VERSION" "$K8S_VERSION" "$CP" "$n"
      fi
      path=$CP/$n ;;
    kubelet)
      if [ $PATHS_ONLY = 0 ] && [ ! -x "$KL/kubelet" ]; then
        mkdir -p "$KL"
        kube_wrapper "$WORK/kubelet-kubernetes-v$KUBELET_VERSION" "$KUBELET_VERSION" kubelet
        timed kubelet build_kube "$WORK/kubelet-kubernetes-v$KUBELET_VERSION" "$KUBELET_VERSION" "$KL" kubelet
      fi
      path=$KL/kubelet ;;
    coredns)
      if [ $PATHS_ONLY = 0 ] && [ ! -x "$DNS/coredns" ]; then
        mkdir -p "$DNS"
        timed coredns build_coredns "$DNS"
      fi
      path=$DNS/coredns ;;
    *) log "unknown binary $n"; exit 2 ;;
  esac
  var=$(echo "$n" | tr 'a-z-' 'A-Z_')
  echo "$var=$path"
done
