#!/bin/sh
# Make a Docker daemon reachable on a Debian machine where we are root and none runs (the
# project's CI machine): install docker.io and debootstrap from Debian when missing, start
# dockerd in the background, and wait until `docker info` answers.
#
#   ci/start-dockerd.sh            # exit 0: daemon reachable; non-zero: why not, on stderr
#   ci/start-dockerd.sh --stop     # stop the daemon this script started (no-op otherwise)
#
# Environment:
#   DOCKERD_LOG              daemon log (default: /tmp/swbuild-dockerd.log)
#   DOCKERD_STORAGE_DRIVER   force a storage driver; default: overlay2, then vfs if the
#                            daemon does not come up with overlay2
#   DOCKERD_WAIT             seconds to wait for the daemon (default: 60)
#   DOCKERD_PIDFILE          where the pid of a daemon started here is kept
#                            (default: /tmp/swbuild-dockerd.pid)
set -eu

DOCKERD_LOG=${DOCKERD_LOG:-/tmp/swbuild-dockerd.log}
DOCKERD_WAIT=${DOCKERD_WAIT:-60}
DOCKERD_PIDFILE=${DOCKERD_PIDFILE:-/tmp/swbuild-dockerd.pid}
log() { echo "start-dockerd: $*" >&2; }

stop() {
    pid=$(cat "$DOCKERD_PIDFILE" 2>/dev/null || true)
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 30 ]; do sleep 1; i=$((i + 1)); done
    rm -f "$DOCKERD_PIDFILE"
}
if [ "${1:-}" = "--stop" ]; then
    stop
    exit 0
fi

if docker info >/dev/null 2>&1; then
    log "a Docker daemon is already reachable"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    log "not root: cannot install or start dockerd (ask for a Docker daemon, or run as root)"
    exit 2
fi

need=""
command -v dockerd >/dev/null 2>&1 || need="$need docker.io"
command -v debootstrap >/dev/null 2>&1 || need="$need debootstrap"
if [ -n "$need" ]; then
    command -v apt-get >/dev/null 2>&1 || { log "no apt-get to install$need"; exit 2; }
    log "installing$need from Debian"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $need ca-certificates iptables >/dev/null
fi

start() {   # $1: storage driver
    log "starting dockerd --storage-driver=$1 (log: $DOCKERD_LOG)"
    # setsid: the daemon outlives this script and is not tied to its terminal.
    setsid dockerd --storage-driver="$1" >>"$DOCKERD_LOG" 2>&1 < /dev/null &
    echo $! > "$DOCKERD_PIDFILE"
    i=0
    while [ "$i" -lt "$DOCKERD_WAIT" ]; do
        if docker info >/dev/null 2>&1; then
            log "daemon up after ${i} s (pid $(cat "$DOCKERD_PIDFILE"))"
            return 0
        fi
        sleep 1
        i=$((i + 1))
    done
    log "dockerd did not answer within $DOCKERD_WAIT s; last log lines:"
    tail -n 20 "$DOCKERD_LOG" >&2 || true
    return 1
}
if [ -n "${DOCKERD_STORAGE_DRIVER:-}" ]; then
    start "$DOCKERD_STORAGE_DRIVER"
    exit $?
fi
if start overlay2; then
    exit 0
fi
log "overlay2 did not work: retrying with vfs (slower, uses more disk)"
stop
start vfs
