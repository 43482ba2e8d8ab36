"""The links of test_links_more against the real Chainer (7.8.1, in its own interpreter).

plait saves each link with save_npz; the peer loads the file into the same Chainer link
(so Chainer's key names are checked too), runs it on the same inputs and writes outputs.
Skips when $PLAIT_CHAINER_PYTHON (default: bench/.venvs/chainer/bin/python, which
`bash bench/setup_peers.sh chainer` creates) cannot import chainer.
"""
import subprocess
import textwrap

import numpy
import pytest

from plait.chainer import serializers
from plait.chainer.links.activation.prelu import PReLU
from plait.chainer.links.connection.bilinear import Bilinear
from plait.chainer.links.connection.embed_id import EmbedID
from plait.chainer.links.connection.gru import GRU, StatefulGRU
from plait.chainer.links.connection.lstm import LSTM
from plait.chainer.links.activation.maxout import Maxout
from plait.chainer.links.normalization.batch_normalization import BatchNormalization

from _env import CHAINER_PEER as PEER, chainer_peer_available as _peer_available  # noqa: E402


pytestmark = pytest.mark.skipif(not _peer_available(), reason=f"no Python with chainer at {PEER}")

_PEER = """
import sys, numpy as np, chainer, chainer.links as L
from chainer import serializers
d = sys.argv[1]
x = np.load(d + '/inputs.npz')
out = {}
def load(name, link):
    serializers.load_npz(d + '/' + name + '.npz', link)
    return link
with chainer.using_config('train', True):
    out['embed'] = load('embed', L.EmbedID(7, 3, ignore_label=-1))(x['ids']).array
    out['maxout'] = load('maxout', L.Maxout(4, 2, 3))(x['x4']).array
    out['prelu'] = load('prelu', L.PReLU((4,)))(x['x4']).array
    bn = load('bn', L.BatchNormalization(4, eps=1e-5, initial_avg_var=0))
    bn.avg_mean[...] = 0; bn.avg_var[...] = 0
    out['bn_train'] = bn(x['x4']).array
    out['bn_avg_mean'] = bn.avg_mean; out['bn_avg_var'] = bn.avg_var
    lstm = load('lstm', L.LSTM(4, 2))
    out['lstm0'] = lstm(x['x4']).array
    out['lstm1'] = lstm(x['x4b']).array
    out['lstm_c'] = lstm.c.array
    out['gru'] = load('gru', L.StatelessGRU(4, 2))(x['h2'], x['x4']).array
    sgru = load('sgru', L.StatefulGRU(4, 2))
    sgru(x['x4'])
    out['sgru'] = sgru(x['x4b']).array
    out['bilinear'] = load('bilinear', L.Bilinear(4, 2, 3))(x['x4'], x['h2']).array
with chainer.using_config('train', False):
    bn = load('bn_test', L.BatchNormalization(4, eps=1e-5))
    out['bn_test'] = bn(x['x4']).array
np.savez(d + '/outputs.npz', **out)
"""


def test_links_match_chainer(tmp_path):
    numpy.random.seed(20)
    r = numpy.random.RandomState(21)
    inputs = {
        "ids": numpy.array([[0, 6], [-1, 3]], numpy.int32),
        "x4": r.randn(5, 4).astype(numpy.float32),
        "x4b": r.randn(5, 4).astype(numpy.float32),
        "h2": r.randn(5, 2).astype(numpy.float32),
    }
    numpy.savez(str(tmp_path / "inputs.npz"), **inputs)
    links = {
        "embed": EmbedID(7, 3, ignore_label=-1), "maxout": Maxout(4, 2, 3, initial_bias=0.3),
        "prelu": PReLU((4,)), "bn": BatchNormalization(4), "lstm": LSTM(4, 2), "gru": GRU(2, 4),
        "sgru": StatefulGRU(4, 2), "bilinear": Bilinear(4, 2, 3), "bn_test": BatchNormalization(4),
    }
    links["prelu"].W.data[...] = [0.1, -0.3, 0.5, 2.0]
    links["bn"].gamma.data[...] = r.uniform(0.5, 2, 4)
    links["bn"].beta.data[...] = r.randn(4)
    links["bn_test"].copyparams(links["bn"])
    links["bn_test"].avg_mean[...] = r.randn(4)
    links["bn_test"].avg_var[...] = r.uniform(0.5, 2, 4)
    for name, link in links.items():
        serializers.save_npz(str(tmp_path / f"{name}.npz"), link)
    proc = subprocess.run([PEER, "-c", textwrap.dedent(_PEER), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"the chainer peer failed:\n{proc.stdout}\n{proc.stderr}"
    x4, x4b, h2 = inputs["x4"], inputs["x4b"], inputs["h2"]
    ours = {
        "embed": links["embed"](inputs["ids"]).data,
        "maxout": links["maxout"](x4).data,
        "prelu": links["prelu"](x4).data,
        "bn_train": links["bn"](x4).data,
        "bn_avg_mean": links["bn"].avg_mean, "bn_avg_var": links["bn"].avg_var,
        "lstm0": links["lstm"](x4).data, "lstm1": links["lstm"](x4b).data, "lstm_c": links["lstm"].c.data,
        "gru": links["gru"](h2, x4).data,
        "bilinear": links["bilinear"](x4, h2).data,
        "bn_test": links["bn_test"](x4, test=True).data,
    }
    links["sgru"](x4)
    ours["sgru"] = links["sgru"](x4b).data
    with numpy.load(str(tmp_path / "outputs.npz")) as theirs:
        assert sorted(theirs.files) == sorted(ours)
        for key, value in ours.items():
            numpy.testing.assert_allclose(value, theirs[key], rtol=1e-5, atol=1e-5, err_msg=key)
