#!/usr/bin/env bash
# Builds hack/cert-manager — cert-manager's own controllers and CA injector, wired by a
# small program of ours from the github.com/cert-manager/cert-manager module — into
# ROOT/<cert-manager version>/cert-manager-controllers, copies cert-manager's CRDs next to it
# (ROOT/<version>/crds/), and prints that directory.
#
#   hack/install-cert-manager.sh [ROOT]      ROOT defaults to ./bin/cert-manager
#
# The version is the one hack/cert-manager/go.mod requires. A binary already there that
# reports that version and the hash of the program's source is kept, so a second run costs
# a second; a changed program is rebuilt. About 1,200 packages: 3-4 minutes on 2 cores from a
# cold Go cache.
set -euo pipefail

SRC="$(cd "$(dirname "$0")/cert-manager" && pwd)"
ROOT="${1:-./bin/cert-manager}"

say() { printf '[cert-manager] %s\n' "$*" >&2; }
fail() { printf '[cert-manager] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || fail "go is not on PATH"
# A surrounding workspace or toolchain switch must not change what gets built, and the build
# must not rewrite the committed go.mod/go.sum.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

VERSION="$(sed -n 's#^[[:space:]]*github.com/cert-manager/cert-manager[[:space:]]\{1,\}\(v[^[:space:]]*\).*#\1#p' "$SRC/go.mod" | head -n1)"
[ -n "$VERSION" ] || fail "no github.com/cert-manager/cert-manager requirement in $SRC/go.mod"
WIRING="$(cd "$SRC" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-12)"

mkdir -p "$ROOT/$VERSION"
DEST="$(cd "$ROOT/$VERSION" && pwd)"
BIN="$DEST/cert-manager-controllers"

# Two concurrent runs (make -j, parallel CI steps) must not build into the same place.
exec 9>"$DEST/.lock"
flock 9

have() {
  [ -x "$BIN" ] && [ -f "$DEST/crds/cert-manager.io_certificates.yaml" ] || return 1
  local got; got="$("$BIN" --version 2>/dev/null)" || return 1
  [ "$got" = "cert-manager $VERSION (sandgate wiring $WIRING)" ]
}

if have; then
  say "cert-manager controllers $VERSION present"
  echo "$DEST"
  exit 0
fi

SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/sandgate-cert-manager.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT

start=$(date +%s)
say "building cert-manager controllers $VERSION (about 4 minutes on 2 cores from a cold cache)"
if ! (cd "$SRC" && go build -trimpath -ldflags "-s -w -X main.wiring=$WIRING" -o "$SCRATCH/cert-manager-controllers" .) >"$SCRATCH/build.log" 2>&1; then
  grep -v '^go: downloading' "$SCRATCH/build.log" >&2 || true
  fail "building hack/cert-manager failed"
fi

# The CRDs ship as plain YAML in the module (deploy/crds); the tests install them from here.
MODDIR="$(cd "$SRC" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)"
[ -d "$MODDIR/deploy/crds" ] || fail "no deploy/crds in $MODDIR"
mkdir -p "$SCRATCH/crds"
cp "$MODDIR"/deploy/crds/*.yaml "$SCRATCH/crds/"
chmod 0644 "$SCRATCH"/crds/*.yaml

rm -rf "$DEST/crds" && mv "$SCRATCH/crds" "$DEST/crds"
mv -f "$SCRATCH/cert-manager-controllers" "$DEST/.cert-manager-controllers.tmp"
mv -f "$DEST/.cert-manager-controllers.tmp" "$BIN"
have || fail "cert-manager-controllers was built but does not report $VERSION (wiring $WIRING)"
say "built cert-manager controllers $VERSION in $(( $(date +%s) - start ))s"
echo "$DEST"
