#!/usr/bin/env bash
# Create the peer venvs the benchmarks compare plait against (bench/.venvs/, gitignored).
#   bash bench/setup_peers.sh            # thinc 9.1.1, thinc 8.3.14 and chainer 7.8.1
#   bash bench/setup_peers.sh thinc83    # just one of them
#   bash bench/setup_peers.sh spacy      # spaCy 3.8 (with its thinc 8.3.14) and this checkout's plait
# Each peer gets its own venv so that two thinc versions never meet in one process.
# torch is not installed here: the benchmarks run it from the plait venv (.venv), where
# `make install` puts the CPU wheel.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PYTHON="${PYTHON:-python3}"
VENVS="$HERE/.venvs"
mkdir -p "$VENVS"

make_peer() {
    local name="$1"; shift
    local venv="$VENVS/$name"
    if [ ! -x "$venv/bin/python" ]; then
        echo "setup_peers: creating $venv"
        "$PYTHON" -m venv "$venv"
        "$venv/bin/python" -m pip install --quiet --upgrade pip
    fi
    echo "setup_peers: installing $* into $name"
    "$venv/bin/python" -m pip install --quiet "$@"
}

check_peer() {
    local name="$1" module="$2"
    "$VENVS/$name/bin/python" -c "import $module, numpy; print('setup_peers: $name ok: $module', $module.__version__, 'numpy', numpy.__version__)"
}

# spaCy's venv also serves plait from this checkout, built by `make install` (the compiled
# modules are shared, so the venv takes the same python and numpy as .venv). plait is linked in,
# not installed: `pip install -e .` there would rebuild the checkout's extensions against that
# venv's numpy. The alias hook (plait-aliases.pth) makes PLAIT_AS_THINC=1 work for its `spacy`;
# site reads .pth files in name order, so the checkout's path (plait-0-checkout.pth) comes first.
make_spacy_peer() {
    local numpy_pin="numpy>=2,<3"
    if [ -x "$REPO/.venv/bin/python" ]; then
        numpy_pin="numpy==$("$REPO/.venv/bin/python" -c 'import numpy; print(numpy.__version__)')"
    fi
    make_peer spacy "spacy>=3.8,<3.9" "thinc==8.3.14" "$numpy_pin" \
        "scipy>=1.11" "threadpoolctl>=3.1" "scipy-openblas32>=0.3.34" "tqdm>=4.60" "cymem>=2.0.2,<2.1.0"
    local site
    site="$("$VENVS/spacy/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    mkdir -p "$VENVS/spacy/plait-checkout"
    ln -sfn "$REPO/plait" "$VENVS/spacy/plait-checkout/plait"
    echo "$VENVS/spacy/plait-checkout" > "$site/plait-0-checkout.pth"
    cp "$REPO/plait-aliases.pth" "$site/"
    "$VENVS/spacy/bin/python" -c "import spacy, thinc, plait.thinc_alias; print('setup_peers: spacy ok: spacy', spacy.__version__, 'thinc', thinc.__version__, 'plait from', plait.__path__[0])"
}

want="${*:-thinc91 thinc83 chainer}"
for peer in $want; do
    case "$peer" in
        thinc91) make_peer thinc91 "thinc==9.1.1" numpy; check_peer thinc91 thinc ;;
        thinc83) make_peer thinc83 "thinc==8.3.14" numpy; check_peer thinc83 thinc ;;
        # chainer 7.8.1 predates numpy 2 and builds only with an older setuptools (and wheel: a
        # venv of a current python has no bdist_wheel without it).
        chainer) make_peer chainer "setuptools<70" wheel "numpy<2"
                 make_peer chainer --no-build-isolation "chainer==7.8.1"; check_peer chainer chainer ;;
        spacy) make_spacy_peer ;;
        *) echo "setup_peers: unknown peer '$peer' (known: thinc91 thinc83 chainer spacy)" >&2; exit 2 ;;
    esac
done
