"""Variable, Flag and Function: graph building, backprop order, accumulation, volatility, errors."""
import copy
import gc
import pickle
import sys
import weakref

import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
from plait.chainer import AUTO, OFF, ON, Flag, Function, Variable
from plait.chainer.flag import aggregate_flags


# ------------------------------------------------------------------ Flag

@pytest.mark.parametrize("spelling, flag", [
    ("on", ON), ("ON", ON), (True, ON), ("off", OFF), ("OFF", OFF), (False, OFF),
    ("auto", AUTO), ("AUTO", AUTO), (None, AUTO),
])
def test_flag_spellings_give_singletons(spelling, flag):
    assert Flag(spelling) is flag
    assert Flag(flag) is flag
    assert flag == spelling


def test_flag_truth_and_repr():
    assert bool(ON) is True and bool(OFF) is False
    with pytest.raises(ValueError, match="AUTO has no truth value"):
        bool(AUTO)
    assert repr(ON) == "ON" and str(AUTO) == "AUTO"
    assert ON != OFF and ON != "off" and not (ON == "nonsense")
    assert pickle.loads(pickle.dumps(ON)) is ON


def test_flag_rejects_unknown_values():
    with pytest.raises(ValueError, match="unknown flag value 'maybe'"):
        Flag("maybe")


def test_aggregate_flags():
    assert aggregate_flags([ON, AUTO]) is ON
    assert aggregate_flags([OFF, AUTO, "auto"]) is OFF
    assert aggregate_flags([AUTO, AUTO]) is AUTO
    assert aggregate_flags([]) is AUTO
    with pytest.raises(ValueError, match="ON and OFF flags cannot be mixed"):
        aggregate_flags([ON, OFF])


# ------------------------------------------------------------------ Variable basics

def test_variable_attributes():
    data = numpy.arange(6, dtype=numpy.float32).reshape(2, 3)
    x = Variable(data, name="x")
    assert x.data is data and x.grad is None and x.creator is None and x.rank == 0
    assert x.volatile is OFF and x.name == "x"
    assert len(x) == 6  # Chainer 1.7.2: the number of elements
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6 and x.dtype == numpy.float32
    assert x.label == "(2, 3), float32"
    assert Variable(numpy.ones((), "f")).label == "float32"
    assert "variable x" in repr(x)
    assert "mean=" in x.debug_print() and "- grad: None" in x.debug_print()


def test_variable_rejects_non_arrays():
    with pytest.raises(TypeError, match="must be a numpy.ndarray or cupy.ndarray, got builtins.list"):
        Variable([1, 2, 3])


def test_grad_setter_checks_shape_dtype_and_kind():
    x = Variable(numpy.zeros((2, 3), dtype=numpy.float32))
    with pytest.raises(ValueError, match=r"gradient has shape \(3, 2\)"):
        x.grad = numpy.zeros((3, 2), dtype=numpy.float32)
    with pytest.raises(TypeError, match="dtype float64"):
        x.grad = numpy.zeros((2, 3))
    x.grad = numpy.ones((2, 3), dtype=numpy.float32)
    x.zerograd()
    assert not x.grad.any()
    x.cleargrad()
    assert x.grad is None
    x.zerograd()
    assert x.grad.shape == (2, 3) and not x.grad.any()


def test_volatile_setter():
    x = Variable(numpy.zeros(1, "f"), volatile="on")
    assert x.volatile is ON
    x.volatile = "off"
    assert x.volatile is OFF
    with pytest.raises(ValueError):
        x.volatile = "sometimes"


# ------------------------------------------------------------------ the tutorial's examples

def test_tutorial_scalar_backward():
    x = Variable(numpy.array([5], dtype=numpy.float32))
    y = x ** 2 - 2 * x + 1
    numpy.testing.assert_array_equal(y.data, [16.0])
    y.backward()
    numpy.testing.assert_array_equal(x.grad, [8.0])


def test_tutorial_retain_grad():
    x = Variable(numpy.array([5], dtype=numpy.float32))
    z = 2 * x
    y = x ** 2 - z + 1
    y.backward(retain_grad=True)
    numpy.testing.assert_array_equal(z.grad, [-1.0])
    numpy.testing.assert_array_equal(x.grad, [8.0])


def test_intermediate_grads_are_freed_without_retain_grad():
    x = Variable(numpy.array([5], dtype=numpy.float32))
    z = 2 * x
    y = x ** 2 - z + 1
    y.backward()
    assert z.grad is None
    assert y.grad is not None  # the starting variable keeps its gradient


def test_tutorial_multi_element_needs_initial_grad():
    x = Variable(numpy.array([[1, 2, 3], [4, 5, 6]], dtype=numpy.float32))
    y = x ** 2 - 2 * x + 1
    # As in Chainer 1.7.2, a multi-element variable without grad sends None down: here the
    # elementwise functions pass it on, and nothing reaches x.
    y.backward()
    assert x.grad is None
    y.grad = numpy.ones((2, 3), dtype=numpy.float32)
    y.backward()
    numpy.testing.assert_array_equal(x.grad, [[0, 2, 4], [6, 8, 10]])


def test_scalar_loss_starts_from_one():
    x = Variable(numpy.array([1.0, 2.0, 3.0], dtype=numpy.float32))
    loss = F.sum(x * x)
    loss.backward()
    numpy.testing.assert_array_equal(loss.grad, numpy.ones((), numpy.float32))
    numpy.testing.assert_array_equal(x.grad, [2.0, 4.0, 6.0])


# ------------------------------------------------------------------ accumulation and order

def test_branches_accumulate():
    x = Variable(numpy.array([3.0], dtype=numpy.float64))
    y = x * x + x * 2 + x  # three uses of x
    y.backward()
    numpy.testing.assert_allclose(x.grad, [2 * 3.0 + 2 + 1])


def test_same_variable_twice_in_one_function():
    x = Variable(numpy.array([3.0, 4.0]))
    y = x + x  # Add returns the very same gy for both inputs
    y.grad = numpy.array([1.0, 10.0])
    y.backward()
    numpy.testing.assert_allclose(x.grad, [2.0, 20.0])
    # The shared output gradient was not modified in place by the accumulation.
    numpy.testing.assert_allclose(y.grad, [1.0, 10.0])


def test_leaf_grads_accumulate_across_backward_calls_and_zerograd_resets():
    w = Variable(numpy.array([2.0]))
    for _ in range(3):
        (w * 3.0).backward()
    numpy.testing.assert_allclose(w.grad, [9.0])
    w.zerograd()
    (w * 3.0).backward()
    numpy.testing.assert_allclose(w.grad, [3.0])


def test_accumulation_never_writes_into_user_gradients():
    x = Variable(numpy.array([1.0, 2.0]))
    y = F.identity(x)
    g = numpy.array([5.0, 5.0])
    y.grad = g
    y.backward()
    y2 = F.identity(x)
    y2.grad = numpy.array([1.0, 1.0])
    y2.backward()
    numpy.testing.assert_allclose(x.grad, [6.0, 6.0])
    numpy.testing.assert_allclose(g, [5.0, 5.0])
    x.zerograd()
    numpy.testing.assert_allclose(g, [5.0, 5.0])


def test_intermediate_grad_is_reset_by_each_backward():
    x = Variable(numpy.array([1.0]))
    h = x * 2.0
    y = h * 3.0
    y.backward(retain_grad=True)
    y.backward(retain_grad=True)
    numpy.testing.assert_allclose(h.grad, [3.0])  # replaced, not accumulated
    numpy.testing.assert_allclose(x.grad, [12.0])  # the leaf accumulates


class _Recorder(Function):
    log: list = []

    def __init__(self, name):
        self.name = name

    def forward(self, inputs):
        return tuple(x.copy() for x in inputs)

    def backward(self, inputs, grad_outputs):
        _Recorder.log.append(self.name)
        return tuple(grad_outputs)


def test_backward_runs_in_reverse_topological_order():
    # x -> a -> b -> d ; x -> c -> d (c shallow). d must come first, a last; b before a.
    _Recorder.log = []
    x = Variable(numpy.ones(2))
    a = _Recorder("a")(x)
    b = _Recorder("b")(a)
    c = _Recorder("c")(x)
    d = b + c
    d.grad = numpy.ones(2)
    d.backward()
    log = _Recorder.log
    assert sorted(log) == ["a", "b", "c"]
    assert log.index("b") < log.index("a")
    numpy.testing.assert_allclose(x.grad, [2.0, 2.0])


def test_each_function_runs_backward_once_even_with_many_outputs_used():
    calls = []

    class Split(Function):
        def forward(self, inputs):
            x, = inputs
            return x[:1].copy(), x[1:].copy()

        def backward(self, inputs, grad_outputs):
            calls.append(1)
            g0, g1 = grad_outputs
            return numpy.concatenate([g0, g1]),

    x = Variable(numpy.array([1.0, 2.0, 3.0]))
    a, b = Split()(x)
    y = F.sum(a * 2.0) + F.sum(b * 3.0)
    y.backward()
    assert len(calls) == 1
    numpy.testing.assert_allclose(x.grad, [2.0, 3.0, 3.0])


def test_unused_output_gets_none_grad():
    seen = {}

    class Two(Function):
        def forward(self, inputs):
            return inputs[0] * 2, inputs[0] * 3

        def backward(self, inputs, grad_outputs):
            seen["g"] = grad_outputs
            return grad_outputs[0] * 2,

    x = Variable(numpy.array([1.0]))
    a, _ = Two()(x)
    a.backward()
    assert seen["g"][1] is None
    numpy.testing.assert_allclose(x.grad, [2.0])


# ------------------------------------------------------------------ graph structure

def test_graph_links_and_ranks():
    x = Variable(numpy.ones(2, "f"))
    h = F.relu(x)
    y = F.sigmoid(h)
    assert h.creator.inputs == (x,) and y.creator.inputs == (h,)
    assert x.rank == 0 and h.rank == 1 and y.rank == 2
    assert h.creator.rank == 0 and y.creator.rank == 1
    assert h.creator.outputs[0]() is h
    assert h.creator.label == "ReLU"


def test_outputs_are_weak_references():
    x = Variable(numpy.ones(2, "f"))
    h = F.relu(x)
    func = h.creator
    ref = weakref.ref(h)
    del h
    gc.collect()
    assert ref() is None
    assert func.outputs[0]() is None


def test_volatile_inputs_record_no_graph():
    x = Variable(numpy.ones((2, 3), "f"), volatile="on")
    y = F.relu(x) * 2
    assert y.creator is None and y.volatile is ON
    y.backward()  # a root: nothing happens
    assert x.grad is None


def test_auto_takes_the_other_inputs_flag():
    w = Variable(numpy.ones((2, 3), "f"), volatile="auto")
    x_on = Variable(numpy.ones((2, 3), "f"), volatile="on")
    x_off = Variable(numpy.ones((2, 3), "f"))
    assert (w * x_on).volatile is ON and (w * x_on).creator is None
    y = w * x_off
    assert y.volatile is OFF and y.creator is not None
    assert (w * w).volatile is AUTO and (w * w).creator is not None


def test_mixing_on_and_off_raises():
    a = Variable(numpy.ones(2, "f"), volatile="on")
    b = Variable(numpy.ones(2, "f"), volatile="off")
    with pytest.raises(ValueError, match="cannot be mixed"):
        a + b


def test_changing_volatility_midway_stops_backprop_there():
    x = Variable(numpy.ones((2, 2), "f"), volatile="on")
    feat = F.relu(x)
    feat.volatile = "off"
    w = Variable(numpy.full((2, 2), 3.0, "f"))
    y = F.sum(feat * w)
    y.backward()
    numpy.testing.assert_allclose(w.grad, numpy.ones((2, 2)))
    numpy.testing.assert_allclose(feat.grad, numpy.full((2, 2), 3.0))
    assert x.grad is None


def test_no_backprop_mode():
    x = Variable(numpy.ones(2, "f"))
    with chainer.no_backprop_mode():
        y = F.relu(x)
        with chainer.force_backprop_mode():
            z = F.relu(x)
    assert y.creator is None and z.creator is not None
    assert F.relu(x).creator is not None


def test_unchain_backward_truncates():
    x = Variable(numpy.array([1.0]))
    h = x * 2.0
    y = h * 3.0
    y.unchain_backward()
    assert y.creator is None
    y2 = y * 4.0
    y2.backward()
    assert x.grad is None
    numpy.testing.assert_allclose(y.grad, [4.0])
    assert h.creator is None


def test_truncated_bptt_pattern():
    w = Variable(numpy.array([0.5]))
    state = Variable(numpy.array([1.0]))
    loss = 0
    for step in range(1, 7):
        state = state * w
        loss += F.sum(state)
        if step % 3 == 0:
            w.zerograd()
            loss.backward()
            loss.unchain_backward()
            assert state.creator is None
    # After truncation the second block only sees w^4..w^6 from state0 = w^3 (held fixed).
    s0 = 0.5 ** 3
    expected = s0 * (1 + 2 * 0.5 + 3 * 0.25)
    numpy.testing.assert_allclose(w.grad, [expected])


def test_addgrad_and_copydata():
    a = Variable(numpy.array([1.0, 2.0]))
    b = Variable(numpy.array([3.0, 4.0]))
    b.grad = numpy.array([1.0, 1.0])
    a.addgrad(b)
    numpy.testing.assert_allclose(a.grad, [1.0, 1.0])
    assert a.grad is not b.grad
    a.addgrad(b)
    numpy.testing.assert_allclose(a.grad, [2.0, 2.0])
    with pytest.raises(ValueError, match="source variable has no gradient"):
        a.addgrad(Variable(numpy.zeros(2)))
    a.copydata(b)
    numpy.testing.assert_allclose(a.data, [3.0, 4.0])
    assert a.data is not b.data


def test_copy_and_pickle_drop_the_graph():
    x = Variable(numpy.ones(2), name="x")
    y = x * 2.0
    y.grad = numpy.ones(2)
    c = copy.copy(y)
    # As in Chainer 1.7.2: Variable(data, volatile, name), sharing the data array.
    assert c.creator is None and c.data is y.data and c.grad is None
    assert copy.copy(x).name == "x"
    p = pickle.loads(pickle.dumps(y))
    assert p.creator is None
    numpy.testing.assert_allclose(p.data, y.data)


def test_operators_reject_unknown_operands():
    x = Variable(numpy.ones(2, "f"))
    # Chainer 1.7.2 raises ValueError for a list or tuple operand.
    with pytest.raises(ValueError, match="must be a scalar, a numpy/cupy array or a Variable"):
        x * [1, 2]
    with pytest.raises(ValueError, match="must be a scalar, a numpy/cupy array or a Variable"):
        (1.0, 2.0) - x
    with pytest.raises(Exception, match="does not broadcast to the variable's shape"):
        x + numpy.ones((3, 2), "f")


def test_scalar_operands_keep_float32():
    x = Variable(numpy.ones(3, "f"))
    for y in (x + numpy.float64(1.5), 2.0 * x, x / 3, 1 - x, x ** 2, 2 ** x, numpy.ones(3) * x):
        assert y.data.dtype == numpy.float32


def test_zero_dim_results_stay_arrays():
    x = Variable(numpy.array(2.0, dtype=numpy.float32))
    y = -(x * x + 1)
    assert isinstance(y.data, numpy.ndarray) and y.data.shape == ()
    y.backward()
    assert isinstance(x.grad, numpy.ndarray) and float(x.grad) == -4.0


# ------------------------------------------------------------------ Function protocol

class MulAdd(Function):
    def forward_cpu(self, inputs):
        x, y, z = inputs
        return x * y + z,

    def backward_cpu(self, inputs, grad_outputs):
        x, y, z = inputs
        gw, = grad_outputs
        return y * gw, x * gw, gw


class ExpAdd(Function):
    def forward(self, inputs):
        xp = chainer.cuda.get_array_module(*inputs)
        x, y = inputs
        return xp.exp(x) + xp.exp(y),

    def backward(self, inputs, grad_outputs):
        xp = chainer.cuda.get_array_module(*inputs)
        x, y = inputs
        gz, = grad_outputs
        return gz * xp.exp(x), gz * xp.exp(y)


def test_user_function_with_cpu_methods():
    rs = numpy.random.RandomState(0)
    arrays = [rs.uniform(-1, 1, (3, 2)) for _ in range(3)]
    x, y, z = (Variable(a) for a in arrays)
    w = MulAdd()(x, y, z)
    numpy.testing.assert_allclose(w.data, arrays[0] * arrays[1] + arrays[2])
    chainer.gradient_check.check_backward(MulAdd(), tuple(arrays), rs.rand(3, 2), eps=1e-6, atol=1e-7)


def test_user_function_with_unified_methods():
    rs = numpy.random.RandomState(1)
    chainer.gradient_check.check_backward(
        lambda x, y: ExpAdd()(x, y), (rs.rand(2, 2), rs.rand(2, 2)), rs.rand(2, 2), eps=1e-6, atol=1e-7
    )


def test_missing_forward_and_default_backward():
    class NoForward(Function):
        pass

    with pytest.raises(NotImplementedError, match="NoForward: forward on the CPU is not implemented"):
        NoForward()(Variable(numpy.ones(1)))

    class NonDiff(Function):
        def forward(self, inputs):
            return inputs[0] * 2,

    x = Variable(numpy.ones(1))
    y = NonDiff()(x)
    y.backward()
    assert x.grad is None


def test_forward_must_return_a_tuple():
    class Bad(Function):
        def forward(self, inputs):
            return inputs[0]

    with pytest.raises(TypeError, match=r"Bad.forward must return a tuple of arrays \(write `return y,`"):
        Bad()(Variable(numpy.ones(1)))


def test_backward_must_return_one_grad_per_input():
    class Bad(Function):
        def forward(self, inputs):
            return inputs[0] + inputs[1],

        def backward(self, inputs, grad_outputs):
            return grad_outputs[0],

    y = Bad()(Variable(numpy.ones(1)), Variable(numpy.ones(1)))
    with pytest.raises(TypeError, match=r"Bad.backward must return a tuple with one gradient \(or None\) per input \(2\), got a tuple of 1"):
        y.backward()


def test_backward_gradient_shape_is_checked():
    class Bad(Function):
        def forward(self, inputs):
            return inputs[0].sum(keepdims=True),

        def backward(self, inputs, grad_outputs):
            return grad_outputs[0],

    y = Bad()(Variable(numpy.ones(3)))
    with pytest.raises(ValueError, match=r"Bad.backward \(gradient of input 0\): the gradient has shape \(1,\)"):
        y.backward()


def test_arrays_are_accepted_as_inputs():
    W = Variable(numpy.ones((2, 3), "f"))
    y = F.linear(numpy.ones((4, 3), "f"), W)
    assert y.creator is not None
    F.sum(y).backward()
    numpy.testing.assert_allclose(W.grad, numpy.full((2, 3), 4.0))
    with pytest.raises(TypeError, match="input 0 must be a Variable or a numpy/cupy array, got str"):
        F.relu("x")


def test_function_unchain():
    x = Variable(numpy.ones(1))
    y = x * 2.0
    f = y.creator
    f.unchain()
    assert y.creator is None and f.inputs is None


def test_custom_type_check_and_utils_variable():
    from plait.chainer.utils import type_check

    class Fixed(Function):
        in_size = 4

        def check_type_forward(self, in_types):
            type_check.expect(in_types.size() == 1)
            x_type, = in_types
            type_check.expect(x_type.shape[1] == type_check.Variable(self.in_size, "in_size"))

        def forward(self, inputs):
            return inputs[0],

    with pytest.raises(type_check.InvalidType) as info:
        Fixed()(Variable(numpy.ones((2, 3))))
    assert str(info.value).endswith("Expect: in_types[0].shape[1] == in_size\nActual: 3 != 4")
    with pytest.raises(type_check.InvalidType, match="Expect: in_types.size == 1\nActual: 2 != 1"):
        Fixed()(Variable(numpy.ones((2, 4))), Variable(numpy.ones((2, 4))))


# ------------------------------------------------------------------ hooks and debug mode

class _CountHook(chainer.FunctionHook):
    name = "count"

    def __init__(self):
        self.events = []

    def forward_preprocess(self, function, in_data):
        self.events.append(("fwd_pre", function.label))

    def forward_postprocess(self, function, in_data):
        self.events.append(("fwd_post", function.label))

    def backward_preprocess(self, function, in_data, out_grad):
        self.events.append(("bwd_pre", function.label))

    def backward_postprocess(self, function, in_data, out_grad):
        self.events.append(("bwd_post", function.label))


def test_global_hooks_with_statement():
    hook = _CountHook()
    x = Variable(numpy.ones(2, "f"))
    with hook:
        y = F.relu(x)
        assert "count" in chainer.get_function_hooks()
        F.sum(y).backward()
    assert "count" not in chainer.get_function_hooks()
    F.relu(x)  # outside: not recorded
    assert hook.events == [
        ("fwd_pre", "ReLU"), ("fwd_post", "ReLU"), ("fwd_pre", "Sum"), ("fwd_post", "Sum"),
        ("bwd_pre", "Sum"), ("bwd_post", "Sum"), ("bwd_pre", "ReLU"), ("bwd_post", "ReLU"),
    ]


def test_local_hooks():
    hook = _CountHook()
    f = F.ReLU()
    f.add_hook(hook)
    assert list(f.local_function_hooks) == ["count"]
    with pytest.raises(KeyError, match="already registered"):
        f.add_hook(hook)
    f(Variable(numpy.ones(2, "f")))
    assert [e[0] for e in hook.events] == ["fwd_pre", "fwd_post"]
    f.delete_hook("count")
    with pytest.raises(KeyError, match="no hook named 'count'"):
        f.delete_hook("count")
    with pytest.raises(TypeError, match="expected a FunctionHook"):
        f.add_hook(lambda *a: None)


def test_timer_and_print_hooks():
    import io

    from plait.chainer import function_hooks

    x = Variable(numpy.ones((2, 2), "f"))
    with function_hooks.TimerHook() as timer:
        y = F.exp(F.relu(x))
    assert [f.label for f, _ in timer.call_history] == ["ReLU", "exp"]
    assert timer.total_time() >= 0
    out = io.StringIO()
    with function_hooks.PrintHook(file=out):
        F.relu(x)
    assert "function\tReLU" in out.getvalue() and "input data" in out.getvalue()
    assert y.data.shape == (2, 2)


def test_debug_mode_reports_nan():
    x = Variable(numpy.array([-1.0], dtype=numpy.float32))
    assert not chainer.is_debug()
    with chainer.DebugMode(True), numpy.errstate(all="ignore"):
        assert chainer.is_debug()
        with pytest.raises(RuntimeError, match="NaN is detected on forward computation of log"):
            F.log(x)
        y = Variable(numpy.array([0.0], dtype=numpy.float32))
        z = F.sum(y ** 0.5)
        with pytest.raises(RuntimeError, match=r"NaN is detected on backward computation of _ \*\* 0.5[\s\S]*created here"):
            (z * 0.0).backward()
    assert not chainer.is_debug()
    chainer.set_debug(True)
    chainer.set_debug(False)
    assert not chainer.is_debug()


# --- zerograd's pending zeros ---------------------------------------------------------------


def _param_and_loss(seed=0):
    rng = numpy.random.default_rng(seed)
    W = chainer.Variable(rng.standard_normal((3, 4)).astype("float32"))
    x = chainer.Variable(rng.standard_normal((2, 4)).astype("float32"))
    return W, x, (lambda: F.sum(F.linear(x, W) * F.linear(x, W)))


def test_zerograd_then_read_gives_zeros_in_the_same_array():
    W, x, loss = _param_and_loss()
    loss().backward()
    g = W.grad
    assert g.any()
    W.zerograd()
    assert W.grad is g and not g.any()


def test_zerograd_then_backward_equals_a_fresh_gradient_in_the_same_array():
    W, x, loss = _param_and_loss(1)
    loss().backward()
    fresh = W.grad.copy()
    g = W.grad
    W.zerograd()
    loss().backward()
    assert W.grad is g
    numpy.testing.assert_array_equal(W.grad, fresh)
    # A second backward without zerograd adds up.
    loss().backward()
    numpy.testing.assert_allclose(W.grad, 2 * fresh, rtol=1e-6)


def test_zerograd_pending_zeros_reach_addgrad_repr_and_backward_start():
    W, x, loss = _param_and_loss(2)
    loss().backward()
    W.zerograd()
    other = chainer.Variable(numpy.ones((3, 4), "float32"))
    other.grad = numpy.ones((3, 4), "float32")
    other.addgrad(W)  # W's pending zeros are added, not its stale values
    numpy.testing.assert_array_equal(other.grad, numpy.ones((3, 4), "float32"))
    assert "- grad: 0" in W.debug_print()
    W.zerograd()
    W.addgrad(other)
    numpy.testing.assert_array_equal(W.grad, numpy.ones((3, 4), "float32"))
    # An output whose grad was zeroed starts its backward from zeros.
    y = loss()
    y.grad = numpy.ones((), "float32")
    y.backward()
    before = W.grad.copy()
    y2 = loss()
    y2.grad = numpy.full((), 5.0, "float32")
    y2.zerograd()
    W.zerograd()
    y2.backward()
    numpy.testing.assert_array_equal(W.grad, numpy.zeros_like(before))


def test_zerograd_then_backward_turns_negative_zero_gradients_positive():
    W = chainer.Variable(numpy.ones((2,), "float32"))
    W.grad = numpy.ones((2,), "float32")
    W.zerograd()
    (F.sum(W * numpy.float32(-0.0))).backward()
    assert not numpy.signbit(W.grad).any()  # 0 + (-0.0) is +0.0, as fill(0) then += would give


def test_backward_without_grad_explains_a_function_that_needs_it():
    x = Variable(numpy.ones((2, 3), dtype=numpy.float32))
    y = F.sum(x, axis=1)  # (2,): not a loss, and Sum's backward needs its output gradient
    with pytest.raises(Exception) as info:
        y.backward()
    if sys.version_info >= (3, 11):
        assert "Sum.backward got no gradient (None) for its output(s) [0] of shape(s) [(2,)]" in "\n".join(
            getattr(info.value, "__notes__", [])
        )
