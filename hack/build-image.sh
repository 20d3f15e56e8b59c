#!/usr/bin/env bash
# Build the carbonshift image on a machine with no Docker engine and no container registry,
# and run it.
#
#   hack/build-image.sh [build]   (make image) the base, then the image
#   hack/build-image.sh run --certs DIR --config FILE [--port N] [--host ADDR] [ARGS...]
#                                 run the image in the foreground: its entrypoint, as its
#                                 user (65532), on a read-only root filesystem, with DIR and
#                                 FILE mounted read-only where its CMD expects them
#   hack/build-image.sh size      the image's size in bytes
#
# The base: Debian bookworm (minbase + python3, python3-venv, ca-certificates) from
# Debian's own packages with mmdebstrap, imported with buildah as $BASE_IMAGE; rebuilt
# only when this script's package list changes. The image: the repository's Dockerfile,
# built by buildah (chroot isolation) with BASE=$BASE_IMAGE, tagged $IMAGE.
# Missing tools (buildah, podman, mmdebstrap) are installed with apt-get as root.
#
# `run` tries `podman run --read-only --user 65532`; when no container can be started here
# it runs the image's root filesystem instead: a read-only bind mount of it, entered with
# unshare (mount and PID namespaces) + chroot + setpriv (uid/gid 65532, no capabilities,
# no_new_privs), with the image's own entrypoint, environment and working directory. It
# prints which one it used on stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(awk -F'"' '/^__version__/ {print $2}' "$ROOT/webhook/__init__.py")"
IMAGE="${IMAGE:-localhost/carbonshift:${VERSION:-dev}}"
BASE_IMAGE="${BASE_IMAGE:-localhost/carbonshift-base:bookworm}"
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=python3,python3-venv,ca-certificates
WORK="${CARBONSHIFT_IMAGE_WORK:-$ROOT/.cache/image}"

# chroot isolation: RUN steps need no OCI runtime (none can start a container here).
export BUILDAH_ISOLATION=chroot

log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

need() {  # need COMMAND PACKAGE: install PACKAGE (apt) when COMMAND is missing
    command -v "$1" >/dev/null 2>&1 && return 0
    [[ $EUID -eq 0 ]] || die "$1 is missing: apt-get install $2"
    log "installing $2 (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }
}

image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# --- the base: Debian packages only ---------------------------------------------------
build_base() {
    need mmdebstrap mmdebstrap
    local stamp
    stamp="$SUITE $PACKAGES $(sed -n '/^build_base()/,/^}/p' "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)"
    if image_exists "$BASE_IMAGE" && [[ "$(buildah inspect --type image \
        --format '{{index .ImageAnnotations "io.carbonshift.base"}}' "$BASE_IMAGE")" == "$stamp" ]]; then
        log "base $BASE_IMAGE: up to date ($stamp)"
        return 0
    fi
    mkdir -p "$WORK"
    local tar="$WORK/base.tar" start=$SECONDS
    log "base: mmdebstrap $SUITE ($PACKAGES) from $MIRROR"
    # No documentation, manual pages or translations; no apt lists or caches. The merged-usr
    # hook lays out /usr as the usrmerge package would, without it and the perl it needs.
    # shellcheck disable=SC2016  # $1 is the hook's argument, expanded by mmdebstrap
    mmdebstrap --quiet --variant=minbase --include="$PACKAGES" \
        --aptopt='APT::Install-Recommends "false"' \
        --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
        --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/lintian/*' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
        "$SUITE" "$tar" "$MIRROR"
    local ctr
    ctr="$(buildah from scratch)"
    buildah add --quiet "$ctr" "$tar" / >/dev/null
    buildah config --annotation "io.carbonshift.base=$stamp" \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --cmd /bin/sh "$ctr"
    buildah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
    rm -f "$tar"
    log "base $BASE_IMAGE: built in $((SECONDS - start))s"
}

# --- the image: the Dockerfile --------------------------------------------------------
build_image() {
    need buildah buildah
    build_base
    local start=$SECONDS
    log "image $IMAGE: buildah bud -f Dockerfile --build-arg BASE=$BASE_IMAGE"
    # The trust store pip uses here, as the build secret "ca": where egress to PyPI goes
    # through a TLS-intercepting proxy, its CA is in it. Mounted for one step, never stored.
    local ca="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}" secret=()
    [[ -s "$ca" ]] && secret=(--secret "id=ca,src=$ca")
    buildah bud --quiet --isolation chroot --layers=false --pull=never "${secret[@]}" \
        --build-arg "BASE=$BASE_IMAGE" -f "$ROOT/Dockerfile" -t "$IMAGE" "$ROOT" >/dev/null
    # Only the newest build keeps the tag; drop the images it replaced.
    buildah rmi --prune >/dev/null 2>&1 || true
    log "image $IMAGE: built in $((SECONDS - start))s, $(image_size) bytes"
}

image_size() {
    need podman podman
    podman image inspect --format '{{.Size}}' "$IMAGE"
}

# --- run ------------------------------------------------------------------------------
run_image() {
    local certs="" config="" port=8443 host=0.0.0.0 extra=()
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --certs) certs="$(realpath "$2")"; shift 2 ;;
            --config) config="$(realpath "$2")"; shift 2 ;;
            --port) port="$2"; shift 2 ;;
            --host) host="$2"; shift 2 ;;
            *) extra+=("$1"); shift ;;
        esac
    done
    [[ -d "$certs" && -f "$config" ]] || die "usage: hack/build-image.sh run --certs DIR --config FILE [--port N]"
    image_exists "$IMAGE" || die "no image $IMAGE: run hack/build-image.sh (make image)"
    # The image's CMD with the address and port added (the host's network is shared).
    local cmd=(serve --config /etc/carbonshift/config.yaml --cert-dir /etc/carbonshift/certs
               --host "$host" --port "$port" "${extra[@]}")
    if [[ "${CARBONSHIFT_IMAGE_RUNNER:-}" != chroot ]] && command -v podman >/dev/null \
        && podman run --rm --read-only --network=host --cgroups=disabled "$IMAGE" --help >/dev/null 2>&1; then
        log "runner: podman run --read-only (user and entrypoint from the image)"
        exec podman run --rm --read-only --network=host --cgroups=disabled \
            --name "carbonshift-$port" \
            -v "$certs:/etc/carbonshift/certs:ro" -v "$config:/etc/carbonshift/config.yaml:ro" \
            --tmpfs /tmp:size=16m "$IMAGE" "${cmd[@]}"
    fi
    run_rootfs "$certs" "$config" "${cmd[@]}"
}

# run_rootfs CERTS CONFIG ARGS...: the image's root filesystem, read-only, as its user.
run_rootfs() {
    local certs="$1" config="$2"; shift 2
    [[ $EUID -eq 0 ]] || die "the chroot runner needs root (mount namespace, chroot)"
    local ctr mnt spec
    ctr="$(buildah from --pull-never --quiet "$IMAGE")"
    local root="$WORK/root.$$"  # where the private mount namespace assembles the root
    mkdir -p "$root"
    # shellcheck disable=SC2064  # the names are known now
    trap "rmdir '$root' 2>/dev/null; buildah umount '$ctr' >/dev/null 2>&1; buildah rm '$ctr' >/dev/null 2>&1 || true" EXIT
    trap 'exit 143' TERM INT
    mnt="$(buildah mount "$ctr")"
    # The mount points for the config and certificates, in this throw-away container's copy
    # of the image (the image itself is not changed).
    mkdir -p "$mnt/etc/carbonshift/certs"
    touch "$mnt/etc/carbonshift/config.yaml"
    # User, entrypoint, environment and working directory, from the image's configuration.
    spec="$WORK/run-$$.sh"
    mkdir -p "$WORK"
    buildah inspect --type image "$IMAGE" | python3 -c '
import json, shlex, sys
c = json.load(sys.stdin)["OCIv1"]["config"]
user = c.get("User") or "0"
uid, _, gid = user.partition(":")
print("RUN_UID=" + shlex.quote(uid), "RUN_GID=" + shlex.quote(gid or uid))
print("RUN_WORKDIR=" + shlex.quote(c.get("WorkingDir") or "/"))
print("RUN_ENV=(" + " ".join(shlex.quote(e) for e in c.get("Env") or []) + ")")
print("RUN_ENTRYPOINT=(" + " ".join(shlex.quote(e) for e in c.get("Entrypoint") or []) + ")")
' > "$spec"
    # shellcheck source=/dev/null
    source "$spec"; rm -f "$spec"
    log "runner: chroot + setpriv (read-only root, uid $RUN_UID gid $RUN_GID, no capabilities, entrypoint ${RUN_ENTRYPOINT[*]})"
    # A private mount and PID namespace: the root is bind-mounted read-only, with /proc,
    # /dev, a 16 MiB tmpfs /tmp and the config and certificates bound read-only. chroot
    # enters it; setpriv (the image's own, util-linux) drops to the image's user with no
    # capabilities and no_new_privs before the entrypoint runs.
    # shellcheck disable=SC2016  # the inner script expands its own arguments
    unshare --mount --pid --fork --kill-child --propagation private -- /bin/bash -euc '
        root=$1 mnt=$2 certs=$3 config=$4 uid=$5 gid=$6 workdir=$7 count=$8; shift 8
        env=("${@:1:$count}"); shift "$count"
        mount --bind "$mnt" "$root"
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        mount -t tmpfs -o size=16m,mode=1777 tmpfs "$root/tmp"
        mount --bind "$certs" "$root/etc/carbonshift/certs"
        mount --bind "$config" "$root/etc/carbonshift/config.yaml"
        for m in "$root/etc/carbonshift/certs" "$root/etc/carbonshift/config.yaml" "$root"; do
            mount -o remount,bind,ro "$m"
        done
        exec chroot "$root" /usr/bin/env -i "${env[@]}" \
            /usr/bin/setpriv --reuid="$uid" --regid="$gid" --clear-groups \
                --inh-caps=-all --bounding-set=-all --no-new-privs -- \
            /bin/sh -c "cd \"\$0\" && exec \"\$@\"" "$workdir" "$@"
    ' run "$root" "$mnt" "$certs" "$config" "$RUN_UID" "$RUN_GID" "$RUN_WORKDIR" "${#RUN_ENV[@]}" \
        "${RUN_ENV[@]}" "${RUN_ENTRYPOINT[@]}" "$@"
}

case "${1:-build}" in
    build) build_image ;;
    run) shift; run_image "$@" ;;
    size) image_size ;;
    -h|--help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' ;;
    *) die "unknown command $1 (build, run, size)" ;;
esac
