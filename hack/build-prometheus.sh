#!/usr/bin/env bash
# Build Prometheus and promtool (github.com/prometheus/prometheus at the version pinned in
# hack/prometheus/go.mod, Prometheus 3.x is published as module v0.3XX.Y) into the binary
# cache, for the alerting rules' tests (tests/rules/test_rules.py) and the dashboard's queries.
# Output: $CARBONSHIFT_CACHE/{prometheus,promtool} (default .cache/bin in the repository),
# each with a stamp file <name>.version; a binary whose stamp matches is not rebuilt.
# Built with -tags remove_all_sd (static, file and HTTP discovery only) and without the web UI.
# Usage: hack/build-prometheus.sh [prometheus|promtool ...]   (default: both)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="$ROOT/hack/prometheus"
CACHE="${CARBONSHIFT_CACHE:-$ROOT/.cache/bin}"
MOD=github.com/prometheus/prometheus

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

log() { printf '[prometheus %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "error: $*" >&2; exit 1; }

NAMES=()
for arg in "$@"; do
    case "$arg" in
        -h|--help) sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        prometheus|promtool) NAMES+=("$arg") ;;
        *) die "unknown binary $arg (known: prometheus promtool)" ;;
    esac
done
[[ ${#NAMES[@]} -gt 0 ]] || NAMES=(promtool prometheus)

MOD_VERSION="$(awk -v m="$MOD" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$MODULE/go.mod")"
[[ -n "$MOD_VERSION" ]] || die "cannot read the pinned version from $MODULE/go.mod"
# Module v0.3XX.Y is Prometheus 3.XX.Y.
minor="$(cut -d. -f2 <<<"$MOD_VERSION")"
RELEASE="3.$((10#${minor:1})).$(cut -d. -f3 <<<"$MOD_VERSION")"
SUM="$( { cat "$MODULE/go.mod"; cat "$MODULE/go.sum" 2>/dev/null || true; } | sha256sum | cut -c1-16)"

command -v go >/dev/null 2>&1 || die "go is not installed (needs Go >= $(awk '$1 == "go" {print $2}' "$MODULE/go.mod"))"
mkdir -p "$CACHE"
if [[ ! -s "$MODULE/go.sum" ]]; then
    log "resolving the dependencies of $MOD@$MOD_VERSION (go mod tidy)"
    (cd "$MODULE" && go mod tidy)
    SUM="$(cat "$MODULE/go.mod" "$MODULE/go.sum" | sha256sum | cut -c1-16)"
fi

V=github.com/prometheus/common/version
LDFLAGS="-s -w -X $V.Version=$RELEASE -X $V.Branch=HEAD -X $V.BuildUser=carbonshift"
for name in "${NAMES[@]}"; do
    stamp="$MOD/cmd/$name@$MOD_VERSION ($RELEASE) module:$SUM"
    if [[ -x "$CACHE/$name" && -f "$CACHE/$name.version" && "$(cat "$CACHE/$name.version")" == "$stamp" ]]; then
        log "$name: cached ($stamp)"
        continue
    fi
    log "$name: building ($stamp) into $CACHE"
    start=$SECONDS
    # A temporary name of this run's own, so two builds at once never move half-written files.
    (cd "$MODULE" && go build -tags remove_all_sd -ldflags "$LDFLAGS" -o "$CACHE/$name.tmp.$$" "$MOD/cmd/$name")
    mv -f "$CACHE/$name.tmp.$$" "$CACHE/$name"
    printf '%s\n' "$stamp" > "$CACHE/$name.version"
    log "$name: built in $((SECONDS - start))s: $("$CACHE/$name" --version 2>&1 | head -1)"
done
