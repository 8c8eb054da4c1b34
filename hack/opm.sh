#!/usr/bin/env bash
# Builds opm (OLM's catalog tool) from Go modules and caches it under
# bin/opm/v<version>/opm. Nothing is downloaded outside the Go module proxy.
# A second run with the same version is a no-op.
#
# Usage: hack/opm.sh              -> prints the path of the binary
#        OPM_VERSION=1.73.0 hack/opm.sh
#
# The wrapper module requires devloop's own module versions too
# (devloop_requires, hack/lib.sh) and the build has no -trimpath, so the
# packages opm shares with devloop (client-go, grpc, ...) compile once.
# The tag containers_image_openpgp picks the pure-Go signature code of
# containers/image, so no gpgme (cgo) is needed.
set -euo pipefail

OPM_VERSION=${OPM_VERSION:-1.73.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/bin/opm/v$OPM_VERSION/opm
WORK=$ROOT/bin/.opm-build/v$OPM_VERSION

export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local
export CGO_ENABLED=0
# shellcheck source=lib.sh
. "$ROOT/hack/lib.sh"

if [ -x "$OUT" ]; then
  echo "$OUT"
  exit 0
fi
mkdir -p "$WORK" "$(dirname "$OUT")"
stamp="operator-registry v$OPM_VERSION devloop $(sha256sum <"$ROOT/go.mod" | cut -c1-16)"
if [ ! -f "$WORK/go.sum" ] || [ "$(cat "$WORK/.stamp" 2>/dev/null)" != "$stamp" ]; then
  {
    echo "module devloop.local/opmbuild"
    echo
    echo "go 1.26"
    echo
    echo "require ("
    echo "	github.com/operator-framework/operator-registry v$OPM_VERSION"
    devloop_requires "$ROOT"
    echo ")"
  } >"$WORK/go.mod"
  cat >"$WORK/tools.go" <<'GO'
//go:build tools

package opmbuild

import _ "github.com/operator-framework/operator-registry/cmd/opm"
GO
  (cd "$WORK" && with_progress "opm: downloading modules for operator-registry v$OPM_VERSION" "" go mod tidy)
  echo "$stamp" >"$WORK/.stamp"
fi
total=$(cd "$WORK" && go list -deps -tags containers_image_openpgp github.com/operator-framework/operator-registry/cmd/opm | wc -l)
(cd "$WORK" && with_progress "opm: building opm v$OPM_VERSION, compiled packages" "$total" go build -v -tags containers_image_openpgp \
  -ldflags "-s -w -X github.com/operator-framework/operator-registry/cmd/opm/version.gitCommit=v$OPM_VERSION -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=v$OPM_VERSION" \
  -o "$OUT.tmp" github.com/operator-framework/operator-registry/cmd/opm)
mv "$OUT.tmp" "$OUT"
echo "$OUT"
