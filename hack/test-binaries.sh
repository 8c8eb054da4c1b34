#!/usr/bin/env bash
# Builds the control-plane binaries envtest needs (kube-apiserver, etcd) from Go
# modules and caches them under bin/k8s/<versions>/. Nothing is downloaded
# outside the Go module proxy. A second run with the same versions is a no-op.
#
# Usage: hack/test-binaries.sh            -> prints the asset directory
#        K8S_VERSION=1.36.3 ETCD_VERSION=3.6.8 hack/test-binaries.sh
#
# Built: etcd, kube-apiserver (envtest's control plane) and kubectl (used by
# the `kubectl explain` test and the README's local run).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.36.3}
ETCD_VERSION=${ETCD_VERSION:-3.6.8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ASSETS=$ROOT/bin/k8s/v${K8S_VERSION}-etcd${ETCD_VERSION}
WORK=$ROOT/bin/.k8s-build

# Some k8s.io modules are missing from the checksum database behind the proxy.
export GONOSUMDB=${GONOSUMDB:-k8s.io}
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local

log() { echo "test-binaries: $*" >&2; }

# build_kube NAME: builds k8s.io/kubernetes/cmd/NAME from the wrapper module.
build_kube() {
  local cmd=$1
  local dir=$WORK/kubernetes-v$K8S_VERSION
  local minor=${K8S_VERSION#*.}; minor=${minor%%.*}
  mkdir -p "$dir"
  if [ ! -f "$dir/go.mod" ] || ! grep -q "k8s.io/kubernetes v$K8S_VERSION" "$dir/go.mod" || ! grep -q cmd/kubectl "$dir/tools.go"; then
    log "preparing wrapper module for k8s.io/kubernetes v$K8S_VERSION"
    local gomod
    gomod=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    {
      echo "module devloop.local/k8sbuild"
      echo
      echo "go 1.26"
      echo
      echo "require k8s.io/kubernetes v$K8S_VERSION"
      echo
      # k8s.io/kubernetes replaces its staging modules with ./staging paths; a
      # module consumer must pin them to the matching published v0.x versions.
      sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 v0.'"$minor"'.'"${K8S_VERSION##*.}"'#p' "$gomod"
    } >"$dir/go.mod"
    cat >"$dir/tools.go" <<'GO'
//go:build tools

package k8sbuild

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    (cd "$dir" && go mod tidy >/dev/null)
  fi
  log "building $cmd v$K8S_VERSION (minutes on a cold cache)"
  (cd "$dir" && CGO_ENABLED=0 go build -o "$ASSETS/$cmd" \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
    "k8s.io/kubernetes/cmd/$cmd")
}

build_etcd() {
  local dir=$WORK/etcd-v$ETCD_VERSION
  mkdir -p "$dir"
  if [ ! -f "$dir/go.mod" ]; then
    cat >"$dir/go.mod" <<MOD
module devloop.local/etcdbuild

go 1.26

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
MOD
    cat >"$dir/tools.go" <<'GO'
//go:build tools

package etcdbuild

import _ "go.etcd.io/etcd/server/v3"
GO
    (cd "$dir" && go mod tidy >/dev/null)
  fi
  log "building etcd v$ETCD_VERSION"
  (cd "$dir" && CGO_ENABLED=0 go build -o "$ASSETS/etcd" -ldflags "-s -w" go.etcd.io/etcd/server/v3)
}

mkdir -p "$ASSETS"
[ -x "$ASSETS/etcd" ] || build_etcd
[ -x "$ASSETS/kube-apiserver" ] || build_kube kube-apiserver
[ -x "$ASSETS/kubectl" ] || build_kube kubectl
echo "$ASSETS"
