#!/bin/sh
# Build one model of a user's repository inside the CI image and export the outputs
# (generated sources, weights, lock file, plan, runner, check and report JSON, logs) to a
# host directory.
#
#   ci/build-recipe.sh [-i IMAGE] [-C REPO] [-o OUTDIR] [--no-check] [--no-report]
#                      [--exclude PATTERN]... TARGET MODEL [SCONS ARGS...]
#
#   -i, --image IMAGE  image (default: $SWBUILD_IMAGE or swbuild-ci:latest)
#   -C, --repo REPO    the repository holding SConstruct and recipes/ (default: .)
#   -o, --out OUTDIR   where the artifacts go (default: REPO/artifacts/TARGET/MODEL); it is
#                      emptied first
#   --no-check         skip `scons ... check` (and MODEL.check.json)
#   --no-report        skip `scons ... report` (and MODEL.report.json)
#   --exclude PATTERN  do not export files matching PATTERN (tar --exclude), e.g. '*.bin';
#                      repeatable. Object files (*.o) are never exported.
#
# check and report each run the model under emulation, so they work for emulated targets
# (sunway-emu, ...) only: for a real target pass --no-check --no-report. The JSON document
# each prints last is saved as MODEL.check.json / MODEL.report.json, the logs as
# MODEL.{build,check,report}.log. REPO is mounted read-only and copied into the container
# (without build/, artifacts/ and .git), so the build starts clean and the checkout is not
# touched; the container runs as the invoking uid:gid, so the artifacts belong to the
# caller. Exit status: 0 when every step passed.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
image=${SWBUILD_IMAGE:-swbuild-ci:latest}
repo=.
out=""
check=1
report=1
excludes=""
while [ $# -gt 0 ]; do
    case "$1" in
        -i|--image) image=$2; shift 2 ;;
        -C|--repo) repo=$2; shift 2 ;;
        -o|--out) out=$2; shift 2 ;;
        --no-check) check=0; shift ;;
        --no-report) report=0; shift ;;
        --exclude) excludes="$excludes --exclude=$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --) shift; break ;;
        -*) echo "build-recipe: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "usage: $0 [-i IMAGE] [-C REPO] [-o OUTDIR] [--no-check] [--no-report] [--exclude PAT]... TARGET MODEL [SCONS ARGS...]" >&2
    exit 2
fi
target=$1 model=$2
shift 2
repo=$(cd "$repo" && pwd)
[ -f "$repo/SConstruct" ] || { echo "build-recipe: no SConstruct in $repo" >&2; exit 2; }
out=${out:-$repo/artifacts/$target/$model}
mkdir -p "$out"
out=$(cd "$out" && pwd)
find "$out" -mindepth 1 -delete

start=$(date +%s)
status=0
# shellcheck disable=SC2016
docker run --rm \
    --user "$(id -u):$(id -g)" \
    -v "$repo:/repo:ro" -v "$out:/out" -v "$here/last_json.py:/opt/swbuild-ci/last_json.py:ro" \
    -e T="$target" -e M="$model" -e CHECK="$check" -e REPORT="$report" -e EXCLUDES="$excludes" \
    "$image" \
    sh -c '
        mkdir -p /tmp/work
        tar -C /repo -c --exclude=./build --exclude=./.git --exclude=./artifacts \
            --exclude=.sconsign.dblite --exclude=__pycache__ . | tar -x -C /tmp/work || exit 1
        cd /tmp/work
        rc=0
        echo "build-recipe: scons target=$T model=$M $*"
        { scons target="$T" model="$M" "$@"; echo $? > /tmp/rc; } 2>&1 | tee "/tmp/$M.build.log"
        rc=$(cat /tmp/rc)
        for s in check report; do
            [ "$rc" = 0 ] || break
            if [ "$s" = check ] && [ "$CHECK" != 1 ]; then continue; fi
            if [ "$s" = report ] && [ "$REPORT" != 1 ]; then continue; fi
            json=""; [ "$s" = report ] && json="json=1"    # report prints its table unless asked for the document
            echo "build-recipe: scons target=$T model=$M $* $json $s"
            { scons target="$T" model="$M" "$@" $json "$s"; echo $? > /tmp/rc; } 2>&1 | tee "/tmp/$M.$s.log"
            rc=$(cat /tmp/rc)
            python3 /opt/swbuild-ci/last_json.py "/tmp/$M.$s.log" > "/tmp/$M.$s.json" || rc=1
        done
        # build/T/M, or build/T/M-batch2-... when SCONS ARGS set options (the copy starts
        # clean, so there is one). Objects stay: a thin libM.a (emulated targets) names them.
        dir=$(ls -d "build/$T/$M" "build/$T/$M"-* 2>/dev/null | head -n 1)
        if [ -n "$dir" ] && [ -d "$dir" ]; then
            tar -C "$dir" -c --exclude="./.*" $EXCLUDES . | tar -x -C /out || rc=1
        fi
        for f in /tmp/"$M".*.log /tmp/"$M".*.json; do
            [ -s "$f" ] && cp "$f" /out/
        done
        exit "$rc"
    ' build-recipe "$@" || status=$?
end=$(date +%s)
echo "build-recipe: artifacts of $target/$model in $out ($((end - start)) s, status $status):"
ls -l "$out"
exit "$status"
