#!/usr/bin/env bash
# Create the peer venvs the benchmarks compare plait against (bench/.venvs/, gitignored).
#   bash bench/setup_peers.sh            # thinc 9.1.1, thinc 8.3.14 and chainer 7.8.1
#   bash bench/setup_peers.sh thinc83    # just one of them
# Each peer gets its own venv so that two thinc versions never meet in one process.
# torch is not installed here: the benchmarks run it from the plait venv (.venv), where
# `make install` puts the CPU wheel.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
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

want="${*:-thinc91 thinc83 chainer}"
for peer in $want; do
    case "$peer" in
        thinc91) make_peer thinc91 "thinc==9.1.1" numpy; check_peer thinc91 thinc ;;
        thinc83) make_peer thinc83 "thinc==8.3.14" numpy; check_peer thinc83 thinc ;;
        # chainer 7.8.1 predates numpy 2 and builds only with an older setuptools (and wheel: a
        # venv of a current python has no bdist_wheel without it).
        chainer) make_peer chainer "setuptools<70" wheel "numpy<2"
                 make_peer chainer --no-build-isolation "chainer==7.8.1"; check_peer chainer chainer ;;
        *) echo "setup_peers: unknown peer '$peer' (known: thinc91 thinc83 chainer)" >&2; exit 2 ;;
    esac
done
