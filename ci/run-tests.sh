#!/bin/sh
# Run swbuild's test suite inside the CI image, against the swbuild installed in the image.
#
#   ci/run-tests.sh [-i IMAGE] [--build] [--sources] [-e NAME=VALUE]... [PYTEST ARGS...]
#
# The checkout is mounted read-only and copied to /tmp/work in the container (without build/
# and .git); nothing is written to the checkout. Runs as the invoking uid:gid. The tests run
# through the `pytest` script of /opt/swbuild, which does not put the working directory on
# sys.path, so `import swbuild` is the installed package (printed first); the sources are
# there only for tests that read files of the checkout by path.
# Default pytest arguments: -m "not docker" -q   (the container tests need a Docker daemon,
# which the container does not have).
#
#   -i, --image IMAGE   image (default: $SWBUILD_IMAGE or swbuild-ci:latest)
#   --build             build the image first (ci/build-image.sh -t IMAGE)
#   --sources           test the checkout's swbuild/ (PYTHONPATH=/tmp/work) in the image's
#                       environment instead of the installed package
#   -e NAME=VALUE       environment variable for the tests (docker run -e); repeatable.
#                       The copy of the checkout is at /tmp/work in the container.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
image=${SWBUILD_IMAGE:-swbuild-ci:latest}
build=0
envs=""
while [ $# -gt 0 ]; do
    case "$1" in
        -i|--image) image=$2; shift 2 ;;
        --build) build=1; shift ;;
        -e) envs="$envs -e $2"; shift 2 ;;
        --sources) envs="$envs -e PYTHONPATH=/tmp/work"; shift ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --) shift; break ;;
        *) break ;;
    esac
done
[ $# -eq 0 ] && set -- -m "not docker" -q

[ "$build" = 1 ] && sh "$here/build-image.sh" -t "$image"

# -t only when we have a terminal (CI has none)
tty=""
[ -t 0 ] && [ -t 1 ] && tty="-t"

# shellcheck disable=SC2086
exec docker run --rm $tty \
    --user "$(id -u):$(id -g)" $envs \
    -v "$repo:/repo:ro" \
    "$image" \
    sh -c '
        set -e
        mkdir -p /tmp/work
        tar -C /repo -c --exclude=./build --exclude=./.git \
            --exclude=__pycache__ --exclude=.pytest_cache --exclude="*.egg-info" . \
          | tar -x -C /tmp/work
        cd /tmp/work
        echo "run-tests: swbuild from $(cd / && python3 -c "import swbuild, os; print(os.path.dirname(swbuild.__file__))")"
        exec pytest -p no:cacheprovider "$@"
    ' run-tests "$@"
