#!/usr/bin/env bash
# Build Helm (helm.sh/helm/v3/cmd/helm at the version pinned in hack/helm/go.mod) into the
# binary cache, for the chart's tests (tests/project/test_chart.py, tests/e2e/test_helm_chart.py)
# and README "Install". Output: $CARBONSHIFT_CACHE/helm (default .cache/bin in the
# repository) with a stamp file helm.version; a binary whose stamp matches is not rebuilt.
# Usage: hack/build-helm.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="$ROOT/hack/helm"
CACHE="${CARBONSHIFT_CACHE:-$ROOT/.cache/bin}"
PKG=helm.sh/helm/v3/cmd/helm

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

log() { printf '[helm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "error: $*" >&2; exit 1; }

case "${1:-}" in
    -h|--help) sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) die "usage: hack/build-helm.sh (no arguments)" ;;
esac

# module_version MODULE: the version hack/helm/go.mod requires (block or single line).
module_version() {
    awk -v m="$1" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' \
        "$MODULE/go.mod"
}

HELM_VERSION="$(module_version helm.sh/helm/v3)"
CLIENT_GO="$(module_version k8s.io/client-go)"
[[ -n "$HELM_VERSION" && -n "$CLIENT_GO" ]] || die "cannot read the pinned versions from $MODULE/go.mod"
STAMP="$PKG@$HELM_VERSION module:$(cat "$MODULE/go.mod" "$MODULE/go.sum" | sha256sum | cut -c1-16)"

if [[ -x "$CACHE/helm" && -f "$CACHE/helm.version" && "$(cat "$CACHE/helm.version")" == "$STAMP" ]]; then
    log "helm: cached ($STAMP)"
    exit 0
fi
command -v go >/dev/null 2>&1 || die "go is not installed (needs Go >= $(awk '$1 == "go" {print $2}' "$MODULE/go.mod"))"

# As Helm's own Makefile: the version, and the Kubernetes version `helm lint` and
# .Capabilities assume (client-go v0.X.Y is Kubernetes 1.X).
K8S_MINOR="$(cut -d. -f2 <<<"$CLIENT_GO")"
LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
LDFLAGS+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    LDFLAGS+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$K8S_MINOR"
done

mkdir -p "$CACHE"
log "helm: building $PKG ($STAMP) into $CACHE"
start=$SECONDS
# A temporary name of this run's own, so two builds at once never move half-written files.
(cd "$MODULE" && go build -ldflags "$LDFLAGS" -o "$CACHE/helm.tmp.$$" "$PKG")
mv -f "$CACHE/helm.tmp.$$" "$CACHE/helm"
printf '%s\n' "$STAMP" > "$CACHE/helm.version"
log "helm: built in $((SECONDS - start))s: $("$CACHE/helm" version --short)"
