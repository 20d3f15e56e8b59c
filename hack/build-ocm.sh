#!/usr/bin/env bash
# Build the Open Cluster Management placement controller (open-cluster-management.io/ocm at the
# version pinned in hack/ocm/go.mod) into the binary cache, for the OCM end-to-end tests
# (tests/e2e/test_ocm.py). Its CRDs come from hack/crds.sh.
# Output: $CARBONSHIFT_CACHE/placement (default .cache/bin in the repository) with a stamp file
# placement.version; a binary whose stamp matches is not rebuilt.
# Usage: hack/build-ocm.sh [placement]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="$ROOT/hack/ocm"
CACHE="${CARBONSHIFT_CACHE:-$ROOT/.cache/bin}"
MOD=open-cluster-management.io/ocm
NAME=placement

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

log() { printf '[ocm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "error: $*" >&2; exit 1; }

case "${1:-}" in
    -h|--help) sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    ""|placement) ;;
    *) die "unknown argument $1" ;;
esac

MOD_VERSION="$(awk -v m="$MOD" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$MODULE/go.mod")"
[[ -n "$MOD_VERSION" ]] || die "cannot read the pinned version from $MODULE/go.mod"

command -v go >/dev/null 2>&1 || die "go is not installed (needs Go >= $(awk '$1 == "go" {print $2}' "$MODULE/go.mod"))"
[[ -s "$MODULE/go.sum" ]] || die "$MODULE/go.sum is missing: run go mod tidy there"
SUM="$(cat "$MODULE/go.mod" "$MODULE/go.sum" | sha256sum | cut -c1-16)"
mkdir -p "$CACHE"

stamp="$MOD/cmd/$NAME@$MOD_VERSION module:$SUM"
if [[ -x "$CACHE/$NAME" && -f "$CACHE/$NAME.version" && "$(cat "$CACHE/$NAME.version")" == "$stamp" ]]; then
    log "$NAME: cached ($stamp)"
    exit 0
fi
log "$NAME: building ($stamp) into $CACHE"
start=$SECONDS
# A temporary name of this run's own, so two builds at once never move half-written files.
(cd "$MODULE" && go build -ldflags "-s -w" -o "$CACHE/$NAME.tmp.$$" "$MOD/cmd/$NAME")
mv -f "$CACHE/$NAME.tmp.$$" "$CACHE/$NAME"
printf '%s\n' "$stamp" > "$CACHE/$NAME.version"
log "$NAME: built in $((SECONDS - start))s"
