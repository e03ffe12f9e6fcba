#!/usr/bin/env bash
# Install heurlens into ./.venv (creates it if needed). Safe to run again.
#
# Also installs Debian's chromium (the headless browser that checks `heurlens report` pages in the
# tests), dataset-fashion-mnist (the images of `heurlens shape-bias`) and wordnet-base (WordNet, for
# the 16-class ImageNet mapping) when they are missing and
# this runs as root with apt-get; elsewhere it says how, and the tests that need them are skipped.
# heurlens itself never needs a browser; without Fashion-MNIST only `shape-bias` stops, saying how
# to install it or where to point $HEURLENS_FASHION_MNIST.
set -euo pipefail
cd "$(dirname "$0")"
# PYTHON: the interpreter the environment is made with; VENV: where (CI makes one per Python it tests)
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e ".[dev,ray,vision,docs]"

missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
# Fashion-MNIST (MIT licence) for the offline shape-bias experiment and its tests
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || missing="$missing dataset-fashion-mnist"
# WordNet 3.0, for the 16-class ImageNet mapping (heurlens.vision.geirhos16)
[ -f /usr/share/wordnet/data.noun ] || missing="$missing wordnet-base"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get install -y -q $missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null; }
    else
        echo "note: Debian packages missing:$missing (as root: apt-get install$missing); the tests that need them skip"
    fi
fi
echo "heurlens installed in $(pwd)/$VENV ($("$VENV/bin/python" --version))"
