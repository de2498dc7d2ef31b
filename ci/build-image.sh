#!/bin/sh
# Build the swbuild CI image from this checkout (ci/Dockerfile).
#
#   ci/build-image.sh [-t TAG] [--no-wheelhouse] [--no-pin] [--site-toolchain DIR]...
#                     [--build-arg NAME=VALUE]... [-- EXTRA DOCKER BUILD ARGS]
#
# What it does:
#   1. makes the base image (debian:bookworm) locally when the daemon lacks it
#      (ci/make-base-image.sh: debootstrap + docker import);
#   2. stages a small build context (pyproject.toml, README, swbuild/, toolchains/, ci/) in
#      the cache directory, so build/ trees and .git are never sent to the daemon;
#   3. fills a wheelhouse with the host's pip (its cache makes repeated builds fast): every
#      dependency of swbuild as a wheel, pinned to the versions installed on the host when
#      the host has them (so host and container builds use the same numpy/onnx), plus the
#      build backend. The image then installs offline from it. --no-wheelhouse, or a failure
#      to fill it, makes the image install from the index instead;
#   4. docker build -f ci/Dockerfile.
#
# Options:
#   -t, --tag TAG            image tag (default: $SWBUILD_IMAGE or swbuild-ci:latest)
#   --no-wheelhouse          let pip inside the image download from the index
#   --no-pin                 do not pin dependencies to the host's installed versions
#   --site-toolchain DIR     copy DIR (e.g. /opt/sw5cc) to /opt/<basename DIR> in the image;
#                            repeatable. Combine with --build-arg SW5CC=/opt/sw5cc/bin/sw5cc
#   --build-arg NAME=VALUE   passed to docker build (SW5CC, SWGCC, SWBUILD_EXTRAS, ...)
#   --no-cache               passed to docker build
# Environment:
#   PYTHON               host interpreter for the wheelhouse (default: python3)
#   SWBUILD_CI_CACHE     cache directory (default: ${XDG_CACHE_HOME:-~/.cache}/swbuild-ci)
#   SWBUILD_CI_CA_CERTS  PEM file(s), space separated, of extra CA certificates the builder
#                        stage trusts when pip must reach the index through a TLS-intercepting
#                        proxy. Default when downloading in the image: the host's local CAs,
#                        /usr/local/share/ca-certificates/*.crt. Not kept in the final image.
#   BASE_IMAGE           base image (default debian:bookworm)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
PYTHON=${PYTHON:-python3}
BASE_IMAGE=${BASE_IMAGE:-debian:bookworm}
cache=${SWBUILD_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/swbuild-ci}
tag=${SWBUILD_IMAGE:-swbuild-ci:latest}
wheelhouse=1
pin=1
site_dirs=""
set --  "$@" --end-of-options-marker--
extra=""
while [ "$1" != "--end-of-options-marker--" ]; do
    case "$1" in
        -t|--tag) tag=$2; shift 2 ;;
        --no-wheelhouse) wheelhouse=0; shift ;;
        --no-pin) pin=0; shift ;;
        --site-toolchain) site_dirs="$site_dirs $2"; shift 2 ;;
        --build-arg) set -- "$@" --build-arg "$2"; shift 2 ;;
        --no-cache) set -- "$@" --no-cache; shift ;;
        --) shift
            while [ "$1" != "--end-of-options-marker--" ]; do set -- "$@" "$1"; shift; done ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-image: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
shift   # the marker; "$@" now holds the docker build arguments collected above

log() { echo "build-image: $*" >&2; }
now() { date +%s; }
t0=$(now)

if ! docker info >/dev/null 2>&1; then
    log "no Docker daemon reachable (docker info failed)"
    exit 2
fi

# 1. base image -------------------------------------------------------------------------------
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    if [ "$BASE_IMAGE" = "debian:bookworm" ]; then
        log "$BASE_IMAGE missing: creating it with ci/make-base-image.sh"
        sh "$here/make-base-image.sh"
    else
        log "pulling $BASE_IMAGE"
        docker pull "$BASE_IMAGE"
    fi
fi
t1=$(now)

# 2. build context ----------------------------------------------------------------------------
ctx="$cache/context"
mkdir -p "$ctx"
# One build at a time per cache directory (the context is shared).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/lock"
    flock 9
fi
# Keep ci/wheelhouse between runs; refresh everything else.
find "$ctx" -mindepth 1 -maxdepth 1 ! -name ci -exec rm -rf {} +
[ -d "$ctx/ci" ] && find "$ctx/ci" -mindepth 1 -maxdepth 1 ! -name wheelhouse -exec rm -rf {} +
(
    cd "$repo"
    set -- pyproject.toml swbuild toolchains ci
    for f in README.md LICENSE setup.py setup.cfg MANIFEST.in; do [ -e "$f" ] && set -- "$@" "$f"; done
    tar -c --exclude=__pycache__ --exclude='*.pyc' --exclude='*.egg-info' \
        --exclude=ci/wheelhouse "$@"
) | tar -x -C "$ctx"
if [ -n "$site_dirs" ]; then
    mkdir -p "$ctx/site-toolchains"
    for d in $site_dirs; do
        [ -d "$d" ] || { log "--site-toolchain $d: not a directory"; exit 2; }
        log "adding site toolchain $d as /opt/$(basename "$d")"
        cp -a "$d" "$ctx/site-toolchains/$(basename "$d")"
    done
    set -- "$@" --build-arg SITE_TOOLCHAINS=site-toolchains
fi

# 3. wheelhouse -------------------------------------------------------------------------------
wh="$ctx/ci/wheelhouse"
use_wheels=0
if [ "$wheelhouse" = 1 ]; then
    mkdir -p "$wh"
    rm -f "$wh/constraints.txt" "$wh"/swbuild-*.whl
    extras=$(sed -n 's/^ *test *= *\[.*/test/p' "$repo/pyproject.toml" | head -n 1)
    for a in "$@"; do case "$a" in SWBUILD_EXTRAS=*) extras=${a#SWBUILD_EXTRAS=} ;; esac; done
    extras=$(echo "$extras" | tr ' ' ',')
    if [ "$pin" = 1 ]; then
        # name==version of every distribution the host has, swbuild itself excluded:
        # constraints only bite on what swbuild needs.
        "$PYTHON" -m pip freeze 2>/dev/null \
            | grep -E '^[A-Za-z0-9_.-]+==[^ ]+$' | grep -v -i -E '^swbuild==' \
            > "$wh/constraints.in" || true
    fi
    log "filling the wheelhouse with $PYTHON -m pip wheel (pip cache: $("$PYTHON" -m pip cache dir 2>/dev/null || echo off))"
    # pip builds a local project in place: give it a throwaway copy, not the checkout.
    pkgsrc="$cache/pkgsrc"
    rm -rf "$pkgsrc" && mkdir -p "$pkgsrc"
    (cd "$ctx" && tar -c --exclude=ci .) | tar -x -C "$pkgsrc"
    fill() {
        "$PYTHON" -m pip wheel --quiet --wheel-dir "$wh" --find-links "$wh" "$@" \
            "$pkgsrc${extras:+[$extras]}" "setuptools>=77" wheel
    }
    if { [ -s "$wh/constraints.in" ] && fill -c "$wh/constraints.in" && cp "$wh/constraints.in" "$wh/constraints.txt"; } \
       || fill; then
        rm -f "$wh"/swbuild-*.whl
        use_wheels=1
        log "wheelhouse: $(ls "$wh"/*.whl | wc -l) wheels$( [ -f "$wh/constraints.txt" ] && echo ', pinned to the host versions')"
    else
        log "could not fill the wheelhouse: the image will install from the index"
        rm -rf "$wh"
    fi
    rm -f "$wh/constraints.in"
    rm -rf "$pkgsrc"
else
    rm -rf "$wh"
fi
t2=$(now)

# Extra CA certificates, needed only when pip in the image goes to the index.
if [ "$use_wheels" = 0 ]; then
    certs=${SWBUILD_CI_CA_CERTS:-$(ls /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)}
    if [ -n "$certs" ]; then
        log "builder stage trusts extra CA certificates: $certs"
        # shellcheck disable=SC2086
        set -- "$@" --build-arg "EXTRA_CA_CERTS=$(cat $certs)"
    fi
fi

# 4. docker build -----------------------------------------------------------------------------
log "docker build -t $tag -f ci/Dockerfile $ctx"
docker build --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$tag" -f "$ctx/ci/Dockerfile" "$@" "$ctx"
t3=$(now)
log "done: $tag; base image $((t1 - t0)) s, context+wheelhouse $((t2 - t1)) s, docker build $((t3 - t2)) s, total $((t3 - t0)) s"
