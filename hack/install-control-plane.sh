#!/usr/bin/env bash
# Builds the local control plane sandgate's tests and demo run on — kube-apiserver, etcd, kubectl,
# kube-scheduler, kube-controller-manager and kwok — from the Go module proxy alone, into
# bin/k8s/<kubernetes version>/, and prints that directory (use it as KUBEBUILDER_ASSETS).
#
#   hack/install-control-plane.sh [ROOT]      ROOT defaults to ./bin/k8s
#
# A binary already there that reports the pinned version is kept, so a second run costs seconds.
# setup-envtest's release download is not used: only the module proxy is reachable on the
# machines this project is built on.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.1}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
ROOT="${1:-./bin/k8s}"

say() { printf '[control-plane] %s\n' "$*" >&2; }
fail() { printf '[control-plane] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || fail "go is not on PATH"
mkdir -p "$ROOT/$K8S_VERSION"
DEST="$(cd "$ROOT/$K8S_VERSION" && pwd)"

# Two concurrent runs (make -j, parallel CI steps) must not build into the same place.
exec 9>"$DEST/.lock"
flock 9

# A surrounding workspace, vendor dir or toolchain switch must not change what gets built.
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"

reports() { # BINARY EXPECTED-PREFIX ARGS... : the binary exists and its version output starts so
  local bin="$DEST/$1" want="$2"; shift 2
  [ -x "$bin" ] || return 1
  # The whole output is read before taking its first line: `| head -n1` under pipefail fails
  # at random when head exits before a multi-line printer (kubectl, etcd) is done (SIGPIPE).
  local got; got="$("$bin" "$@" 2>/dev/null)" || return 1
  [[ "${got%%$'\n'*}" == "$want"* ]]
}

have() {
  case "$1" in
    kube-apiserver|kube-scheduler|kube-controller-manager) reports "$1" "Kubernetes $K8S_VERSION" --version ;;
    kubectl) reports kubectl "Client Version: $K8S_VERSION" version --client ;;
    etcd) reports etcd "etcd Version: ${ETCD_VERSION#v}" --version ;;
    kwok) reports kwok "kwok version $KWOK_VERSION" --version ;;
  esac
}

SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/sandgate-control-plane.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT

elapsed() { local start=$1; echo "$(( $(date +%s) - start ))s"; }

place() { # NAME: move a fresh build into DEST atomically, then check it
  mv -f "$SCRATCH/out/$1" "$DEST/.$1.tmp" && mv -f "$DEST/.$1.tmp" "$DEST/$1"
  have "$1" || fail "$1 was built but does not report the expected version"
}

gobuild() { # LOG-NAME ARGS...: run go build, showing its errors only when it fails
  local name=$1; shift
  if ! go "$@" >"$SCRATCH/$name.log" 2>&1; then
    grep -v '^go: downloading' "$SCRATCH/$name.log" >&2 || true
    fail "building $name failed"
  fi
}

mkdir -p "$SCRATCH/out"

# --- Kubernetes components -------------------------------------------------------------------
# k8s.io/kubernetes cannot be `go install`ed: it replaces its staging modules with ./staging
# paths that its module zip does not contain. A scratch module requiring it, with each such
# replace pointed at the published staging module of the same release, builds fine.
missing=()
for c in kube-apiserver kubectl kube-scheduler kube-controller-manager; do
  if have "$c"; then say "$c $K8S_VERSION present"; else missing+=("$c"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  start=$(date +%s)
  say "building ${missing[*]} $K8S_VERSION from the module proxy (about 11 minutes on 2 cores from a cold cache)"
  mod="$SCRATCH/k8s"; mkdir -p "$mod"; cd "$mod"
  printf 'module sandgate.local/k8s\n\ngo 1.26\n' > go.mod
  upstream="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [ -f "$upstream" ] || fail "could not download k8s.io/kubernetes@$K8S_VERSION"
  staging="v0.${K8S_VERSION#v1.}"
  {
    printf 'module sandgate.local/k8s\n\n%s\n\nrequire k8s.io/kubernetes %s\n\n' "$(grep -m1 '^go ' "$upstream")" "$K8S_VERSION"
    # Every "k8s.io/x => ./staging/src/k8s.io/x" replace becomes "k8s.io/x => k8s.io/x <staging>".
    sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#replace \1 => \1 '"$staging"'#p' "$upstream" | sort -u
  } > go.mod
  grep -q '^replace k8s.io/client-go ' go.mod || fail "found no staging replaces in $upstream"
  minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  ldflags="-s -w"
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags="$ldflags -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  pkgs=(); for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  gobuild kubernetes build -trimpath -ldflags "$ldflags" -o "$SCRATCH/out/" "${pkgs[@]}"
  cd - >/dev/null
  for c in "${missing[@]}"; do place "$c"; done
  say "built ${missing[*]} in $(elapsed "$start")"
fi

# --- etcd ------------------------------------------------------------------------------------
# Its server module has relative replaces as well; requiring it from a scratch module works.
if have etcd; then say "etcd $ETCD_VERSION present"; else
  start=$(date +%s)
  say "building etcd $ETCD_VERSION (about a minute)"
  mod="$SCRATCH/etcd"; mkdir -p "$mod"; cd "$mod"
  printf 'module sandgate.local/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > go.mod
  gobuild etcd build -trimpath -ldflags "-s -w" -o "$SCRATCH/out/etcd" go.etcd.io/etcd/server/v3
  cd - >/dev/null
  place etcd
  say "built etcd in $(elapsed "$start")"
fi

# --- kwok ------------------------------------------------------------------------------------
if have kwok; then say "kwok $KWOK_VERSION present"; else
  start=$(date +%s)
  say "building kwok $KWOK_VERSION (about two minutes)"
  (cd "$SCRATCH" && GOBIN="$SCRATCH/out" gobuild kwok install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
  place kwok
  say "built kwok in $(elapsed "$start")"
fi

echo "$DEST"
