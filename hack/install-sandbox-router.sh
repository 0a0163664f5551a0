#!/usr/bin/env bash
# Builds the public sandbox-router — the command of sigs.k8s.io/agent-sandbox at the version
# test/sdk/go.mod pins, unchanged — into ROOT/<version>/sandbox-router, and prints that
# directory. The SDK suite (test/sdk) runs it as its own process.
#
#   hack/install-sandbox-router.sh [ROOT]      ROOT defaults to ./bin/agent-sandbox
#
# A binary built from the same go.mod and go.sum is kept, so a second run costs a second.
# About a minute on 2 cores from a cold Go cache.
set -euo pipefail

SRC="$(cd "$(dirname "$0")/../test/sdk" && pwd)"
ROOT="${1:-./bin/agent-sandbox}"

say() { printf '[sandbox-router] %s\n' "$*" >&2; }
fail() { printf '[sandbox-router] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || fail "go is not on PATH"
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"

VERSION="$(sed -n 's#^[[:space:]]*sigs.k8s.io/agent-sandbox[[:space:]]\{1,\}\(v[^[:space:]]*\).*#\1#p' "$SRC/go.mod" | head -n1)"
[ -n "$VERSION" ] || fail "no sigs.k8s.io/agent-sandbox requirement in $SRC/go.mod"
STAMP="$VERSION $(cat "$SRC/go.mod" "$SRC/go.sum" | sha256sum | cut -c1-12)"

mkdir -p "$ROOT/$VERSION"
DEST="$(cd "$ROOT/$VERSION" && pwd)"
BIN="$DEST/sandbox-router"

exec 9>"$DEST/.lock"
flock 9

if [ -x "$BIN" ] && [ "$(cat "$DEST/.stamp" 2>/dev/null)" = "$STAMP" ]; then
  say "sandbox-router $VERSION present"
  echo "$DEST"
  exit 0
fi

start=$(date +%s)
say "building sandbox-router $VERSION"
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/sandgate-sandbox-router.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT
if ! (cd "$SRC" && go build -trimpath -ldflags "-s -w" -o "$SCRATCH/sandbox-router" sigs.k8s.io/agent-sandbox/sandbox-router/cmd) >"$SCRATCH/build.log" 2>&1; then
  grep -v '^go: downloading' "$SCRATCH/build.log" >&2 || true
  fail "building sigs.k8s.io/agent-sandbox/sandbox-router/cmd $VERSION failed"
fi
mv -f "$SCRATCH/sandbox-router" "$BIN"
echo "$STAMP" >"$DEST/.stamp"
say "built sandbox-router $VERSION in $(( $(date +%s) - start ))s"
echo "$DEST"
