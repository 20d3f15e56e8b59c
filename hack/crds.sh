#!/usr/bin/env bash
# Fetch the CustomResourceDefinitions the sandbox, the end-to-end tests and the schema-based
# unit tests install or read, from the Go modules the build pins, into $CARBONSHIFT_CACHE/crds
# (default: .cache/bin/crds in the repository):
#
#   karmada/         github.com/karmada-io/karmada (hack/tools/go.mod): charts/karmada/_crds/bases,
#                    plus cluster.karmada.io_clusters.yaml generated from pkg/apis/cluster/v1alpha1
#                    with Karmada's own controller-gen version (upstream ships no Cluster CRD)
#   karmada-<version>/  the same, of each other Karmada release hack/karmada-*/go.mod pins
#                    (karmada-v1.16.0/), its Cluster CRD generated with that release's
#                    controller-gen version (built as controller-gen-<version> when it differs)
#   karpenter/       sigs.k8s.io/karpenter (hack/karpenter/go.mod): pkg/apis/crds (core CRDs)
#   karpenter-kwok/  the same module: kwok/charts/crds + kwok/apis/crds (the kwok provider's)
#   kwok/            sigs.k8s.io/kwok (hack/karpenter/kwok/go.mod): kwok-controller-config.yaml,
#                    a KwokConfiguration followed by the upstream fast node/pod stages
#   ocm/             open-cluster-management.io/api at the version ocm v1.2.1 requires (cluster/*)
#   liqo/            github.com/liqotech/liqo v1.0.1: deployments/liqo/charts/liqo-crds/crds
#
# Each folder holds the module's LICENSE and has a stamp <folder>.version; a folder whose stamp
# matches is not fetched again, so a second run needs no network. Modules come through
# `go mod download` (the Go module proxy, or GOMODCACHE when already there).
# Usage: hack/crds.sh [--no-generate] [NAME ...]   (default: all; --no-generate skips building
# controller-gen for the Karmada Cluster CRD, which only the sandbox and e2e tests install)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${CARBONSHIFT_CACHE:-$ROOT/.cache/bin}"
OUT="$CACHE/crds"
OCM_VERSION="v1.2.1"     # open-cluster-management.io/ocm release whose API CRDs we read
LIQO_VERSION="v1.0.1"    # github.com/liqotech/liqo release

export GOTOOLCHAIN=local GOFLAGS="${GOFLAGS:-}"

log() { printf '[crds %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "error: $*" >&2; exit 1; }

# module_version DIR MODULE: the version of MODULE that DIR/go.mod requires.
module_version() {
    awk -v m="$2" '$1 == "require" { $1 = ""; $0 = $0 } $1 == m && $2 ~ /^v/ { print $2; exit }' \
        "$1/go.mod"
}

SCRIPT_SUM="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"

# module_dir MODULE@VERSION: download (or find) the module; prints its directory.
module_dir() {
    command -v go >/dev/null 2>&1 || die "go is not installed: it downloads the pinned modules ($1)"
    local json dir
    if ! json="$(cd / && go mod download -json "$1" 2>&1)"; then
        die "go mod download $1 failed: $(tr -s ' \n\t' ' ' <<<"$json" | cut -c1-300)"
    fi
    dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
    [[ -n "$dir" && -d "$dir" ]] || die "go mod download $1: no module directory in: $json"
    printf '%s\n' "$dir"
}

fresh() {  # fresh NAME STAMP: true when NAME is cached with this stamp
    [[ -d "$OUT/$1" && -f "$OUT/$1.version" && "$(cat "$OUT/$1.version")" == "$2" ]]
}

# place NAME STAMP SRC_DIR PATTERN...: copy the files matching PATTERN (relative to
# SRC_DIR) into a fresh $OUT/NAME, with SRC_DIR/LICENSE, then write the stamp.
place() {
    local name="$1" stamp="$2" src="$3" tmp pattern file count=0
    shift 3
    tmp="$(mktemp -d "$OUT/.$name.XXXXXX")"
    for pattern in "$@"; do
        for file in $src/$pattern; do
            [[ -f "$file" ]] || die "$name: no file matches $pattern in $src"
            install -m 0644 "$file" "$tmp/"
            count=$((count + 1))
        done
    done
    install -m 0644 "$src/LICENSE" "$tmp/LICENSE"
    rm -rf "$OUT/$name"
    mv -T "$tmp" "$OUT/$name" 2>/dev/null || rm -rf "$tmp"  # or a concurrent run was first
    printf '%s\n' "$stamp" > "$OUT/$name.version"
    log "$name: $count files from $stamp"
}

wanted() {  # wanted NAME: true when NAME was asked for (or nothing was)
    [[ ${#SELECTED[@]} -eq 0 ]] && return 0
    local s; for s in "${SELECTED[@]}"; do [[ "$s" == "$1" ]] && return 0; done
    return 1
}

# fetch NAME MODULE VERSION PATTERN...: one folder from one module, unless cached.
fetch() {
    local name="$1" module="$2" version="$3" stamp dir
    shift 3
    wanted "$name" || return 0
    [[ -n "$version" ]] || die "$name: cannot read the pinned $module version"
    stamp="$module@$version crds.sh:$SCRIPT_SUM"
    if fresh "$name" "$stamp"; then
        log "$name: cached ($module@$version)"
        return 0
    fi
    dir="$(module_dir "$module@$version")"
    place "$name" "$stamp" "$dir" "$@"
}

KWOK_CONFIG='# KWOK controller configuration for the carbonshift sandbox (pass with --config=<this file>).
# Document 1 is carbonshift'"'"'s; the stages after it are the upstream fast node/pod stages of
# sigs.k8s.io/kwok %s (kustomize/stage/...), unmodified. Apache License 2.0 (LICENSE).
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.0.0.0/24
  manageAllNodes: false
  manageNodesWithAnnotationSelector: kwok.x-k8s.io/node=fake
  nodeLeaseDurationSeconds: 40
  nodeLeaseParallelism: 4
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  enablePodsOnNodeSyncStreamWatch: true
'
KWOK_STAGES=(
    kustomize/stage/node/fast/node-initialize.yaml
    kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
    kustomize/stage/pod/fast/pod-ready.yaml
    kustomize/stage/pod/fast/pod-complete.yaml
    kustomize/stage/pod/fast/pod-delete.yaml
)

fetch_kwok() {  # the KWOK controller's configuration: ours plus the upstream stages
    local version stamp dir tmp stage
    wanted kwok || return 0
    version="$(module_version "$ROOT/hack/karpenter/kwok" sigs.k8s.io/kwok)"
    [[ -n "$version" ]] || die "kwok: cannot read the pinned sigs.k8s.io/kwok version"
    stamp="sigs.k8s.io/kwok@$version crds.sh:$SCRIPT_SUM"
    if fresh kwok "$stamp"; then log "kwok: cached (sigs.k8s.io/kwok@$version)"; return 0; fi
    dir="$(module_dir "sigs.k8s.io/kwok@$version")"
    tmp="$(mktemp -d "$OUT/.kwok.XXXXXX")"
    {
        # shellcheck disable=SC2059
        printf "$KWOK_CONFIG" "$version"
        for stage in "${KWOK_STAGES[@]}"; do
            [[ -f "$dir/$stage" ]] || die "kwok: no $stage in sigs.k8s.io/kwok@$version"
            printf -- '---\n'
            sed '/^---[[:space:]]*$/d' "$dir/$stage"
        done
    } > "$tmp/kwok-controller-config.yaml"
    install -m 0644 "$dir/LICENSE" "$tmp/LICENSE"
    rm -rf "$OUT/kwok"; mv -T "$tmp" "$OUT/kwok" 2>/dev/null || rm -rf "$tmp"
    printf '%s\n' "$stamp" > "$OUT/kwok.version"
    log "kwok: kwok-controller-config.yaml with ${#KWOK_STAGES[@]} stages from sigs.k8s.io/kwok@$version"
}

fetch_ocm() {  # the API module version that the pinned ocm release requires
    wanted ocm || return 0
    local prefix="open-cluster-management.io/ocm@$OCM_VERSION crds.sh:$SCRIPT_SUM" ocm api dir
    if [[ -d "$OUT/ocm" && "$(cat "$OUT/ocm.version" 2>/dev/null)" == "$prefix api:"* ]]; then
        log "ocm: cached ($(cat "$OUT/ocm.version"))"
        return 0
    fi
    ocm="$(module_dir "open-cluster-management.io/ocm@$OCM_VERSION")"
    api="$(module_version "$ocm" open-cluster-management.io/api)"
    [[ -n "$api" ]] || die "ocm: open-cluster-management.io/ocm@$OCM_VERSION requires no api module"
    dir="$(module_dir "open-cluster-management.io/api@$api")"
    place ocm "$prefix api:open-cluster-management.io/api@$api" "$dir" \
        'cluster/v1/*.crd.yaml' 'cluster/v1beta1/*.crd.yaml' \
        'cluster/v1beta2/*.crd.yaml' 'cluster/v1alpha1/*.crd.yaml'
}

# The Karmada Cluster CRD: Karmada serves clusters.cluster.karmada.io from its aggregated
# API server and ships no CRD for it; a plain kube-apiserver needs one. Generated from the
# pinned module's pkg/apis/cluster/v1alpha1 with the controller-gen version Karmada's
# hack/update-crdgen.sh uses, resolved inside the module that pins the release (hack/tools,
# or hack/karmada-<minor> for another release: the module graph its binaries use).
# generate_karmada_cluster NAME MODULE_DIR: into $OUT/NAME, stamped NAME-cluster.version.
generate_karmada_cluster() {
    local name="$1" tools="$2" version gen_version stamp tmp gen dir
    wanted "$name" || return 0
    version="$(module_version "$tools" github.com/karmada-io/karmada)"
    dir="$(module_dir "github.com/karmada-io/karmada@$version")"
    gen_version="$(sed -n 's/^CONTROLLER_GEN_VER="\(v[^"]*\)"$/\1/p' "$dir/hack/update-crdgen.sh")"
    [[ -n "$gen_version" ]] || die "$name: no CONTROLLER_GEN_VER in hack/update-crdgen.sh"
    stamp="github.com/karmada-io/karmada@$version controller-gen@$gen_version crds.sh:$SCRIPT_SUM"
    if [[ -f "$OUT/$name/cluster.karmada.io_clusters.yaml" && -f "$OUT/$name-cluster.version" \
        && "$(cat "$OUT/$name-cluster.version")" == "$stamp" ]]; then
        log "$name Cluster CRD: cached (controller-gen@$gen_version)"
        return 0
    fi
    # The pinned release's generator is controller-gen; another version is controller-gen-<v>,
    # so two releases never rebuild each other's.
    gen="controller-gen"
    if [[ "$tools" != "$ROOT/hack/tools" ]]; then
        local pinned_dir pinned_gen
        pinned_dir="$(module_dir "github.com/karmada-io/karmada@$(module_version "$ROOT/hack/tools" \
            github.com/karmada-io/karmada)")"
        pinned_gen="$(sed -n 's/^CONTROLLER_GEN_VER="\(v[^"]*\)"$/\1/p' \
            "$pinned_dir/hack/update-crdgen.sh")"
        [[ "$gen_version" == "$pinned_gen" ]] || gen="controller-gen-$gen_version"
    fi
    if [[ ! -x "$CACHE/$gen" || "$(cat "$CACHE/$gen.version" 2>/dev/null)" \
        != "sigs.k8s.io/controller-tools/cmd/controller-gen@$gen_version" ]]; then
        log "$gen: building $gen_version"
        GOBIN="$CACHE/.$gen.$$" CGO_ENABLED=0 \
            go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$gen_version"
        mv -f "$CACHE/.$gen.$$/controller-gen" "$CACHE/$gen"
        rmdir "$CACHE/.$gen.$$"
        printf '%s\n' "sigs.k8s.io/controller-tools/cmd/controller-gen@$gen_version" \
            > "$CACHE/$gen.version"
    fi
    tmp="$(mktemp -d "$OUT/.$name-cluster.XXXXXX")"
    (cd "$tools" && "$CACHE/$gen" crd \
        paths=github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1 output:crd:dir="$tmp")
    [[ -f "$tmp/cluster.karmada.io_clusters.yaml" ]] || die "controller-gen wrote no Cluster CRD"
    mv -f "$tmp/cluster.karmada.io_clusters.yaml" "$OUT/$name/"
    rm -rf "$tmp"
    printf '%s\n' "$stamp" > "$OUT/$name-cluster.version"
    log "$name Cluster CRD: generated with controller-gen@$gen_version"
}

# Each other Karmada release (hack/karmada-*/go.mod): its CRDs into karmada-<version>/.
fetch_karmada_releases() {
    local generate="$1" dir version
    for dir in "$ROOT"/hack/karmada-*/; do
        [[ -f "$dir/go.mod" ]] || continue
        dir="${dir%/}"
        version="$(module_version "$dir" github.com/karmada-io/karmada)"
        [[ -n "$version" ]] || die "cannot read the pinned Karmada version from $dir/go.mod"
        fetch "karmada-$version" github.com/karmada-io/karmada "$version" \
            'charts/karmada/_crds/bases/*/*.yaml'
        if [[ $generate == 1 ]]; then generate_karmada_cluster "karmada-$version" "$dir"; fi
    done
}

main() {
    local generate=1
    if [[ "${1:-}" == "--no-generate" ]]; then generate=0; shift; fi
    SELECTED=("$@")
    mkdir -p "$OUT"
    fetch karmada github.com/karmada-io/karmada \
        "$(module_version "$ROOT/hack/tools" github.com/karmada-io/karmada)" \
        'charts/karmada/_crds/bases/*/*.yaml'
    if [[ $generate == 1 ]]; then generate_karmada_cluster karmada "$ROOT/hack/tools"; fi
    fetch_karmada_releases "$generate"
    local karpenter
    karpenter="$(module_version "$ROOT/hack/karpenter" sigs.k8s.io/karpenter)"
    fetch karpenter sigs.k8s.io/karpenter "$karpenter" 'pkg/apis/crds/*.yaml'
    fetch karpenter-kwok sigs.k8s.io/karpenter "$karpenter" \
        'kwok/charts/crds/*.yaml' 'kwok/apis/crds/*.yaml'
    fetch_kwok
    fetch_ocm
    fetch liqo github.com/liqotech/liqo "$LIQO_VERSION" \
        'deployments/liqo/charts/liqo-crds/crds/*.yaml'
}

case "${1:-}" in
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
esac
main "$@"
