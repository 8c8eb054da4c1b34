#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller from Go modules,
# once, and caches each under bin/flux/<name>-v<version>/ with what
# installing it needs from its module (read from the module zip, so nothing
# but the Go module proxy is used):
#   <name>          the static binary (CGO off, linux, this machine's arch)
#   crds/*.yaml     config/crd/bases of the module
#   role.yaml       config/rbac/role.yaml of the module (the controller's ClusterRole)
# Wrapper modules live under bin/.flux-build/. A second run with the same
# versions builds nothing. Prints nothing on stdout but `NAME=DIR` lines
# (SOURCE_CONTROLLER=..., KUSTOMIZE_CONTROLLER=...) so callers can `eval` them.
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
NICE=${NICE:-nice -n 15}

# Some k8s.io and fluxcd modules are missing from the checksum database
# behind the proxy.
export GONOSUMDB=${GONOSUMDB:-k8s.io,github.com/fluxcd}
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local

log() { echo "flux: $*" >&2; }

# wrapper NAME VERSION: a module requiring github.com/fluxcd/NAME VERSION
# with the controller's own replace directives (a consumer's build ignores
# the dependency's replaces; local ./api ones are dropped: the published
# api module at the required version is the same code).
wrapper() {
  local name=$1 version=$2 dir=$WORK/$1-v$2
  mkdir -p "$dir"
  if [ -f "$dir/go.mod" ] && grep -q "github.com/fluxcd/$name v$version" "$dir/go.mod" && [ -f "$dir/.tidy" ]; then
    return 0
  fi
  log "preparing wrapper module for $name v$version"
  local info gomod src
  info=$(cd "$dir" && go mod download -json "github.com/fluxcd/$name@v$version") || true
  gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' <<<"$info")
  src=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  [ -n "$gomod" ] && [ -n "$src" ] || { log "github.com/fluxcd/$name@v$version: not served by the module proxy: $info"; exit 1; }
  {
    echo "module devloop.local/fluxbuild"
    echo
    echo "go 1.26"
    echo
    echo "require github.com/fluxcd/$name v$version"
    echo
    # replace lines, single or in a block, whose target is not a local path.
    awk '/^replace \($/ {block=1; next}
         block && /^\)/ {block=0; next}
         /=>/ && (block || /^replace /) {
           sub(/^replace[[:space:]]+/, ""); sub(/^[[:space:]]+/, "")
           split($0, parts, "=>"); target=parts[2]; sub(/^[[:space:]]+/, "", target)
           if (target !~ /^\.\.?\//) print "replace " $0
         }' "$gomod"
  } >"$dir/go.mod"
  # The controller's own go.sum: its dependencies are verified against the
  # hashes its release was built with, including modules the checksum
  # database behind this proxy does not answer for.
  cp "$src/go.sum" "$dir/go.sum"
  chmod u+w "$dir/go.sum"
  cat >"$dir/tools.go" <<GO
//go:build tools

package fluxbuild

import _ "github.com/fluxcd/$name"
GO
  rm -f "$dir/.tidy"
  (cd "$dir" && $NICE go mod tidy >/dev/null)
  touch "$dir/.tidy"
}

# build NAME VERSION OUT: the binary, its CRDs and its ClusterRole.
build() {
  local name=$1 version=$2 out=$3 dir=$WORK/$1-v$2 start=$SECONDS
  wrapper "$name" "$version"
  log "building $name v$version (minutes on a cold cache)"
  (cd "$dir" && CGO_ENABLED=0 GOOS=linux $NICE go build -trimpath -ldflags "-s -w" -o "$out/$name.tmp" "github.com/fluxcd/$name")
  local src
  src=$(cd "$dir" && go list -m -f '{{.Dir}}' "github.com/fluxcd/$name")
  rm -rf "$out/crds" && mkdir -p "$out/crds"
  cp "$src"/config/crd/bases/*.yaml "$out/crds/"
  cp "$src/config/rbac/role.yaml" "$out/role.yaml"
  chmod -R u+w "$out"
  mv "$out/$name.tmp" "$out/$name"
  log "built $name v$version in $((SECONDS - start))s"
}

PATHS_ONLY=0
if [ "${1:-}" = --paths ]; then PATHS_ONLY=1; shift; fi

for pair in source-controller=$SOURCE_CONTROLLER_VERSION kustomize-controller=$KUSTOMIZE_CONTROLLER_VERSION; do
  name=${pair%%=*} version=${pair#*=}
  out=$ROOT/bin/flux/$name-v$version
  if [ $PATHS_ONLY = 0 ] && [ ! -x "$out/$name" ]; then
    mkdir -p "$out"
    build "$name" "$version" "$out"
  fi
  var=$(echo "$name" | tr 'a-z-' 'A-Z_')
  echo "$var=$out"
done
