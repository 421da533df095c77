#!/usr/bin/env bash
# Install Debian's PostgreSQL server for the tests that run Optuna studies on a real PostgreSQL
# (tests/hpsearch/test_reliability.py starts a throw-away cluster with initdb/pg_ctl; no service is enabled).
# Idempotent: does nothing when initdb is already there. Needs root (or sudo) and the apt mirrors.
set -euo pipefail

find_initdb() {
    command -v initdb 2>/dev/null && return 0
    ls -1d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1
}

if [ -n "$(find_initdb)" ]; then
    echo "postgresql already installed: $("$(find_initdb)" --version)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends postgresql
INITDB="$(find_initdb)"
if [ -z "$INITDB" ]; then
    echo "postgresql was installed but no initdb was found under /usr/lib/postgresql/*/bin" >&2
    exit 1
fi
"$INITDB" --version
