"""Every Ops method of the spec page exists on Ops, NumpyOps and CupyOps with the documented signature."""
import inspect
import re
from pathlib import Path

import pytest

from plait.backends import CupyOps, NumpyOps, Ops

SPEC = Path(__file__).resolve().parents[3] / "shared" / "spec" / "thinc-backends-and-math.md"

# Methods Thinc 8.3 has beyond the spec page (the issue asks for them too).
EXTRA_METHODS = [
    "lstm_forward_training", "lstm_forward_inference", "backprop_lstm", "adam", "clip_gradient",
    "update_averages", "logloss", "position_encode", "insert_into", "sechsq", "erf", "gelu_approx",
    "backprop_gelu_approx", "backprop_sigmoid", "dsigmoid", "tile", "reshape1", "reshape2", "reshape3",
    "reshape4", "multibatch", "minibatch",
]

# Where the page's argument table disagrees with Thinc 8.3's actual signature, code written for
# Thinc wins (the table is only a documentation slip); each entry says which names are aliases.
# relu_k: the page calls the cap `k` and lists it last; Thinc's code calls it `n`, positional
# before `inplace`. plait takes both: `relu_k(X, n=6.0, inplace=False, *, k=None)`.
# clipped_linear: the page lists `inplace` second; Thinc's code has it last, after the clip bounds.
ORDER_EXCEPTIONS = {"relu_k", "backprop_relu_k", "clipped_linear"}
# The page marks some arguments keyword-only where Thinc 8.3's code also takes them positionally
# (relu/backprop_relu `inplace`, as_contig `dtype`). Every call the page allows works either way;
# plait follows the code so that positional calls written for Thinc keep working.
KEYWORD_OR_POSITIONAL = {("relu", "inplace"), ("backprop_relu", "inplace"), ("as_contig", "dtype")}


if not SPEC.exists():  # the spec lives beside the checkout (../shared), not in it
    pytest.skip(f"the spec page {SPEC} is not here", allow_module_level=True)


def _spec_sections():
    """{method name: [(arg name, keyword_only, variadic)]} parsed from the spec's argument tables."""
    text = SPEC.read_text(encoding="utf8")
    sections = {}
    for match in re.finditer(r"^### Ops\.(\S+) \{#[^}]*\}\n(.*?)(?=^#{2,4} |\Z)", text, re.S | re.M):
        name = match.group(1).replace("\\", "")
        body = match.group(2)
        args = []
        kwonly = False
        for row in re.findall(r"^\| (.+?) \|", body, re.M):
            cell = row.strip()
            if cell.startswith("_keyword-only_"):
                kwonly = True
                continue
            m = re.fullmatch(r"`(\*{0,2})(\w+)`", cell)
            if m:
                args.append((m.group(2), kwonly, bool(m.group(1))))
        sections[name] = args
    return sections


def _typed_variants(text):
    """Names of the type-specific helper methods listed under alloc/reshape/asarray."""
    return sorted(set(re.findall(r"`Ops\.((?:alloc|reshape|asarray)(?:_[fi]|\d[fi]))`", text)))


SECTIONS = _spec_sections()
TYPED = _typed_variants(SPEC.read_text(encoding="utf8")) if SPEC.exists() else []
DOCUMENTED = sorted(n for n in SECTIONS if n != "__init__")
BACKENDS = [Ops, NumpyOps, CupyOps]


def test_spec_was_parsed():
    assert SPEC.exists(), f"spec page not found at {SPEC}"
    # Guard against a silently broken parser.
    assert len(DOCUMENTED) == 67  # every "### Ops.<name>" heading but __init__
    assert {"seq2col", "reduce_max", "hash", "gather_add", "relu_k", "cblas"} <= set(DOCUMENTED)
    assert len(TYPED) == 30


@pytest.mark.parametrize("cls", BACKENDS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", DOCUMENTED + TYPED + EXTRA_METHODS + ["recurrent_lstm", "backprop_recurrent_lstm"])
def test_method_exists(cls, name):
    assert callable(getattr(cls, name, None)), f"{cls.__name__}.{name} is missing"


@pytest.mark.parametrize("name", DOCUMENTED)
def test_documented_arguments(name):
    sig = inspect.signature(getattr(Ops, name))
    params = [p for p in sig.parameters.values() if p.name != "self"]
    by_name = {p.name: p for p in params}
    documented = SECTIONS[name]
    for arg, kwonly, variadic in documented:
        assert arg in by_name, f"Ops.{name} lacks documented argument {arg!r}: {sig}"
        kind = by_name[arg].kind
        if variadic:
            assert kind is inspect.Parameter.VAR_POSITIONAL, f"Ops.{name}: {arg} should be *{arg}"
        elif kwonly and (name, arg) in KEYWORD_OR_POSITIONAL:
            assert kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, f"Ops.{name}: {arg} as in Thinc's code"
        elif kwonly:
            assert kind is inspect.Parameter.KEYWORD_ONLY, f"Ops.{name}: {arg} should be keyword-only"
        elif name not in ORDER_EXCEPTIONS:
            assert kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, f"Ops.{name}: {arg} should be positional"
    if name in ORDER_EXCEPTIONS:
        return
    # The positional arguments come in the documented order.
    positional_doc = [a for a, kw, var in documented if not kw and not var]
    positional_ours = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert positional_ours[: len(positional_doc)] == positional_doc, (name, positional_ours, positional_doc)


def test_relu_k_accepts_both_names():
    import numpy

    ops = Ops()
    X = numpy.asarray([-1.0, 2.0, 7.0], dtype="f")
    assert ops.relu_k(X, k=5.0).tolist() == [0.0, 2.0, 5.0]
    assert ops.relu_k(X, n=5.0).tolist() == [0.0, 2.0, 5.0]
    assert ops.relu_k(X, 5.0).tolist() == [0.0, 2.0, 5.0]
    assert ops.backprop_relu_k(numpy.ones(3, dtype="f"), X, k=5.0).tolist() == [0.0, 1.0, 0.0]


def test_documented_defaults():
    assert inspect.signature(Ops.alloc).parameters["dtype"].default == "float32"
    assert inspect.signature(Ops.alloc).parameters["zeros"].default is True
    assert inspect.signature(Ops.minibatch).parameters["buffer"].default == 1
    assert inspect.signature(Ops.flatten).parameters["pad"].default == 0
    assert inspect.signature(Ops.flatten).parameters["ndim_if_empty"].default == 2
    assert inspect.signature(Ops.pad).parameters["round_to"].default == 1
    assert inspect.signature(Ops.unflatten).parameters["pad"].default == 0
    assert inspect.signature(Ops.relu_k).parameters["n"].default == 6.0
    assert inspect.signature(Ops.mish).parameters["threshold"].default == 20.0
    assert inspect.signature(Ops.softmax).parameters["temperature"].default == 1.0
    assert inspect.signature(Ops.softmax).parameters["axis"].default == -1
    assert inspect.signature(Ops.to_numpy).parameters["byte_order"].default is None
    init = inspect.signature(NumpyOps.__init__).parameters
    assert init["use_blis"].kind is inspect.Parameter.KEYWORD_ONLY
    assert list(init)[:3] == ["self", "device_type", "device_id"]


def _public_methods(cls):
    return sorted(n for n in dir(cls) if not n.startswith("_") and inspect.isfunction(getattr(cls, n)))


@pytest.mark.parametrize("cls", [NumpyOps, CupyOps], ids=lambda c: c.__name__)
def test_subclass_signatures_equal_ops(cls):
    mismatched = []
    for name in _public_methods(Ops):
        if inspect.signature(getattr(cls, name)) != inspect.signature(getattr(Ops, name)):
            mismatched.append((name, str(inspect.signature(getattr(cls, name)))))
    assert not mismatched, mismatched
    # Nothing public that Ops lacks: a backend may only make existing ops faster.
    extra = sorted(set(_public_methods(cls)) - set(_public_methods(Ops)))
    assert not extra, extra


def test_signatures_match_thinc():
    """Differential: each of Thinc 8.3's Ops methods has the same parameters (names, kinds, defaults) here."""
    thinc_ops = pytest.importorskip("thinc.backends.ops")
    ThincOps = thinc_ops.Ops
    problems = []
    for name in _public_methods(ThincOps):
        ours = getattr(Ops, name, None)
        if ours is None:
            problems.append(f"missing {name}")
            continue
        theirs = inspect.signature(getattr(ThincOps, name)).parameters
        mine = inspect.signature(ours).parameters
        for pname, p in theirs.items():
            if pname not in mine:
                problems.append(f"{name}: no parameter {pname}")
                continue
            q = mine[pname]
            if q.kind != p.kind:
                problems.append(f"{name}.{pname}: kind {q.kind} != thinc {p.kind}")
            if q.default != p.default:
                problems.append(f"{name}.{pname}: default {q.default!r} != thinc {p.default!r}")
        extra = [q for q in mine if q not in theirs]
        # Extra parameters are only allowed as optional keyword-only aliases.
        for q in extra:
            param = mine[q]
            if param.kind is not inspect.Parameter.KEYWORD_ONLY or param.default is inspect.Parameter.empty:
                problems.append(f"{name}: extra required/positional parameter {q}")
    assert not problems, problems
