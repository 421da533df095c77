#!/usr/bin/env bash
# Runs a command in a private network namespace whose only interface is loopback, when this machine allows it
# (root with util-linux `unshare` and iproute2 `ip`). The test suite starts servers (a 2-node Ray cluster,
# PostgreSQL, Chromium's debugging port); Ray 2.60's gRPC servers listen on every interface even when told
# --node-ip-address 127.0.0.1, so the namespace is what guarantees that nothing a test starts is reachable
# from beyond this machine's loopback. Elsewhere the command runs as it is.
set -euo pipefail
if [ "${HPSEARCH_NO_NETNS:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null \
   && unshare -n true 2>/dev/null; then
  exec unshare -n sh -c 'ip link set lo up && HPSEARCH_NETNS=1 exec "$0" "$@"' "$@"
fi
exec "$@"
