#!/usr/bin/env bash
# Build actionlint (github.com/rhysd/actionlint at the exact version pinned below) into the
# binary cache, for linting the GitHub Actions workflows in .github/workflows (`make lint`,
# tests/project/test_workflows.py).
# Output: $CARBONSHIFT_CACHE/actionlint (default .cache/bin in the repository), with a stamp
# file actionlint.version; a binary whose stamp matches is not rebuilt.
# Usage: hack/build-actionlint.sh   (ACTIONLINT_VERSION=vX.Y.Z to try another exact version)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${CARBONSHIFT_CACHE:-$ROOT/.cache/bin}"
MOD=github.com/rhysd/actionlint
# v1.7.12 declares go 1.25.0 in its go.mod: any Go >= 1.25 builds it with GOTOOLCHAIN=local.
VERSION="${ACTIONLINT_VERSION:-v1.7.12}"

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

log() { printf '[actionlint %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "error: $*" >&2; exit 1; }

case "${1:-}" in
    -h|--help) sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) die "unknown argument $1 (no arguments: builds actionlint $VERSION)" ;;
esac
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "ACTIONLINT_VERSION must be an exact vX.Y.Z, not $VERSION"

name=actionlint
stamp="$MOD/cmd/$name@$VERSION"
if [[ -x "$CACHE/$name" && -f "$CACHE/$name.version" && "$(cat "$CACHE/$name.version")" == "$stamp" ]]; then
    log "$name: cached ($stamp)"
    exit 0
fi
command -v go >/dev/null 2>&1 || die "go is not installed (needs Go >= 1.25 for $MOD@$VERSION)"
mkdir -p "$CACHE"
log "$name: building ($stamp) into $CACHE"
start=$SECONDS
# A GOBIN of this run's own, so two builds at once never move half-written files.
tmp="$(mktemp -d "$CACHE/.$name.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
GOBIN="$tmp" go install -ldflags "-s -w" "$MOD/cmd/$name@$VERSION"
mv -f "$tmp/$name" "$CACHE/$name"
printf '%s\n' "$stamp" > "$CACHE/$name.version"
log "$name: built in $((SECONDS - start))s: $("$CACHE/$name" -version 2>&1 | head -1)"
