#!/usr/bin/env bash
# Runs two commands at the same time and fails if either fails: `bash scripts/beside.sh 'CMD1' 'CMD2'`. The first
# writes to this terminal as it goes; the second's output is kept in a file and printed once both ended, so the two
# runs' lines never interleave. `make test-rest RAY_BESIDE=1` runs with it the Ray tests that join the session's
# shared cluster beside the tests that start no Ray (each in its own loopback-only namespace, `scripts/isolated.sh`).
#
# The second starts first, with BESIDE_READY_FILE naming a file it may write once its own start-up is over (the Ray
# tests write it when the shared cluster is up: a Ray node started beside another run's training can miss Ray's
# fixed start-up deadlines on 2 cores). The first starts when that file exists, when the second ended, or after
# BESIDE_WAIT_S seconds (default 300), whichever comes first; BESIDE_WAIT_S=0 starts both at once.
set -uo pipefail
if [ "$#" -ne 2 ]; then
  echo "usage: bash scripts/beside.sh 'COMMAND 1' 'COMMAND 2' (got $# arguments)" >&2
  exit 2
fi
wait_s=${BESIDE_WAIT_S:-300}
if ! [[ "$wait_s" =~ ^[0-9]+$ ]]; then
  echo "beside.sh: BESIDE_WAIT_S must be a whole number of seconds, got '$wait_s'" >&2
  exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/beside.XXXXXX")
log="$work/second.log"
ready="$work/ready"
trap 'rm -rf "$work"' EXIT
BESIDE_READY_FILE="$ready" bash -c "$2" >"$log" 2>&1 &
second=$!
trap 'kill -TERM "$second" 2>/dev/null; rm -rf "$work"' INT TERM
waited=0
while [ "$waited" -lt "$wait_s" ] && [ ! -e "$ready" ] && kill -0 "$second" 2>/dev/null; do
  sleep 1
  waited=$((waited + 1))
done
echo "---- beside.sh: the first command starts after ${waited} s ($([ -e "$ready" ] && echo "the second is ready" || echo "no ready file"))"
bash -c "$1"
first_rc=$?
wait "$second"
second_rc=$?
echo "---- beside it: $2 (exit $second_rc)"
cat "$log"
echo "---- exits: $first_rc (first), $second_rc (second)"
[ "$first_rc" -eq 0 ] && [ "$second_rc" -eq 0 ]
