#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller from Go modules,
# once, one after the other (their releases need different versions of
# fluxcd/pkg modules, so they cannot share one module; both are built
# without -trimpath, so a package at the same version compiles once), and
# caches each under bin/flux/<name>-v<version>/
# with what installing it needs from its module (read from the module zip,
# so nothing but the Go module proxy is used):
#   <name>          the static binary (CGO off, linux, this machine's arch)
#   crds/*.yaml     config/crd/bases of the module
#   role.yaml       config/rbac/role.yaml of the module (the controller's ClusterRole)
# The wrapper modules live under bin/.flux-build/. A second run with the
# same versions builds nothing. Prints nothing on stdout but `NAME=DIR`
# lines (SOURCE_CONTROLLER=..., KUSTOMIZE_CONTROLLER=...) so callers can
# `eval` them; progress goes to stderr at least every 20 s.
#
# Versions: the newest that resolve and build from the module proxy here
# with Go 1.26 (docs/flux-e2e.md): kustomize-controller v1.8.x is not on the
# proxy (403), newer releases need Go 1.27.
#
# Usage: hack/cluster/flux-binaries.sh [--paths]   (--paths: print where, build nothing)
set -euo pipefail

SOURCE_CONTROLLER_VERSION=${SOURCE_CONTROLLER_VERSION:-1.8.0}
KUSTOMIZE_CONTROLLER_VERSION=${KUSTOMIZE_CONTROLLER_VERSION:-1.7.3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$ROOT/bin/.flux-build
NICE=${NICE:-nice -n 10}

# Some k8s.io and fluxcd modules are missing from the checksum database
# behind the proxy.
export GONOSUMDB=${GONOSUMDB:-k8s.io,github.com/fluxcd}
# shellcheck source=../lib.sh
. "$ROOT/hack/lib.sh"
release_build_env

log() { echo "flux: $*" >&2; }

CONTROLLERS=(source-controller=$SOURCE_CONTROLLER_VERSION kustomize-controller=$KUSTOMIZE_CONTROLLER_VERSION)

# wrapper NAME VERSION: a module requiring github.com/fluxcd/NAME VERSION
# (lib.sh's release_wrapper: the controller's replaces and go.sum).
wrapper() {
  local name=$1 version=$2 dir=$WORK/$1-v$2
  [ ! -f "$dir/.tidy" ] || return 0
  log "preparing the wrapper module for $name v$version"
  release_wrapper "$dir" fluxbuild "github.com/fluxcd/$name" "v$version" "github.com/fluxcd/$name"
  (cd "$dir" && with_progress "flux: downloading modules for $name" "" go mod tidy)
  touch "$dir/.tidy"
}

# build NAME VERSION: the binary, its CRDs and its ClusterRole.
build() {
  local name=$1 version=$2 dir=$WORK/$1-v$2 out=$ROOT/bin/flux/$1-v$2 total src
  wrapper "$name" "$version"
  total=$(cd "$dir" && go list -deps "github.com/fluxcd/$name" | wc -l)
  (cd "$dir" && with_progress "flux: building $name v$version, compiled packages" "$total" \
    $NICE go build -v -ldflags "-s -w" -o "$dir/$name" "github.com/fluxcd/$name")
  src=$(cd "$dir" && go list -m -f '{{.Dir}}' "github.com/fluxcd/$name")
  rm -rf "$out" && mkdir -p "$out/crds"
  cp "$src"/config/crd/bases/*.yaml "$out/crds/"
  cp "$src/config/rbac/role.yaml" "$out/role.yaml"
  chmod -R u+w "$out"
  mv "$dir/$name" "$out/$name"
}

PATHS_ONLY=0
if [ "${1:-}" = --paths ]; then PATHS_ONLY=1; shift; fi

for pair in "${CONTROLLERS[@]}"; do
  name=${pair%%=*} version=${pair#*=}
  if [ $PATHS_ONLY = 0 ] && [ ! -x "$ROOT/bin/flux/$name-v$version/$name" ]; then
    build "$name" "$version"
  fi
done

for pair in "${CONTROLLERS[@]}"; do
  name=${pair%%=*} version=${pair#*=}
  var=$(echo "$name" | tr 'a-z-' 'A-Z_')
  echo "$var=$ROOT/bin/flux/$name-v$version"
done
