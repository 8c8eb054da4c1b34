#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller from Go modules,
# once, together (one wrapper module, one `go build`, so the packages they
# share compile once), and caches each under bin/flux/<name>-v<version>/
# with what installing it needs from its module (read from the module zip,
# so nothing but the Go module proxy is used):
#   <name>          the static binary (CGO off, linux, this machine's arch)
#   crds/*.yaml     config/crd/bases of the module
#   role.yaml       config/rbac/role.yaml of the module (the controller's ClusterRole)
# The wrapper module lives under bin/.flux-build/. A second run with the
# same versions builds nothing. Prints nothing on stdout but `NAME=DIR`
# lines (SOURCE_CONTROLLER=..., KUSTOMIZE_CONTROLLER=...) so callers can
# `eval` them; progress goes to stderr at least every 20 s.
#
# Versions: the newest that resolve and build from the module proxy here
# with Go 1.26 (docs/flux-e2e.md): kustomize-controller v1.8.x is not on the
# proxy (403), newer releases need Go 1.27. Together they build at
# source-controller's (newer) Kubernetes and controller-runtime versions.
#
# Usage: hack/cluster/flux-binaries.sh [--paths]   (--paths: print where, build nothing)
set -euo pipefail

SOURCE_CONTROLLER_VERSION=${SOURCE_CONTROLLER_VERSION:-1.8.0}
KUSTOMIZE_CONTROLLER_VERSION=${KUSTOMIZE_CONTROLLER_VERSION:-1.7.3}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$ROOT/bin/.flux-build/sc-v$SOURCE_CONTROLLER_VERSION-kc-v$KUSTOMIZE_CONTROLLER_VERSION
NICE=${NICE:-nice -n 10}

# Some k8s.io and fluxcd modules are missing from the checksum database
# behind the proxy.
export GONOSUMDB=${GONOSUMDB:-k8s.io,github.com/fluxcd}
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local
export CGO_ENABLED=0 GOOS=linux
# shellcheck source=../lib.sh
. "$ROOT/hack/lib.sh"

log() { echo "flux: $*" >&2; }

CONTROLLERS=(source-controller=$SOURCE_CONTROLLER_VERSION kustomize-controller=$KUSTOMIZE_CONTROLLER_VERSION)

# wrapper: a module requiring both controllers, with their non-local
# replace directives and their go.sums (their dependencies are verified
# against the hashes their releases were built with, including modules the
# checksum database behind this proxy does not answer for).
wrapper() {
  mkdir -p "$WORK"
  [ ! -f "$WORK/.tidy" ] || return 0
  log "preparing the wrapper module for ${CONTROLLERS[*]}"
  local pair name version replaces=() sums=()
  {
    echo "module devloop.local/fluxbuild"
    echo
    echo "go 1.26"
    echo
    echo "require ("
    for pair in "${CONTROLLERS[@]}"; do echo "	github.com/fluxcd/${pair%%=*} v${pair#*=}"; done
    echo ")"
    echo
    for pair in "${CONTROLLERS[@]}"; do
      name=${pair%%=*} version=${pair#*=}
      (cd "$WORK" && module_source "github.com/fluxcd/$name@v$version" && nonlocal_replaces "$GOMOD")
    done | awk '{ split($0, p, "=>"); if (!seen[p[1]]++) print }'
  } >"$WORK/go.mod.tmp"
  : >"$WORK/go.sum.tmp"
  for pair in "${CONTROLLERS[@]}"; do
    name=${pair%%=*} version=${pair#*=}
    (cd "$WORK" && module_source "github.com/fluxcd/$name@v$version" && cat "$SRC/go.sum") >>"$WORK/go.sum.tmp"
  done
  mv "$WORK/go.mod.tmp" "$WORK/go.mod"
  sort -u "$WORK/go.sum.tmp" >"$WORK/go.sum" && rm "$WORK/go.sum.tmp"
  {
    echo "//go:build tools"
    echo
    echo "package fluxbuild"
    echo
    echo "import ("
    for pair in "${CONTROLLERS[@]}"; do echo "	_ \"github.com/fluxcd/${pair%%=*}\""; done
    echo ")"
  } >"$WORK/tools.go"
  (cd "$WORK" && with_progress "flux: downloading modules" "" go mod tidy)
  touch "$WORK/.tidy"
}

PATHS_ONLY=0
if [ "${1:-}" = --paths ]; then PATHS_ONLY=1; shift; fi

missing=()
for pair in "${CONTROLLERS[@]}"; do
  name=${pair%%=*} version=${pair#*=}
  [ -x "$ROOT/bin/flux/$name-v$version/$name" ] || missing+=("$pair")
done
if [ $PATHS_ONLY = 0 ] && [ ${#missing[@]} -gt 0 ]; then
  wrapper
  pkgs=()
  for pair in "${missing[@]}"; do pkgs+=("github.com/fluxcd/${pair%%=*}"); done
  total=$(cd "$WORK" && go list -deps "${pkgs[@]}" | wc -l)
  mkdir -p "$WORK/out"
  (cd "$WORK" && with_progress "flux: building ${pkgs[*]##*/}, compiled packages" "$total" \
    $NICE go build -v -ldflags "-s -w" -o "$WORK/out/" "${pkgs[@]}")
  for pair in "${missing[@]}"; do
    name=${pair%%=*} version=${pair#*=}
    out=$ROOT/bin/flux/$name-v$version
    src=$(cd "$WORK" && go list -m -f '{{.Dir}}' "github.com/fluxcd/$name")
    rm -rf "$out" && mkdir -p "$out/crds"
    cp "$src"/config/crd/bases/*.yaml "$out/crds/"
    cp "$src/config/rbac/role.yaml" "$out/role.yaml"
    chmod -R u+w "$out"
    mv "$WORK/out/$name" "$out/$name"
  done
fi

for pair in "${CONTROLLERS[@]}"; do
  name=${pair%%=*} version=${pair#*=}
  var=$(echo "$name" | tr 'a-z-' 'A-Z_')
  echo "$var=$ROOT/bin/flux/$name-v$version"
done
