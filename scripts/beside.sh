#!/usr/bin/env bash
# Runs two commands at the same time and fails if either fails: `bash scripts/beside.sh 'CMD1' 'CMD2'`. The first
# writes to this terminal as it goes; the second's output is kept in a file and printed once both ended, so the two
# runs' lines never interleave. `make test-rest RAY_BESIDE=1` runs with it the Ray tests that join the session's
# shared cluster beside the services tests that start no Ray (each in its own loopback-only namespace,
# `scripts/isolated.sh`).
set -uo pipefail
if [ "$#" -ne 2 ]; then
  echo "usage: bash scripts/beside.sh 'COMMAND 1' 'COMMAND 2' (got $# arguments)" >&2
  exit 2
fi
log=$(mktemp "${TMPDIR:-/tmp}/beside.XXXXXX")
trap 'rm -f "$log"' EXIT
bash -c "$2" >"$log" 2>&1 &
second=$!
trap 'kill -TERM "$second" 2>/dev/null; rm -f "$log"' INT TERM
bash -c "$1"
first_rc=$?
wait "$second"
second_rc=$?
echo "---- beside it: $2 (exit $second_rc)"
cat "$log"
echo "---- exits: $first_rc (first), $second_rc (second)"
[ "$first_rc" -eq 0 ] && [ "$second_rc" -eq 0 ]
