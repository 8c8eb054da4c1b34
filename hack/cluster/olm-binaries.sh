#!/usr/bin/env bash
# Builds OLM v1's operator-controller and catalogd from the Go module
# github.com/operator-framework/operator-controller (both commands live in
# that one module since 2025), once, and caches them under
# bin/olm/operator-controller-v<version>/ with what installing them needs
# from the module (read from the module zip, so nothing but the Go module
# proxy is used):
#   operator-controller, catalogd   static binaries (CGO off, linux, this
#                                   machine's arch, -tags containers_image_openpgp
#                                   as upstream's Makefile builds them)
#   config/                         the module's kustomize tree (CRDs, RBAC,
#                                   Deployments, Services, the catalogd webhook)
# The wrapper module lives under bin/.olm-build/. A second run with the same
# version builds nothing. Prints nothing on stdout but one `OLM=DIR` line so
# callers can `eval` it.
#
# Version: v1.2.0, the only release the module proxy serves here that
# builds: v1.10.0 and v1.11.0 are served but import
# pkg.package-operator.run/boxcutter, which the proxy refuses (403); the
# releases between answer 403 themselves (docs/olm-e2e.md).
#
# v1.2.0 renders a bundle's manifests as Helm templates, which devloop's CRD
# (Go template text in its image tag rules) cannot survive; upstream fixed
# that after v1.2.0. OLM_PATCH (default for 1.2.0:
# hack/cluster/olm-v1.2.0-static-manifests.patch, that fix backported) is
# applied to a copy of the module, and the build goes to
# bin/olm/operator-controller-v<version>-patched. OLM_PATCH=none builds the
# release as it is.
#
# Usage: hack/cluster/olm-binaries.sh [--paths]   (--paths: print where, build nothing)
set -euo pipefail

OLM_VERSION=${OLM_VERSION:-1.2.0}
MODULE=github.com/operator-framework/operator-controller
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${OLM_PATCH:-}" ] && [ "$OLM_VERSION" = 1.2.0 ]; then
  OLM_PATCH=$ROOT/hack/cluster/olm-v1.2.0-static-manifests.patch
fi
if [ "${OLM_PATCH:-none}" = none ]; then OLM_PATCH=; fi
SUFFIX=${OLM_PATCH:+-patched}
WORK=$ROOT/bin/.olm-build/operator-controller-v$OLM_VERSION$SUFFIX
OUT=$ROOT/bin/olm/operator-controller-v$OLM_VERSION$SUFFIX
NICE=${NICE:-nice -n 10}

# Some k8s.io modules are missing from the checksum database behind the
# proxy; the release's own go.sum vouches for them.
export GONOSUMDB=${GONOSUMDB:-k8s.io}
# shellcheck source=../lib.sh
. "$ROOT/hack/lib.sh"
release_build_env

log() { echo "olm: $*" >&2; }

# wrapper: a module requiring operator-controller at OLM_VERSION (lib.sh's
# release_wrapper: its replaces and go.sum), or a patched copy of it.
wrapper() {
  mkdir -p "$WORK"
  if [ -f "$WORK/go.mod" ] && grep -q "$MODULE v$OLM_VERSION" "$WORK/go.mod" && [ -f "$WORK/.tidy" ] &&
    { [ -z "$OLM_PATCH" ] || [ "$WORK/.tidy" -nt "$OLM_PATCH" ]; }; then
    return 0
  fi
  log "preparing wrapper module for operator-controller v$OLM_VERSION"
  release_wrapper "$WORK" olmbuild "$MODULE" "v$OLM_VERSION" "$MODULE/cmd/catalogd" "$MODULE/cmd/operator-controller"
  if [ -n "$OLM_PATCH" ]; then
    # The patched copy of the module replaces the release.
    echo "replace $MODULE => ./src" >>"$WORK/go.mod"
    rm -rf "$WORK/src"
    cp -r "$SRC" "$WORK/src"
    chmod -R u+w "$WORK/src"
    (cd "$WORK/src" && patch -p1 --forward --quiet <"$OLM_PATCH") || { log "$OLM_PATCH does not apply to v$OLM_VERSION"; exit 1; }
  fi
  rm -f "$WORK/.tidy"
  (cd "$WORK" && with_progress "olm: downloading modules" "" go mod tidy)
  touch "$WORK/.tidy"
}

build() {
  local start=$SECONDS name pkgs=() total
  wrapper
  mkdir -p "$OUT" "$WORK/out"
  for name in operator-controller catalogd; do
    [ -x "$OUT/$name" ] || pkgs+=("$MODULE/cmd/$name")
  done
  if [ ${#pkgs[@]} -gt 0 ]; then
    total=$(cd "$WORK" && go list -deps -tags containers_image_openpgp "${pkgs[@]}" | wc -l)
    (cd "$WORK" && with_progress "olm: building ${pkgs[*]##*/} v$OLM_VERSION${OLM_PATCH:+ with $(basename "$OLM_PATCH")}, compiled packages" "$total" \
      $NICE go build -v -tags containers_image_openpgp \
        -ldflags "-s -w -X $MODULE/internal/shared/version.version=v$OLM_VERSION" \
        -o "$WORK/out/" "${pkgs[@]}")
    for name in "${pkgs[@]}"; do mv "$WORK/out/${name##*/}" "$OUT/${name##*/}"; done
  fi
  local src
  src=$(cd "$WORK" && go list -m -f '{{.Dir}}' "$MODULE")
  if [ -n "$OLM_PATCH" ]; then cp "$OLM_PATCH" "$OUT/"; fi
  rm -rf "$OUT/config"
  cp -r "$src/config" "$OUT/config"
  chmod -R u+w "$OUT/config"
  log "built operator-controller and catalogd v$OLM_VERSION in $((SECONDS - start))s"
}

if [ "${1:-}" != --paths ] && { [ ! -x "$OUT/operator-controller" ] || [ ! -x "$OUT/catalogd" ] || [ ! -f "$OUT/config/base/common/kustomization.yaml" ]; }; then
  build
fi
echo "OLM=$OUT"
