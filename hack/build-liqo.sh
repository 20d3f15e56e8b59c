#!/usr/bin/env bash
# Build Liqo's virtual kubelet (github.com/liqotech/liqo/cmd/virtual-kubelet at the version
# pinned in hack/liqo/go.mod) into the binary cache, for the Liqo end-to-end tests
# (tests/e2e/test_liqo.py). Liqo's CRDs come from hack/crds.sh.
# Output: $CARBONSHIFT_CACHE/liqo-virtual-kubelet (default .cache/bin in the repository) with
# a stamp file liqo-virtual-kubelet.version; a binary whose stamp matches is not rebuilt.
# Usage: hack/build-liqo.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="$ROOT/hack/liqo"
CACHE="${CARBONSHIFT_CACHE:-$ROOT/.cache/bin}"
PACKAGE=github.com/liqotech/liqo/cmd/virtual-kubelet
NAME=liqo-virtual-kubelet

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath -mod=readonly"

log() { printf '[liqo %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

case "${1:-}" in
    -h|--help) sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) log "error: unknown argument $1" >&2; exit 2 ;;
esac

VERSION="$(awk '$1 == "require" && $2 == "github.com/liqotech/liqo" { print $3 }' "$MODULE/go.mod")"
[[ -n "$VERSION" ]] || { log "error: no github.com/liqotech/liqo in $MODULE/go.mod" >&2; exit 1; }
command -v go >/dev/null 2>&1 || { log "error: go is not installed" >&2; exit 1; }
STAMP="$PACKAGE@$VERSION module:$(cat "$MODULE/go.mod" "$MODULE/go.sum" | sha256sum | cut -c1-16)"
if [[ -x "$CACHE/$NAME" && "$(cat "$CACHE/$NAME.version" 2>/dev/null)" == "$STAMP" ]]; then
    log "$NAME $VERSION is up to date"
    exit 0
fi
mkdir -p "$CACHE"
log "building $NAME from $PACKAGE@$VERSION"
(cd "$MODULE" && go build -ldflags="-s -w" -o "$CACHE/$NAME.tmp" "$PACKAGE")
mv "$CACHE/$NAME.tmp" "$CACHE/$NAME"
printf '%s\n' "$STAMP" > "$CACHE/$NAME.version"
log "built $CACHE/$NAME"
