"""plait.backends helpers: get_ops / use_ops / current ops across contexts, threads and tasks; ParamServer."""
import asyncio
import threading

import numpy
import pytest

import plait.backends as backends
from plait.backends import (
    CupyOps,
    MPSOps,
    NumpyOps,
    Ops,
    ParamServer,
    get_array_ops,
    get_current_ops,
    get_ops,
    set_current_ops,
    set_gpu_allocator,
    use_ops,
    use_pytorch_for_gpu_memory,
    use_tensorflow_for_gpu_memory,
)


from _env import HAS_GPU
from _env import installed as _installed


@pytest.fixture(autouse=True)
def restore_ops_state():
    """Every test leaves the current ops and the process default as it found them."""
    default = backends._default_ops
    current = backends.context_ops.get()
    yield
    backends._default_ops = default
    backends.context_ops.set(current)


def _in_thread(func):
    """Run func in a new thread and return its result (re-raising its exception)."""
    box = {}

    def target():
        try:
            box["value"] = func()
        except BaseException as err:  # pragma: no cover - re-raised below
            box["error"] = err

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive()
    if "error" in box:
        raise box["error"]
    return box["value"]


class Recorder(NumpyOps):
    """An Ops class that remembers its constructor arguments."""

    name = "recorder"

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.args = args
        self.kwargs = kwargs


# --- get_ops -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["numpy", "cpu"])
def test_get_ops_cpu_names(name):
    ops = get_ops(name)
    assert type(ops) is NumpyOps
    assert ops.name == "numpy"
    assert isinstance(ops, Ops)


def test_get_ops_returns_a_new_object_each_call():
    assert get_ops("numpy") is not get_ops("numpy")


@pytest.mark.parametrize("use_blis", [True, False])
def test_get_ops_passes_kwargs(use_blis):
    ops = get_ops("numpy", use_blis=use_blis)
    assert ops.use_blis is use_blis


def test_get_ops_passes_arbitrary_kwargs(monkeypatch):
    monkeypatch.setitem(backends._OPS_CLASSES, "recorder", Recorder)
    ops = get_ops("recorder", device_id=3, extra="x")
    assert type(ops) is Recorder
    assert ops.kwargs == {"device_id": 3, "extra": "x"}


def test_get_ops_bad_kwarg_reaches_constructor():
    with pytest.raises(TypeError, match="no_such_option"):
        get_ops("numpy", no_such_option=1)


@pytest.mark.parametrize("name", ["nope", "NumpyOps", "base", "", "Numpy"])
def test_get_ops_unknown_name(name):
    with pytest.raises(KeyError) as info:
        get_ops(name)
    message = str(info.value)
    assert repr(name) in message
    for known in ("numpy", "cpu", "cupy", "gpu"):
        assert known in message
    # thinc raises ValueError here; code written against thinc catches that.
    assert isinstance(info.value, ValueError)


def test_get_ops_unknown_name_matches_thinc_error_kind():
    thinc_backends = pytest.importorskip("thinc.backends")
    with pytest.raises(ValueError):
        thinc_backends.get_ops("nope")
    with pytest.raises(ValueError):
        get_ops("nope")


@pytest.mark.parametrize("name", [None, 3, NumpyOps])
def test_get_ops_needs_a_string(name):
    with pytest.raises(TypeError, match="backend name"):
        get_ops(name)


@pytest.mark.parametrize("name", ["cupy", "gpu"])
@pytest.mark.skipif(HAS_GPU, reason="a GPU is present")
def test_get_ops_gpu_names_without_gpu_fail_clearly(name):
    # As in Thinc, the backend object can be made anywhere; computing with it says why not.
    ops = get_ops(name)
    assert type(ops) is CupyOps and ops.name == "cupy"
    with pytest.raises(ValueError) as info:
        ops.alloc2f(2, 3)
    assert "cupy" in str(info.value).lower()


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cupy", "gpu"])
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_get_ops_gpu_names(name):
    assert type(get_ops(name)) is CupyOps


def test_mps_ops_computes_with_numpy_as_thinc_without_apple_ops():
    ops = get_ops("mps")
    assert type(ops) is MPSOps and ops.name == "mps"
    assert isinstance(ops, NumpyOps) and ops.xp is numpy
    X = numpy.arange(6, dtype="f").reshape((2, 3)) - 2
    numpy.testing.assert_array_equal(ops.relu(X), NumpyOps().relu(X))


def test_get_array_ops():
    assert type(get_array_ops(numpy.zeros((2, 3), dtype="f"))) is NumpyOps
    assert type(get_array_ops([1, 2, 3])) is NumpyOps


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
def test_get_array_ops_cupy():
    import cupy

    assert type(get_array_ops(cupy.zeros((2, 3), dtype="f"))) is CupyOps


def test_exports():
    for name in backends.__all__:
        assert hasattr(backends, name), name
    thinc_backends = pytest.importorskip("thinc.backends")
    missing = [n for n in thinc_backends.__all__ if not hasattr(backends, n)]
    assert missing == []


def test_has_cupy_forwarded_from_compat():
    from plait import compat
    from plait.backends import has_cupy

    assert has_cupy is compat.has_cupy
    with pytest.raises(AttributeError):
        backends.no_such_name  # noqa: B018


# --- current ops in one context ------------------------------------------------------------


def test_default_current_ops_is_numpy_and_stable():
    backends._default_ops = None
    backends.context_ops.set(None)
    first = get_current_ops()
    assert type(first) is NumpyOps
    assert get_current_ops() is first


def test_set_and_get_current_ops():
    ops = NumpyOps(use_blis=False)
    set_current_ops(ops)
    assert get_current_ops() is ops


def test_set_current_ops_rejects_non_ops():
    before = get_current_ops()
    for bad in ("numpy", None, NumpyOps, numpy):
        with pytest.raises(TypeError, match="Ops instance"):
            set_current_ops(bad)
    assert get_current_ops() is before


def test_use_ops_sets_and_restores():
    outer = NumpyOps()
    set_current_ops(outer)
    with use_ops("numpy") as inner:
        assert isinstance(inner, NumpyOps)
        assert inner is not outer
        assert get_current_ops() is inner
    assert get_current_ops() is outer


def test_use_ops_nested():
    outer = NumpyOps()
    set_current_ops(outer)
    with use_ops("numpy", use_blis=False) as first:
        assert get_current_ops() is first and first.use_blis is False
        with use_ops("cpu", use_blis=True) as second:
            assert get_current_ops() is second and second.use_blis is True
            with use_ops("numpy") as third:
                assert get_current_ops() is third
            assert get_current_ops() is second
        assert get_current_ops() is first
    assert get_current_ops() is outer


def test_use_ops_restores_on_error():
    outer = NumpyOps()
    set_current_ops(outer)
    with pytest.raises(RuntimeError, match="boom"):
        with use_ops("numpy"):
            raise RuntimeError("boom")
    assert get_current_ops() is outer


def test_use_ops_unknown_name_leaves_current_ops():
    outer = NumpyOps()
    set_current_ops(outer)
    with pytest.raises(KeyError):
        with use_ops("nope"):
            pass  # pragma: no cover
    assert get_current_ops() is outer


def test_set_current_ops_inside_use_ops_is_undone_at_exit():
    outer = NumpyOps()
    set_current_ops(outer)
    with use_ops("numpy"):
        set_current_ops(NumpyOps())
    assert get_current_ops() is outer


def test_use_ops_does_not_change_the_default_for_new_threads():
    outer = NumpyOps()
    set_current_ops(outer)
    with use_ops("numpy") as inner:
        seen = _in_thread(get_current_ops)
        assert seen is outer and seen is not inner


def test_contextvars_eq_thread_ops():
    set_current_ops(NumpyOps())
    assert backends.contextvars_eq_thread_ops() is True


# --- threads -------------------------------------------------------------------------------


def test_new_thread_sees_ops_set_before_it_started():
    ops = NumpyOps(use_blis=False)
    set_current_ops(ops)
    assert _in_thread(get_current_ops) is ops


def test_new_thread_sees_latest_global_set():
    first, second = NumpyOps(), NumpyOps()
    set_current_ops(first)
    set_current_ops(second)
    assert _in_thread(get_current_ops) is second


def test_thread_set_current_ops_does_not_change_main_context():
    mine = NumpyOps()
    set_current_ops(mine)
    theirs = NumpyOps()

    def worker():
        set_current_ops(theirs)
        return get_current_ops()

    assert _in_thread(worker) is theirs
    assert get_current_ops() is mine
    # ...but it is the process default now, so the next new thread starts from it.
    assert _in_thread(get_current_ops) is theirs


def test_thread_use_ops_is_invisible_elsewhere():
    mine = NumpyOps()
    set_current_ops(mine)

    def worker():
        with use_ops("numpy") as ops:
            return ops, get_current_ops()

    used, seen = _in_thread(worker)
    assert seen is used
    assert get_current_ops() is mine
    assert _in_thread(get_current_ops) is mine


def test_thread_keeps_the_ops_it_first_saw():
    first, second = NumpyOps(), NumpyOps()
    set_current_ops(first)
    seen_first = threading.Event()
    switched = threading.Event()
    box = {}

    def worker():
        box["before"] = get_current_ops()
        seen_first.set()
        switched.wait(timeout=10)
        box["after"] = get_current_ops()

    thread = threading.Thread(target=worker)
    thread.start()
    seen_first.wait(timeout=10)
    set_current_ops(second)
    switched.set()
    thread.join(timeout=10)
    assert box["before"] is first
    assert box["after"] is first


def test_concurrent_threads_with_use_ops_are_isolated():
    n_threads = 8
    barrier = threading.Barrier(n_threads)
    results = [None] * n_threads

    def worker(i):
        with use_ops("numpy", use_blis=bool(i % 2)) as ops:
            barrier.wait(timeout=10)
            # Every thread is inside its block now; each must still see its own ops.
            seen = [get_current_ops() is ops for _ in range(50)]
            barrier.wait(timeout=10)
            results[i] = all(seen) and get_current_ops().use_blis is bool(i % 2)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert results == [True] * n_threads


def test_concurrent_set_current_ops_leaves_a_valid_default():
    created = [NumpyOps() for _ in range(8)]

    def worker(ops):
        for _ in range(100):
            set_current_ops(ops)
            assert get_current_ops() is ops

    threads = [threading.Thread(target=worker, args=(ops,)) for ops in created]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert any(_in_thread(get_current_ops) is ops for ops in created)


# --- asyncio -------------------------------------------------------------------------------


def test_asyncio_tasks_are_isolated():
    outer = NumpyOps()
    set_current_ops(outer)

    async def task(use_blis):
        with use_ops("numpy", use_blis=use_blis) as ops:
            seen = []
            for _ in range(5):
                await asyncio.sleep(0)
                seen.append(get_current_ops() is ops)
            return all(seen), get_current_ops().use_blis

    async def main():
        results = await asyncio.gather(task(True), task(False), task(True))
        return results, get_current_ops()

    results, after = asyncio.run(main())
    assert results == [(True, True), (True, False), (True, True)]
    assert after is outer
    assert get_current_ops() is outer


def test_asyncio_task_inherits_ops_of_its_creator():
    async def child():
        return get_current_ops()

    async def main():
        with use_ops("numpy") as ops:
            inherited = await asyncio.create_task(child())
        return ops, inherited

    ops, inherited = asyncio.run(main())
    assert inherited is ops


def test_asyncio_set_current_ops_in_task_stays_in_task():
    outer = NumpyOps()
    set_current_ops(outer)

    async def child(ops):
        set_current_ops(ops)
        await asyncio.sleep(0)
        return get_current_ops()

    async def main():
        mine = NumpyOps()
        seen = await asyncio.create_task(child(mine))
        return mine, seen, get_current_ops()

    mine, seen, parent_after = asyncio.run(main())
    assert seen is mine
    assert parent_after is outer


# --- GPU allocators ------------------------------------------------------------------------


@pytest.mark.parametrize("allocator", ["bogus", "PyTorch", "", "cupy"])
def test_set_gpu_allocator_unknown(allocator):
    with pytest.raises(ValueError) as info:
        set_gpu_allocator(allocator)
    message = str(info.value)
    assert repr(allocator) in message and "'pytorch'" in message and "'tensorflow'" in message


@pytest.mark.skipif(_installed("torch"), reason="torch is installed")
def test_pytorch_allocator_without_torch():
    with pytest.raises(ImportError, match="pip install torch"):
        set_gpu_allocator("pytorch")
    with pytest.raises(ImportError, match="torch"):
        use_pytorch_for_gpu_memory()


@pytest.mark.skipif(_installed("tensorflow"), reason="tensorflow is installed")
def test_tensorflow_allocator_without_tensorflow():
    with pytest.raises(ImportError, match="tensorflow"):
        set_gpu_allocator("tensorflow")
    with pytest.raises(ImportError, match="tensorflow"):
        use_tensorflow_for_gpu_memory()


@pytest.mark.skipif(not _installed("torch") or _installed("cupy"), reason="needs torch without cupy")
def test_pytorch_allocator_without_cupy():
    with pytest.raises(ImportError, match="cupy"):
        use_pytorch_for_gpu_memory()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU or not _installed("torch"), reason="needs cupy, torch and a CUDA device")
def test_pytorch_allocator_on_gpu():
    import cupy

    set_current_ops(CupyOps())
    set_gpu_allocator("pytorch")
    try:
        X = cupy.arange(1000, dtype="f")
        assert float(X.sum()) == float(numpy.arange(1000, dtype="f").sum())
        assert backends.context_pools.get()["pytorch"].used_bytes() > 0
    finally:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)


# --- ParamServer ---------------------------------------------------------------------------


class RecordingProxy:
    def __init__(self):
        self.calls = []
        self.params = {}

    def get_param(self, model_id, name):
        self.calls.append(("get_param", model_id, name))
        return self.params[(model_id, name)]

    def set_param(self, model_id, name, value):
        self.calls.append(("set_param", model_id, name))
        self.params[(model_id, name)] = value

    def set_grad(self, model_id, name, value):
        self.calls.append(("set_grad", model_id, name))

    def inc_grad(self, model_id, name, value):
        self.calls.append(("inc_grad", model_id, name))


def test_param_server_set_get_has():
    server = ParamServer()
    W = numpy.ones((2, 3), dtype="f")
    assert not server.has_param(1, "W")
    server.set_param(1, "W", W)
    assert server.has_param(1, "W") and not server.has_param(2, "W") and not server.has_param(1, "b")
    assert server.get_param(1, "W") is W
    assert server.param_keys == ((1, "W"),)
    assert server.grad_keys == ()


def test_param_server_missing_keys():
    server = ParamServer()
    with pytest.raises(KeyError, match="'W'.*model id 7"):
        server.get_param(7, "W")
    with pytest.raises(KeyError, match="gradient.*'W'"):
        server.get_grad(7, "W")


def test_param_server_inc_grad_copies_then_accumulates():
    server = ParamServer()
    dW = numpy.full((2, 2), 1.5, dtype="f")
    server.inc_grad(0, "W", dW)
    stored = server.get_grad(0, "W")
    assert stored is not dW and not numpy.shares_memory(stored, dW)
    dW[...] = 100.0  # the caller reusing its buffer must not change the stored gradient
    numpy.testing.assert_array_equal(stored, numpy.full((2, 2), 1.5, dtype="f"))
    server.inc_grad(0, "W", numpy.ones((2, 2), dtype="f"))
    numpy.testing.assert_array_equal(server.get_grad(0, "W"), numpy.full((2, 2), 2.5, dtype="f"))


def test_param_server_inc_grad_non_contiguous():
    server = ParamServer()
    dW = numpy.arange(12, dtype="f").reshape(3, 4).T
    server.inc_grad(0, "W", dW)
    stored = server.get_grad(0, "W")
    assert stored.flags["C_CONTIGUOUS"]
    numpy.testing.assert_array_equal(stored, dW)


def test_param_server_set_grad_replaces():
    server = ParamServer()
    server.inc_grad(0, "W", numpy.ones(3, dtype="f"))
    new = numpy.zeros(3, dtype="f")
    server.set_grad(0, "W", new)
    assert server.get_grad(0, "W") is new


def test_param_server_grad_keys_only_for_registered_params():
    server = ParamServer()
    server.set_param(0, "W", numpy.zeros(2, dtype="f"))
    server.set_param(0, "b", numpy.zeros(2, dtype="f"))
    server.set_param(1, "W", numpy.zeros(2, dtype="f"))
    server.inc_grad(1, "W", numpy.ones(2, dtype="f"))
    server.inc_grad(0, "W", numpy.ones(2, dtype="f"))
    server.inc_grad(5, "orphan", numpy.ones(2, dtype="f"))
    assert server.param_keys == ((0, "W"), (0, "b"), (1, "W"))
    # Parameter order, not gradient order; a gradient without a parameter is not listed.
    assert server.grad_keys == ((0, "W"), (1, "W"))
    assert server.has_grad(5, "orphan")


def test_param_server_init_copies_dicts():
    params = {(0, "W"): numpy.zeros(2, dtype="f")}
    grads = {(0, "W"): numpy.ones(2, dtype="f")}
    server = ParamServer(params, grads)
    params[(1, "b")] = numpy.zeros(1, dtype="f")
    assert server.param_keys == ((0, "W"),)
    assert server.has_grad(0, "W")
    assert ParamServer().param_keys == ()


def test_param_server_instances_do_not_share_state():
    first, second = ParamServer(), ParamServer()
    first.set_param(0, "W", numpy.zeros(1, dtype="f"))
    assert not second.has_param(0, "W")


def test_param_server_proxy():
    proxy = RecordingProxy()
    server = ParamServer(proxy=proxy)
    W = numpy.zeros(2, dtype="f")
    server.set_param(3, "W", W)
    assert proxy.calls == [("set_param", 3, "W")]
    remote = numpy.ones(2, dtype="f")
    proxy.params[(3, "W")] = remote
    assert server.get_param(3, "W") is remote
    assert proxy.calls[-1] == ("get_param", 3, "W")
    server.set_grad(3, "W", numpy.ones(2, dtype="f"))
    server.inc_grad(3, "W", numpy.ones(2, dtype="f"))
    assert proxy.calls[-2:] == [("set_grad", 3, "W"), ("inc_grad", 3, "W")]
    # Gradients live with the proxy only.
    assert not server.has_grad(3, "W")
    assert server.proxy is proxy


def test_param_server_matches_thinc():
    thinc_backends = pytest.importorskip("thinc.backends")
    ours, theirs = ParamServer(), thinc_backends.ParamServer()
    rng = numpy.random.default_rng(0)
    script = [
        ("set_param", 0, "W"),
        ("inc_grad", 0, "W"),
        ("inc_grad", 0, "W"),
        ("set_param", 1, "b"),
        ("set_grad", 1, "b"),
        ("inc_grad", 1, "b"),
        ("inc_grad", 2, "x"),
    ]
    for method, model_id, name in script:
        value = rng.normal(size=(3,)).astype("f")
        getattr(ours, method)(model_id, name, value.copy())
        getattr(theirs, method)(model_id, name, value.copy())
    assert ours.param_keys == theirs.param_keys
    assert ours.grad_keys == theirs.grad_keys
    for key in theirs._grads:
        numpy.testing.assert_array_equal(ours.get_grad(*key), theirs.get_grad(*key))
