#!/bin/sh
# Create the base image `debian:bookworm` locally when the Docker daemon does not have it
# (no Docker Hub here): debootstrap a minimal Debian 12 root file system into a temporary
# directory and `docker import` it. Needs root, debootstrap and a reachable Debian mirror.
#
#   ci/make-base-image.sh            # no-op when debian:bookworm already exists
#   ci/make-base-image.sh --force    # rebuild it
#
# Environment:
#   BASE_IMAGE     image name to create            (default: debian:bookworm)
#   DEBIAN_MIRROR  mirror for debootstrap and apt  (default: http://deb.debian.org/debian)
#   DEBIAN_SECURITY_MIRROR                         (default: http://deb.debian.org/debian-security)
#   WORKDIR        where the root file system is assembled (default: a mktemp -d dir)
set -eu

BASE_IMAGE=${BASE_IMAGE:-debian:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
SUITE=bookworm

force=0
[ "${1:-}" = "--force" ] && force=1

if ! docker info >/dev/null 2>&1; then
    echo "make-base-image: no Docker daemon reachable (docker info failed)" >&2
    exit 2
fi
# One at a time (parallel test workers may all find the image missing); check again after.
if command -v flock >/dev/null 2>&1; then
    exec 8>"${TMPDIR:-/tmp}/swbuild-make-base-image.lock"
    flock 8
fi
if [ "$force" = 0 ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    echo "make-base-image: $BASE_IMAGE already present"
    exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
    echo "make-base-image: debootstrap not found (apt-get install -y debootstrap)" >&2
    exit 2
fi
if [ "$(id -u)" != 0 ]; then
    echo "make-base-image: debootstrap needs root" >&2
    exit 2
fi

own_workdir=0
if [ -z "${WORKDIR:-}" ]; then
    WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/swbuild-rootfs.XXXXXX")
    own_workdir=1
fi
rootfs="$WORKDIR/rootfs"
cleanup() {
    # debootstrap may leave proc/sys mounted inside the chroot when it fails half-way
    for m in proc sys dev/pts dev; do
        umount "$rootfs/$m" 2>/dev/null || true
    done
    if [ "$own_workdir" = 1 ]; then rm -rf "$WORKDIR"; fi
}
trap cleanup EXIT INT TERM

start=$(date +%s)
echo "make-base-image: debootstrap $SUITE into $rootfs ($DEBIAN_MIRROR)"
debootstrap --variant=minbase "$SUITE" "$rootfs" "$DEBIAN_MIRROR" >"$WORKDIR/debootstrap.log" 2>&1 || {
    tail -n 30 "$WORKDIR/debootstrap.log" >&2
    [ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
    exit 1
}

# Same apt sources as the official image: main + updates + security (deb822 format).
rm -f "$rootfs/etc/apt/sources.list"
cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $DEBIAN_MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $DEBIAN_SECURITY_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# Container hygiene as in the official image: no recommends, no cached .debs, no lists.
cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
cat >"$rootfs/etc/apt/apt.conf.d/docker-no-recommends" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/archives/"*.deb \
       "$rootfs/debootstrap" "$rootfs/var/log/"*.log 2>/dev/null || true
: >"$rootfs/etc/hostname"
: >"$rootfs/etc/resolv.conf"

echo "make-base-image: importing as $BASE_IMAGE"
tar --numeric-owner -C "$rootfs" -c . | docker import \
    --change 'CMD ["bash"]' \
    --change 'ENV LANG=C.UTF-8' \
    --message "debootstrap --variant=minbase $SUITE $DEBIAN_MIRROR" \
    - "$BASE_IMAGE" >/dev/null
end=$(date +%s)
echo "make-base-image: $BASE_IMAGE created in $((end - start)) s ($(docker image inspect -f '{{.Size}}' "$BASE_IMAGE") bytes)"
