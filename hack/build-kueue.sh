#!/usr/bin/env bash
# Build Kueue's controller manager (sigs.k8s.io/kueue/cmd/kueue at the version pinned in
# hack/kueue/go.mod) into the binary cache, and copy its CRDs and webhook manifests, for the
# MultiKueue sandbox (devtools/sandbox/kueue.py, tests/e2e/test_kueue_sandbox.py).
# Output: $CARBONSHIFT_CACHE/kueue-controller-manager (default .cache/bin in the repository) with
# a stamp kueue-controller-manager.version, and $CARBONSHIFT_CACHE/crds/kueue/ (the module's
# config/components/crd/bases/*.yaml, config/components/webhook/manifests.yaml and LICENSE) with a
# stamp crds/kueue.version; whatever matches its stamp is not built or copied again.
# One line differs from upstream (a patched copy of cmd/kueue/main.go laid into hack/kueue with
# go build -overlay, nothing written to the tree): with internal certificate management off,
# cmd/kueue reads its metrics certificate from the fixed path /etc/kueue/metrics/certs; this
# build reads that folder from KUEUE_METRICS_CERT_DIR when it is set.
# Usage: hack/build-kueue.sh [kueue-controller-manager|crds]   (default: both)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="$ROOT/hack/kueue"
CACHE="${CARBONSHIFT_CACHE:-$ROOT/.cache/bin}"
MOD=sigs.k8s.io/kueue
NAME=kueue-controller-manager

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

log() { printf '[kueue %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "error: $*" >&2; exit 1; }

WANT_BINARY=1 WANT_CRDS=1
case "${1:-}" in
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    kueue-controller-manager) WANT_CRDS=0 ;;
    crds) WANT_BINARY=0 ;;
    *) die "unknown argument $1" ;;
esac

MOD_VERSION="$(awk -v m="$MOD" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' "$MODULE/go.mod")"
[[ -n "$MOD_VERSION" ]] || die "cannot read the pinned version from $MODULE/go.mod"

command -v go >/dev/null 2>&1 || die "go is not installed (needs Go >= $(awk '$1 == "go" {print $2}' "$MODULE/go.mod"))"
[[ -s "$MODULE/go.sum" ]] || die "$MODULE/go.sum is missing: run go mod tidy there"
SUM="$(cat "$MODULE/go.mod" "$MODULE/go.sum" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)"
mkdir -p "$CACHE/crds"
WORK=""
trap '[[ -z "$WORK" ]] || rm -rf "$WORK"' EXIT

# The module's directory (downloaded through the Go module proxy unless already there).
module_dir() {
    local json dir
    if ! json="$(cd "$MODULE" && go mod download -json "$MOD@$MOD_VERSION" 2>&1)"; then
        die "go mod download $MOD@$MOD_VERSION failed: $(tr -s ' \n\t' ' ' <<<"$json" | cut -c1-300)"
    fi
    dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
    [[ -n "$dir" && -d "$dir" ]] || die "go mod download $MOD@$MOD_VERSION: no module directory in: $json"
    printf '%s\n' "$dir"
}

build_binary() {
    local stamp="$MOD/cmd/kueue@$MOD_VERSION module:$SUM" dir work main
    if [[ -x "$CACHE/$NAME" && -f "$CACHE/$NAME.version" && "$(cat "$CACHE/$NAME.version")" == "$stamp" ]]; then
        log "$NAME: cached ($stamp)"
        return 0
    fi
    dir="$(module_dir)"
    main="$dir/cmd/kueue/main.go"
    work="$(mktemp -d)"
    WORK="$work"
    local fixed='metricsCertPath := "/etc/kueue/metrics/certs"'
    [[ "$(grep -cF "$fixed" "$main")" == 1 ]] || die "$main: expected one line '$fixed'"
    sed "s|$fixed|$fixed; if dir := os.Getenv(\"KUEUE_METRICS_CERT_DIR\"); dir != \"\" { metricsCertPath = dir }|" \
        "$main" > "$work/main.go"
    # The Go command replaces no file of the module cache: the patched main package is laid
    # into this module (hack/kueue/cmd/kueue, in the overlay only), with the same imports.
    printf '{"Replace": {"%s": "%s"}}\n' "$MODULE/cmd/kueue/main.go" "$work/main.go" > "$work/overlay.json"
    log "$NAME: building ($stamp) into $CACHE"
    local start=$SECONDS ldflags="-s -w -X $MOD/pkg/version.GitVersion=$MOD_VERSION"
    # A temporary name of this run's own, so two builds at once never move half-written files.
    (cd "$MODULE" && go build -overlay "$work/overlay.json" -ldflags "$ldflags" \
        -o "$CACHE/$NAME.tmp.$$" ./cmd/kueue)
    mv -f "$CACHE/$NAME.tmp.$$" "$CACHE/$NAME"
    printf '%s\n' "$stamp" > "$CACHE/$NAME.version"
    log "$NAME: built in $((SECONDS - start))s"
}

copy_crds() {
    local out="$CACHE/crds" stamp="$MOD@$MOD_VERSION build-kueue.sh:$SUM" dir tmp file count=0
    if [[ -d "$out/kueue" && -f "$out/kueue.version" && "$(cat "$out/kueue.version")" == "$stamp" ]]; then
        log "crds: cached ($MOD@$MOD_VERSION)"
        return 0
    fi
    dir="$(module_dir)"
    tmp="$(mktemp -d "$out/.kueue.XXXXXX")"
    for file in "$dir"/config/components/crd/bases/*.yaml; do
        install -m 0644 "$file" "$tmp/"
        count=$((count + 1))
    done
    [[ $count -gt 0 ]] || die "no CRD in $dir/config/components/crd/bases"
    install -m 0644 "$dir/config/components/webhook/manifests.yaml" "$tmp/webhook-manifests.yaml"
    install -m 0644 "$dir/LICENSE" "$tmp/LICENSE"
    rm -rf "$out/kueue"
    mv -T "$tmp" "$out/kueue" 2>/dev/null || rm -rf "$tmp"  # or a concurrent run was first
    printf '%s\n' "$stamp" > "$out/kueue.version"
    log "crds: $count CRDs and the webhook manifests from $MOD@$MOD_VERSION"
}

[[ $WANT_CRDS == 1 ]] && copy_crds
[[ $WANT_BINARY == 1 ]] && build_binary
exit 0
