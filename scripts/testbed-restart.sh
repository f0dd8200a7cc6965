#!/usr/bin/env bash
# Restarts the built-in testbed at ADDR with WEB_WORKERS web workers, in the
# background: the `--apply` command of a scalability benchmark over the
# testbed (`autoperf capacity … --vary web_workers=1,2 --apply
# 'scripts/testbed-restart.sh 127.0.0.1:8080 {web_workers}'`). The testbed
# it started before at ADDR (its pid is kept in a file) is stopped first;
# readiness is autoperf's to wait for (`--ready URL`, or the target
# accepting connections).
#
#   scripts/testbed-restart.sh ADDR WEB_WORKERS [AUTOPERF [TESTBED FLAGS…]]
#   scripts/testbed-restart.sh ADDR stop
#
# Flags after AUTOPERF go to `autoperf testbed` as they are: Theodolite's
# own experiment varies the stream processor's instances instead,
#   --vary consumers=1,2 --apply 'scripts/testbed-restart.sh 127.0.0.1:8080 1
#     autoperf --consume input --kafka 127.0.0.1:19092 --consumer-workers {consumers}'
set -euo pipefail
addr=${1:?usage: testbed-restart.sh ADDR WEB_WORKERS|stop [AUTOPERF [FLAGS…]]}
workers=${2:?usage: testbed-restart.sh ADDR WEB_WORKERS|stop [AUTOPERF [FLAGS…]]}
autoperf=${3:-${AUTOPERF:-autoperf}}
shift $(($# < 3 ? $# : 3))
pidfile="${TMPDIR:-/tmp}/autoperf-testbed-${addr//[^0-9A-Za-z]/_}.pid"

if [[ -f $pidfile ]]; then
    pid=$(cat "$pidfile")
    if kill "$pid" 2>/dev/null; then
        # It stops its tiers (SIGTERM, SIGKILL after 3 s) before it exits.
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -f "$pidfile"
fi
[[ $workers == stop ]] && exit 0
if ! [[ $workers =~ ^[1-9][0-9]*$ ]]; then
    echo "testbed-restart.sh: WEB_WORKERS must be a positive whole number, got '$workers'" >&2
    exit 2
fi
nohup "$autoperf" testbed --listen "$addr" --web-workers "$workers" "$@" >/dev/null 2>&1 &
echo $! >"$pidfile"
