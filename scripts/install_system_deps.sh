#!/usr/bin/env bash
# Debian packages the test suite needs: PostgreSQL (distributed Optuna) and Chromium (report rendering).
# Installs only what is missing; safe to run repeatedly.
set -euo pipefail
here=$(dirname "$0")
for script in install_postgres.sh install_chromium.sh; do
  if [ -f "$here/$script" ]; then bash "$here/$script"; fi
done
