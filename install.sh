#!/usr/bin/env bash
# Install heurlens into ./.venv (creates it if needed). Safe to run again.
#
# Also installs Debian's chromium (the headless browser that checks `heurlens report` pages in the
# tests) when it is missing and this runs as root with apt-get; elsewhere it says how, and that
# test is skipped. heurlens itself never needs a browser.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev]"

missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get install -y -q $missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null; }
    else
        echo "note: Debian packages missing:$missing (as root: apt-get install$missing); the tests that need them skip"
    fi
fi
echo "heurlens installed in $(pwd)/.venv"
