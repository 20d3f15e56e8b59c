#!/usr/bin/env bash
# Build the control-plane binaries that `make sandbox` and the end-to-end tests run:
# etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl,
# karmada-controller-manager and karmada-webhook from the pinned Go modules in hack/tools/,
# plus the carbonshift karmada-scheduler from karmada-plugin/ when that module exists,
# Karpenter's kwok provider (karpenter-kwok) and the KWOK controller from hack/karpenter/,
# and each other Karmada release pinned by hack/karmada-*/go.mod as <name>-<version>
# (karmada-controller-manager-v1.16.0, karmada-webhook-v1.16.0, karmada-scheduler-v1.16.0).
#
# Output goes to $CARBONSHIFT_CACHE (default: .cache/bin in the repository). Each binary
# has a stamp file <name>.version; a binary whose stamp matches the pinned version is
# not rebuilt. Every run ends with hack/crds.sh: the CRDs of the same pinned modules into
# $CARBONSHIFT_CACHE/crds, stamped alike. Usage: hack/build-binaries.sh [NAME ...]   (default: all)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/hack/tools"
CACHE="${CARBONSHIFT_CACHE:-$ROOT/.cache/bin}"
PLUGIN="$ROOT/karmada-plugin"

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

log() { printf '[binaries %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "error: $*" >&2; exit 1; }

# Version of a module required by hack/tools/go.mod (read without running go).
pinned() { awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$TOOLS/go.mod"; }

sha_of() { cat "$@" | sha256sum | cut -c1-16; }

ETCD_VERSION="$(pinned go.etcd.io/etcd/server/v3)"
K8S_VERSION="$(pinned k8s.io/kubernetes)"
KARMADA_VERSION="$(pinned github.com/karmada-io/karmada)"
[[ -n "$ETCD_VERSION" && -n "$K8S_VERSION" && -n "$KARMADA_VERSION" ]] \
    || die "cannot read the pinned versions from $TOOLS/go.mod"
TOOLS_SUM="$(sha_of "$TOOLS/go.mod" "$TOOLS/go.sum")"

K8S_MINOR="$(cut -d. -f2 <<<"$K8S_VERSION")"
K8S_LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    K8S_LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
    K8S_LDFLAGS+=" -X $pkg.gitTreeState=clean"
done
KARMADA_LDFLAGS="-s -w -X github.com/karmada-io/karmada/pkg/version.gitVersion=$KARMADA_VERSION"

# name | package | version | ldflags
TOOL_BINARIES=(
    "etcd|go.etcd.io/etcd/server/v3|$ETCD_VERSION|-s -w"
    "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|$K8S_VERSION|$K8S_LDFLAGS"
    "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|$K8S_VERSION|$K8S_LDFLAGS"
    "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|$K8S_VERSION|$K8S_LDFLAGS"
    "kubectl|k8s.io/kubernetes/cmd/kubectl|$K8S_VERSION|$K8S_LDFLAGS"
    "karmada-controller-manager|github.com/karmada-io/karmada/cmd/controller-manager|$KARMADA_VERSION|$KARMADA_LDFLAGS"
    "karmada-webhook|github.com/karmada-io/karmada/cmd/webhook|$KARMADA_VERSION|$KARMADA_LDFLAGS"
)

wanted() {  # wanted NAME: true when NAME was asked for (or nothing was)
    [[ ${#SELECTED[@]} -eq 0 ]] && return 0
    local s; for s in "${SELECTED[@]}"; do [[ "$s" == "$1" ]] && return 0; done
    return 1
}

up_to_date() {  # up_to_date NAME STAMP
    [[ -x "$CACHE/$1" && -f "$CACHE/$1.version" && "$(cat "$CACHE/$1.version")" == "$2" ]]
}

need_go() {
    command -v go >/dev/null 2>&1 || die "go is not installed (needs Go >= $(awk '$1 == "go" {print $2}' "$TOOLS/go.mod"))"
}

# build_one NAME STAMP DIR PACKAGE LDFLAGS: go build PACKAGE inside module DIR.
build_one() {
    local name="$1" stamp="$2" dir="$3" pkg="$4" ldflags="$5" start
    if up_to_date "$name" "$stamp"; then
        log "$name: cached ($stamp)"
        return 0
    fi
    need_go
    log "$name: building $pkg ($stamp)"
    start=$SECONDS
    # A temporary name of this run's own: two builds at once (two test sessions) must not
    # move each other's half-written binaries.
    (cd "$dir" && go build -ldflags "$ldflags" -o "$CACHE/$name.tmp.$$" "$pkg")
    mv -f "$CACHE/$name.tmp.$$" "$CACHE/$name"
    printf '%s\n' "$stamp" > "$CACHE/$name.version"
    log "$name: built in $((SECONDS - start))s"
}

# --- karmada-scheduler with the carbonshift plugin (module karmada-plugin/) ---------------
# Built only when karmada-plugin/go.mod exists. The stamp covers every Go source and the
# module files, so any change to the plugin rebuilds it.
build_karmada_scheduler() {
    if [[ ! -f "$PLUGIN/go.mod" ]]; then
        log "karmada-scheduler: skipped (no karmada-plugin/go.mod)"
        return 0
    fi
    local sum
    sum="$(cd "$PLUGIN" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) \
        -not -path './vendor/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)"
    build_one karmada-scheduler "karmada-plugin src:$sum" "$PLUGIN" ./cmd/karmada-scheduler \
        "-s -w"
}

# --- Karpenter with its kwok cloud provider, and the KWOK controller ------------------------
# The sandbox's workload cluster runs the real Karpenter controller (its kwok provider
# creates Node objects instead of instances) and the KWOK controller (which makes those
# Nodes Ready and the pods bound to them Running). Each comes from its own pinned module,
# hack/karpenter/ and hack/karpenter/kwok/: Karpenter v1.14.1 pins k8s.io/* v0.35 and
# controller-runtime v0.23, KWOK v0.8.0 v0.36 and v0.24, and hack/tools replaces k8s.io/*
# for kube-apiserver, so no two of them could share a module graph. Both upstream binaries
# are called kwok: Karpenter's is installed as karpenter-kwok.
KARPENTER_TOOLS="$ROOT/hack/karpenter"
KWOK_TOOLS="$KARPENTER_TOOLS/kwok"

# module_version DIR MODULE: the version of MODULE that DIR/go.mod requires (in a
# require block or on a single require line).
module_version() {
    awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' \
        "$1/go.mod"
}

# name | module dir | package | module (its version pins the build)
KARPENTER_BINARIES=(
    "karpenter-kwok|$KARPENTER_TOOLS|sigs.k8s.io/karpenter/kwok|sigs.k8s.io/karpenter"
    "kwok|$KWOK_TOOLS|sigs.k8s.io/kwok/cmd/kwok|sigs.k8s.io/kwok"
)

build_karpenter() {  # build_karpenter: the wanted KARPENTER_BINARIES
    local entry name dir pkg module version ldflags
    for entry in "${KARPENTER_BINARIES[@]}"; do
        IFS='|' read -r name dir pkg module <<<"$entry"
        wanted "$name" || continue
        version="$(module_version "$dir" "$module")"
        [[ -n "$version" ]] || die "cannot read the pinned $module version from $dir/go.mod"
        case "$module" in
            sigs.k8s.io/karpenter) ldflags="-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$version" ;;
            sigs.k8s.io/kwok) ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${version#v}" ;;
        esac
        build_one "$name" "$pkg@$version module:$(sha_of "$dir/go.mod" "$dir/go.sum")" \
            "$dir" "$pkg" "$ldflags"
    done
}

# --- Other Karmada releases (hack/karmada-*/) -----------------------------------------------
# Each hack/karmada-<minor>/go.mod pins one Karmada release besides hack/tools' (v1.16.0: a
# Karmada API without overflowAffinities), whose stock karmada-controller-manager,
# karmada-webhook and karmada-scheduler the end-to-end tests run against the same etcd,
# kube-apiserver and kube-controller-manager (tests/e2e/test_karmada_releases.py). A module
# of its own: v1.16.0 requires k8s.io/* v0.34 and controller-runtime v0.22, hack/tools v0.35
# and v0.23. The binaries are named <name>-<version>; the carbonshift plugin is built against
# the pinned release only.
RELEASE_COMMANDS=(
    "karmada-controller-manager|github.com/karmada-io/karmada/cmd/controller-manager"
    "karmada-webhook|github.com/karmada-io/karmada/cmd/webhook"
    "karmada-scheduler|github.com/karmada-io/karmada/cmd/scheduler"
)

release_dirs() {  # the hack/karmada-*/ module folders, one a line
    local dir
    for dir in "$ROOT"/hack/karmada-*/; do
        [[ -f "$dir/go.mod" ]] && printf '%s\n' "${dir%/}"
    done
    return 0
}

release_names() {  # the binaries build_karmada_releases builds, one a line
    local dir version entry
    while IFS= read -r dir; do
        version="$(module_version "$dir" github.com/karmada-io/karmada)"
        for entry in "${RELEASE_COMMANDS[@]}"; do printf '%s-%s\n' "${entry%%|*}" "$version"; done
    done < <(release_dirs)
}

build_karmada_releases() {  # build_karmada_releases: the wanted release binaries
    local dir version sum entry name pkg
    while IFS= read -r dir; do
        version="$(module_version "$dir" github.com/karmada-io/karmada)"
        [[ -n "$version" ]] || die "cannot read the pinned Karmada version from $dir/go.mod"
        sum="$(sha_of "$dir/go.mod" "$dir/go.sum")"
        for entry in "${RELEASE_COMMANDS[@]}"; do
            IFS='|' read -r name pkg <<<"$entry"
            wanted "$name-$version" || continue
            build_one "$name-$version" "$pkg@$version module:$sum" "$dir" "$pkg" \
                "-s -w -X github.com/karmada-io/karmada/pkg/version.gitVersion=$version"
        done
    done < <(release_dirs)
}

main() {
    SELECTED=("$@")
    mkdir -p "$CACHE"
    log "cache: $CACHE"
    local total=$SECONDS entry name pkg version ldflags
    for entry in "${TOOL_BINARIES[@]}"; do
        IFS='|' read -r name pkg version ldflags <<<"$entry"
        wanted "$name" || continue
        build_one "$name" "$pkg@$version tools:$TOOLS_SUM" "$TOOLS" "$pkg" "$ldflags"
    done
    if wanted karmada-scheduler; then build_karmada_scheduler; fi
    build_karpenter
    build_karmada_releases
    if wanted helm; then CARBONSHIFT_CACHE="$CACHE" "$ROOT/hack/build-helm.sh"; fi  # charts/ tests
    CARBONSHIFT_CACHE="$CACHE" "$ROOT/hack/crds.sh"
    log "done in $((SECONDS - total))s"
}

case "${1:-}" in
    -h|--help)
        printf 'usage: hack/build-binaries.sh [NAME ...]\n\n'
        sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        printf '\nnames: %s\n' "$(for b in "${TOOL_BINARIES[@]}"; do printf '%s ' "${b%%|*}"; done)karmada-scheduler$(for b in "${KARPENTER_BINARIES[@]}"; do printf ' %s' "${b%%|*}"; done)$(release_names | sed 's/^/ /' | tr -d '\n')"
        exit 0 ;;
esac
main "$@"
