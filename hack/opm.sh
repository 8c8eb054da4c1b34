#!/usr/bin/env bash
# Builds opm (OLM's catalog tool) from Go modules and caches it under
# bin/opm/v<version>/opm. Nothing is downloaded outside the Go module proxy.
# A second run with the same version is a no-op.
#
# Usage: hack/opm.sh              -> prints the path of the binary
#        OPM_VERSION=1.73.0 hack/opm.sh
#
# The tag containers_image_openpgp picks the pure-Go signature code of
# containers/image, so no gpgme (cgo) is needed.
set -euo pipefail

OPM_VERSION=${OPM_VERSION:-1.73.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/bin/opm/v$OPM_VERSION/opm
WORK=$ROOT/bin/.opm-build/v$OPM_VERSION

export GOFLAGS=-mod=mod
export GOTOOLCHAIN=local

if [ -x "$OUT" ]; then
  echo "$OUT"
  exit 0
fi
mkdir -p "$WORK" "$(dirname "$OUT")"
if [ ! -f "$WORK/go.sum" ]; then
  echo "opm: preparing wrapper module for operator-registry v$OPM_VERSION" >&2
  cat >"$WORK/go.mod" <<MOD
module devloop.local/opmbuild

go 1.26

require github.com/operator-framework/operator-registry v$OPM_VERSION
MOD
  cat >"$WORK/tools.go" <<'GO'
//go:build tools

package opmbuild

import _ "github.com/operator-framework/operator-registry/cmd/opm"
GO
  (cd "$WORK" && go mod tidy >/dev/null)
fi
echo "opm: building opm v$OPM_VERSION (minutes on a cold cache)" >&2
(cd "$WORK" && CGO_ENABLED=0 go build -tags containers_image_openpgp -trimpath \
  -ldflags "-s -w -X github.com/operator-framework/operator-registry/cmd/opm/version.gitCommit=v$OPM_VERSION -X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=v$OPM_VERSION" \
  -o "$OUT.tmp" github.com/operator-framework/operator-registry/cmd/opm)
mv "$OUT.tmp" "$OUT"
echo "$OUT"
