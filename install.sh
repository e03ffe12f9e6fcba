#!/usr/bin/env bash
# Install heurlens into ./.venv (creates it if needed). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev]"
echo "heurlens installed in $(pwd)/.venv"
