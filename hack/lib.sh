# shellcheck shell=bash
# Sourced by the build scripts (hack/k8s-binaries.sh, hack/opm.sh, the Flux
# and OLM builds).
#
# Run a long command and say how far it has got at least every 20 seconds,
# so no step of `make dev-up` or `make test` is silent for long:
#
#   with_progress LABEL TOTAL CMD...   CMD's output goes to a log; every 20 s
#                                      "LABEL: N/TOTAL, Ts" (N: lines of the
#                                      log, e.g. packages `go build -v` has
#                                      compiled); on failure, the compile
#                                      errors in the log, or its tail.
#                                      TOTAL may be empty (lines only).

with_progress() {
  local label=$1 total=$2; shift 2
  local log start=$SECONDS next=20 pid rc n
  log=$(mktemp)
  "$@" >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - start)) -ge $next ]; then
      n=$(wc -l <"$log")
      echo "$label: ${n}${total:+/$total}, $((SECONDS - start))s" >&2
      next=$((next + 20))
    fi
  done
  rc=0
  wait "$pid" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "$label: failed (exit $rc) after $((SECONDS - start))s:" >&2
    # go build -v lists packages between the errors: show the errors.
    if grep -qE '^# |\.go:[0-9]+:|^go: ' "$log"; then
      grep -E '^# |\.go:[0-9]+:|^go: |^\s' "$log" | tail -n 40 >&2
    else
      tail -n 30 "$log" >&2
    fi
  else
    echo "$label: done in $((SECONDS - start))s" >&2
  fi
  rm -f "$log"
  return $rc
}

# devloop_requires ROOT: `require` block lines (tab, path, version) for
# every module devloop's go.mod selects. A wrapper module that builds a
# tool (the Kubernetes binaries, opm) lists them so that a dependency both
# build is the same version: the packages above it are then the same build
# cache entries, compiled once for the tool and for devloop's own tests.
# Versions only ever go up (Go's minimal version selection): a tool that
# needs a newer version keeps it, and devloop's go.mod follows it up.
devloop_requires() {
  (cd "$1" && GOFLAGS=-mod=readonly go list -m -f '{{if and (not .Main) (not .Replace)}}	{{.Path}} {{.Version}}{{end}}' all) | grep .
}

# module_source MODULE@VERSION: sets GOMOD (its go.mod) and SRC (its
# extracted tree in the module cache); fails naming the module when the
# proxy does not serve it. Run in a module directory.
module_source() {
  local info
  info=$(go mod download -json "$1") || true
  GOMOD=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' <<<"$info")
  SRC=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
  if [ -z "$GOMOD" ] || [ -z "$SRC" ]; then
    echo "$1: not served by the module proxy: $info" >&2
    return 1
  fi
}

# nonlocal_replaces GOMOD: the go.mod's replace directives, single or in a
# block, whose target is not a local path, as `replace` lines. A consumer's
# build ignores a dependency's replaces; local ./api ones are dropped (the
# published module at the required version is the same code).
nonlocal_replaces() {
  awk '/^replace \($/ {block=1; next}
       block && /^\)/ {block=0; next}
       /=>/ && (block || /^replace /) {
         sub(/^replace[[:space:]]+/, ""); sub(/^[[:space:]]+/, "")
         split($0, parts, "=>"); target=parts[2]; sub(/^[[:space:]]+/, "", target)
         if (target !~ /^\.\.?\//) print "replace " $0
       }' "$1"
}

# release_build_env: exports what building a released Go command from a
# wrapper module needs: go may write go.mod and go.sum (-mod=mod), only the
# installed Go (no toolchain download), static linux binaries.
release_build_env() {
  export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0 GOOS=linux
}

# release_wrapper DIR NAME MODULE VERSION PKG...: writes a throwaway module
# devloop.local/NAME in DIR that builds the packages PKG... of MODULE at
# VERSION (vX.Y.Z): its go.mod requires the release with the release's
# non-local replace directives (a consumer's build ignores a dependency's
# replaces); its go.sum is the release's own, so every dependency is checked
# against the hashes the release was built with, also those the checksum
# database behind this proxy does not answer for; tools.go imports PKG....
# Sets GOMOD and SRC (module_source). The caller appends what else go.mod
# needs, then runs go mod tidy in DIR.
release_wrapper() {
  local dir=$1 name=$2 module=$3 version=$4 pkg; shift 4
  local found
  mkdir -p "$dir"
  # In DIR, as module_source wants: outside devloop's module.
  found=$(cd "$dir" && module_source "$module@$version" && printf '%s\n' "$GOMOD" "$SRC") || return 1
  { read -r GOMOD; read -r SRC; } <<<"$found"
  {
    echo "module devloop.local/$name"
    echo
    echo "go 1.26"
    echo
    echo "require $module $version"
    echo
    nonlocal_replaces "$GOMOD"
  } >"$dir/go.mod"
  cp "$SRC/go.sum" "$dir/go.sum"
  chmod u+w "$dir/go.sum"
  {
    printf '//go:build tools\n\npackage %s\n\nimport (\n' "$name"
    for pkg in "$@"; do printf '\t_ "%s"\n' "$pkg"; done
    printf ')\n'
  } >"$dir/tools.go"
}

# with_heartbeat LABEL STATUS CMD...: runs CMD with its output shown as it
# comes and, every 20 s, a line "LABEL: <what the function STATUS prints>,
# Ts". Exits with CMD's status.
with_heartbeat() {
  local label=$1 status=$2; shift 2
  local start=$SECONDS rc=0 ticker
  (
    while sleep 20; do
      echo "$label: $($status), $((SECONDS - start))s" >&2
    done
  ) &
  ticker=$!
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null
  wait "$ticker" 2>/dev/null || true
  return $rc
}
