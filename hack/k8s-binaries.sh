#!/usr/bin/env bash
# Builds the Kubernetes binaries envtest and the local cluster run, from Go
# modules, cached under bin/k8s/v<K8S>/:
#   etcd, kube-apiserver, kubectl                      (envtest; `make test`)
#   kube-controller-manager, kube-scheduler, kube-proxy,
#   kubelet, coredns                                   (the local cluster)
# One version for every component and one wrapper module
# (bin/.k8s-build/v<K8S>/) requiring k8s.io/kubernetes, CoreDNS and the etcd
# server k8s.io/kubernetes itself requires, so a package they share compiles
# once; what is missing is built by one `go build` invocation. devloop's own
# go.mod pins the same k8s.io staging versions and `make` builds everything
# with CGO_ENABLED=0, so client-go & co. compiled here serve `go test` too.
#
# Prints nothing on stdout but `NAME=PATH` lines (one per binary) so callers
# can `eval` them; progress goes to stderr at least every 20 s.
#
# Usage: hack/k8s-binaries.sh [--paths] [names...]   (default: all;
#        --paths prints where the binaries are or would be, building nothing)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
COREDNS_VERSION=${COREDNS_VERSION:-1.14.7}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/bin/.k8s-build/v$K8S_VERSION
OUT=$ROOT/bin/k8s/v$K8S_VERSION
NICE=${NICE:-nice -n 10}
MINOR=${K8S_VERSION#*.}; MINOR=${MINOR%%.*}

export GONOSUMDB=${GONOSUMDB:-k8s.io}
export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local
export CGO_ENABLED=0

# shellcheck source=lib.sh
. "$ROOT/hack/lib.sh"
log() { echo "k8s-binaries: $*" >&2; }

ALL=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kube-proxy kubelet coredns)

package_of() {
  case $1 in
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    coredns) echo github.com/coredns/coredns ;;
    kube-*|kubectl|kubelet) echo "k8s.io/kubernetes/cmd/$1" ;;
    *) log "unknown binary $1"; exit 2 ;;
  esac
}

# wrapper: the module every binary is built from. k8s.io/kubernetes replaces
# its staging modules with ./staging paths; a module consumer pins them to
# the matching published v0.x versions. devloop's versions are required too
# (devloop_requires): client-go & co. compile once for both.
wrapper() {
  local stamp
  stamp="k8s.io/kubernetes v$K8S_VERSION coredns v$COREDNS_VERSION devloop $(sha256sum <"$ROOT/go.mod" | cut -c1-16)"
  if [ -f "$WORK/go.sum" ] && [ "$(cat "$WORK/.stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  mkdir -p "$WORK"
  cd "$WORK"
  module_source "k8s.io/kubernetes@v$K8S_VERSION"
  cd - >/dev/null
  {
    echo "module devloop.local/k8sbuild"
    echo
    echo "go 1.26"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes v$K8S_VERSION"
    echo "	github.com/coredns/coredns v$COREDNS_VERSION"
    devloop_requires "$ROOT" | grep -v '^	k8s.io/kubernetes '
    echo ")"
    echo
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 v0.'"$MINOR"'.'"${K8S_VERSION##*.}"'#p' "$GOMOD"
  } >"$WORK/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package k8sbuild"
    echo
    echo "import ("
    local n
    for n in "${ALL[@]}"; do echo "	_ \"$(package_of "$n")\""; done
    echo ")"
  } >"$WORK/tools.go"
  (cd "$WORK" && with_progress "k8s-binaries: downloading modules for k8s.io/kubernetes v$K8S_VERSION" "" go mod tidy)
  echo "$stamp" >"$WORK/.stamp"
}

PATHS_ONLY=0
if [ "${1:-}" = --paths ]; then PATHS_ONLY=1; shift; fi
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")

missing=()
for n in "${names[@]}"; do
  package_of "$n" >/dev/null
  [ -x "$OUT/$n" ] || missing+=("$n")
done

if [ $PATHS_ONLY = 0 ] && [ ${#missing[@]} -gt 0 ]; then
  wrapper
  pkgs=()
  for n in "${missing[@]}"; do pkgs+=("$(package_of "$n")"); done
  total=$(cd "$WORK" && go list -deps "${pkgs[@]}" | wc -l)
  mkdir -p "$OUT/.tmp"
  log "building ${missing[*]} v$K8S_VERSION in one go build ($total packages at most; minutes on a cold cache)"
  # -v lists each package as it is compiled: the progress count.
  (cd "$WORK" && with_progress "k8s-binaries: compiled packages" "$total" \
    $NICE go build -v -o "$OUT/.tmp/" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$MINOR" \
      "${pkgs[@]}")
  # go build names a binary after its package path's last element (before a
  # /vN suffix): etcd's is "server".
  [ ! -e "$OUT/.tmp/server" ] || mv "$OUT/.tmp/server" "$OUT/.tmp/etcd"
  for n in "${missing[@]}"; do mv "$OUT/.tmp/$n" "$OUT/$n"; done
  rmdir "$OUT/.tmp"
fi

for n in "${names[@]}"; do
  var=$(echo "$n" | tr 'a-z-' 'A-Z_')
  echo "$var=$OUT/$n"
done
