"""plait.chainermn in one process (no mpiexec): a world of one, the API's names and refusals."""
import inspect
import subprocess
import sys

import numpy
import pytest

import plait.chainer as chainer
import plait.chainer.functions as F
import plait.chainer.links as L
import plait.chainermn as chainermn
from _cmn_launch import HERE, env
from _env import HAS_GPU
from _mpi import LAUNCHER_VARS


@pytest.fixture(autouse=True)
def no_launcher(monkeypatch):
    for name in LAUNCHER_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def comm():
    return chainermn.create_communicator("naive")


class MLP(chainer.Chain):
    def __init__(self):
        super().__init__(l1=L.Linear(6, 8), l2=L.Linear(8, 8), l3=L.Linear(8, 3))

    def __call__(self, x):
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))


# ChainerMN 1.3's top level, and the names of its subpackages.
CHAINERMN_1_3 = {
    "": ["CommunicatorBase", "DataSizeError", "MultiNodeChainList", "communicators", "create_communicator",
         "create_multi_node_checkpointer", "create_multi_node_evaluator", "create_multi_node_optimizer",
         "datasets", "extensions", "functions", "iterators", "links", "optimizers", "scatter_dataset"],
    "communicators": ["CommunicatorBase", "create_communicator"],
    "datasets": ["DataSizeError", "create_empty_dataset", "scatter_dataset"],
    "extensions": ["AllreducePersistent", "create_multi_node_checkpointer", "create_multi_node_evaluator"],
    "functions": ["allgather", "alltoall", "bcast", "gather", "scatter", "recv", "send", "pseudo_connect"],
    "iterators": ["create_multi_node_iterator"],
    "links": ["MultiNodeBatchNormalization", "MultiNodeChainList", "create_multi_node_n_step_rnn"],
    "optimizers": ["create_multi_node_optimizer"],
}


@pytest.mark.parametrize("module", sorted(CHAINERMN_1_3), ids=lambda m: m or "chainermn")
def test_every_name_of_chainermn_1_3_is_there(module):
    obj = chainermn if not module else getattr(chainermn, module)
    missing = [name for name in CHAINERMN_1_3[module] if not hasattr(obj, name)]
    assert not missing


def test_signatures_follow_chainermn_1_3():
    params = inspect.signature(chainermn.create_communicator).parameters
    assert list(params) == ["communicator_name", "mpi_comm", "allreduce_grad_dtype"]
    assert params["communicator_name"].default == "hierarchical"
    assert list(inspect.signature(chainermn.scatter_dataset).parameters)[:5] == ["dataset", "comm", "root", "shuffle", "seed"]
    assert list(inspect.signature(chainermn.create_multi_node_optimizer).parameters) == [
        "actual_optimizer", "communicator", "double_buffering"]
    assert chainermn.__version__ == "1.3.0"


def test_importing_it_and_a_one_process_run_never_import_mpi4py():
    code = (
        "import sys, numpy\n"
        "import plait.chainermn as chainermn\n"
        "assert 'mpi4py' not in sys.modules\n"
        "comm = chainermn.create_communicator('flat')\n"
        "assert (comm.rank, comm.size, comm.intra_rank, comm.intra_size, comm.inter_rank, comm.inter_size) == (0, 1, 0, 1, 0, 1)\n"
        "assert chainermn.scatter_dataset(numpy.arange(4), comm).tolist() == [0, 1, 2, 3]\n"
        "assert comm.allreduce_obj(3) == 3 and comm.bcast_obj('x') == 'x'\n"
        "print('mpi4py' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["False"]


def test_mpi_comm_of_a_one_process_world_is_mpi4pys_world_of_one():
    pytest.importorskip("mpi4py")
    code = "import plait.chainermn as c\nm = c.create_communicator('naive').mpi_comm\nprint(m.Get_size(), m.Get_rank())\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["1", "0"]


def test_unknown_communicator_names_the_known_ones():
    with pytest.raises(ValueError) as info:
        chainermn.create_communicator("nccl_magic")
    for name in ("naive", "flat", "hierarchical", "two_dimensional", "single_node", "non_cuda_aware", "pure_nccl"):
        assert repr(name) in str(info.value)


@pytest.mark.parametrize("name", ["hierarchical", "two_dimensional", "single_node", "non_cuda_aware", "pure_nccl"])
def test_gpu_communicators_without_a_gpu_say_why_and_what_works(name, monkeypatch):
    from plait import compat

    monkeypatch.setattr(compat, "has_cupy", False, raising=False)
    monkeypatch.setattr(compat, "has_cupy_gpu", False, raising=False)
    with pytest.raises(RuntimeError) as info:
        chainermn.create_communicator(name)
    message = str(info.value)
    assert f"'{name}'" in message and "CuPy" in message and "'naive'" in message and "'flat'" in message


def test_allreduce_grad_dtype_is_pure_nccls_only():
    with pytest.raises(ValueError, match="pure_nccl"):
        chainermn.create_communicator("naive", allreduce_grad_dtype=numpy.float16)


def test_one_process_world(comm):
    assert (comm.rank, comm.size, comm.intra_rank, comm.intra_size, comm.inter_rank, comm.inter_size) == (0, 1, 0, 1, 0, 1)
    assert isinstance(comm, chainermn.CommunicatorBase) and comm.name == "naive"
    x = numpy.arange(6.0).reshape(2, 3)
    assert comm.bcast(x) is x
    assert comm.gather(x)[0] is x and len(comm.allgather(x)) == 1
    assert (comm.allreduce(x) == x).all()
    assert comm.scatter(x[:1]).tolist() == [0.0, 1.0, 2.0] and comm.scatter((x,)) is x
    assert comm.alltoall([x])[0].tolist() == x.tolist()
    assert comm.bcast_obj({"a": 1}) == {"a": 1} and comm.gather_obj(2) == [2] and comm.allreduce_obj([1]) == [1]
    with pytest.raises(ValueError, match="this process"):
        comm.send(x, dest=0, tag=0)
    with pytest.raises(ValueError, match="not in 0..0"):
        comm.recv_obj(1)
    with pytest.raises(ValueError, match="2 arrays for 1 ranks"):
        comm.scatter((x, x))
    with pytest.raises(ValueError, match="2 arrays for 1 ranks"):
        comm.alltoall([x, x])
    with pytest.raises(TypeError, match="numpy or cupy array"):
        comm.bcast("text")
    alone = comm.split(3, 0)
    assert alone is not comm and (alone.size, alone.name) == (1, "naive")


def test_bcast_data_and_allreduce_grad_alone_leave_the_model_as_it_is(comm):
    model = MLP()
    before = {k: p.data.copy() for k, p in model.namedparams()}
    for p in model.params():
        p.grad = numpy.ones_like(p.data)
    comm.bcast_data(model)
    comm.allreduce_grad(model)
    for k, p in model.namedparams():
        assert (p.data == before[k]).all() and (p.grad == 1).all()


def test_scatter_dataset_alone_gives_everything(comm):
    data = numpy.arange(10) * 2
    assert chainermn.scatter_dataset(data, comm).tolist() == data.tolist()
    shuffled = chainermn.scatter_dataset(list(data), comm, shuffle=True, seed=3)
    assert shuffled == [int(v) for v in data[numpy.random.RandomState(3).permutation(10)]]
    assert chainermn.scatter_dataset([], comm) == []
    with pytest.raises(ValueError, match="root 1"):
        chainermn.scatter_dataset(data, comm, root=1)
    with pytest.raises(ValueError, match="no dataset"):
        chainermn.scatter_dataset(None, comm)
    assert chainermn.datasets.create_empty_dataset(data) == [()] * 10


def test_multi_node_optimizer_alone_steps_as_the_real_optimizer(comm):
    numpy.random.seed(0)
    a = L.Classifier(MLP())
    b = a.copy()
    plain = chainer.optimizers.Adam()
    plain.setup(b)
    multi = chainermn.create_multi_node_optimizer(chainer.optimizers.Adam(), comm)
    multi.setup(a)
    rng = numpy.random.default_rng(1)
    for _ in range(5):
        x = rng.random((4, 6), dtype=numpy.float32)
        t = rng.integers(0, 3, 4).astype(numpy.int32)
        multi.update(a, chainer.Variable(x), chainer.Variable(t))
        plain.update(b, chainer.Variable(x), chainer.Variable(t))
    assert multi.t == plain.t == 5
    for (k, p), (_, q) in zip(sorted(a.namedparams()), sorted(b.namedparams())):
        numpy.testing.assert_array_equal(p.data, q.data, err_msg=k)
    # Attributes are the real optimizer's, both ways.
    multi.alpha = 0.5
    assert multi.actual_optimizer.alpha == 0.5 and multi.target is a


def test_multi_node_optimizer_rebroadcasts_and_skips_a_step_when_the_parameters_change(comm):
    link = L.Linear(2, 2)
    opt = chainermn.create_multi_node_optimizer(chainer.optimizers.SGD(), comm)
    opt.setup(link)
    link.add_param("extra", (3,))
    link.extra.data[...] = 0
    for p in link.params():
        p.grad = numpy.ones_like(p.data)
    opt.update()
    assert opt.t == 0  # the step was skipped: the parameters were broadcast instead
    opt.update()
    assert opt.t == 1


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="needs cupy and a CUDA device")
@pytest.mark.parametrize("name", ["pure_nccl", "flat"])
def test_gpu_model_alone_steps_as_the_real_optimizer(name):
    # A GPU communicator without mpiexec: a world of one (no NCCL needed), cupy parameters.
    comm = chainermn.create_communicator(name)
    assert comm.size == 1
    numpy.random.seed(0)
    a = L.Classifier(MLP())
    b = a.copy()
    a.to_gpu()
    b.to_gpu()
    plain = chainer.optimizers.Adam()
    plain.setup(b)
    multi = chainermn.create_multi_node_optimizer(chainer.optimizers.Adam(), comm)
    multi.setup(a)
    rng = numpy.random.default_rng(1)
    for _ in range(3):
        x = chainer.cuda.to_gpu(rng.random((4, 6), dtype=numpy.float32))
        t = chainer.cuda.to_gpu(rng.integers(0, 3, 4).astype(numpy.int32))
        multi.update(a, chainer.Variable(x), chainer.Variable(t))
        plain.update(b, chainer.Variable(x), chainer.Variable(t))
    for (k, p), (_, q) in zip(sorted(a.namedparams()), sorted(b.namedparams())):
        numpy.testing.assert_array_equal(chainer.cuda.to_cpu(p.data), chainer.cuda.to_cpu(q.data), err_msg=k)
    x = chainer.cuda.to_gpu(numpy.arange(4.0))
    assert type(comm.bcast(x)) is type(x) and type(comm.allreduce(x)) is type(x)
    shares = chainermn.scatter_dataset(x, comm)
    assert type(shares) is type(x) and shares.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert chainermn.create_communicator("pure_nccl", allreduce_grad_dtype=numpy.float16).allreduce_grad_dtype == numpy.float16


def test_update_without_setup_says_so(comm):
    opt = chainermn.create_multi_node_optimizer(chainer.optimizers.SGD(), comm)
    with pytest.raises(RuntimeError, match="setup"):
        opt.update()


def test_double_buffering_is_refused_as_chainermn_does(comm):
    with pytest.raises(ValueError, match="double buffering"):
        chainermn.create_multi_node_optimizer(chainer.optimizers.SGD(), comm, double_buffering=True)


def test_multi_node_evaluator_takes_an_evaluate_method_or_a_function(comm):
    class Evaluator:
        def evaluate(self):
            return {"main/loss": chainer.Variable(numpy.array(2.0, "f")), "n": 3}

        def __call__(self):
            return self.evaluate()

    ev = Evaluator()
    assert chainermn.create_multi_node_evaluator(ev, comm) is ev
    assert ev() == {"main/loss": 2.0, "n": 3.0}
    fn = chainermn.create_multi_node_evaluator(lambda: {"acc": 0.5}, comm)
    assert fn() == {"acc": 0.5}
    with pytest.raises(TypeError, match="evaluate"):
        chainermn.create_multi_node_evaluator(42, comm)
    with pytest.raises(TypeError, match="dict"):
        chainermn.create_multi_node_evaluator(lambda: 1.0, comm)()


def test_allreduce_persistent_alone_changes_nothing(comm):
    bn = L.BatchNormalization(3)
    bn.avg_mean[...] = 2.0
    chainermn.extensions.AllreducePersistent(bn, comm)()
    assert (bn.avg_mean == 2.0).all()


@pytest.mark.parametrize("call", [
    lambda c: chainermn.links.MultiNodeBatchNormalization(3, c),
    lambda c: chainermn.MultiNodeChainList(c),
    lambda c: chainermn.links.create_multi_node_n_step_rnn(None, c),
    lambda c: chainermn.functions.send(None, c, 1),
    lambda c: chainermn.functions.recv(c, 0),
    lambda c: chainermn.functions.allgather(c, None),
    lambda c: chainermn.iterators.create_multi_node_iterator(None, c),
    lambda c: chainermn.create_multi_node_checkpointer("run", c),
], ids=["MultiNodeBatchNormalization", "MultiNodeChainList", "n_step_rnn", "F.send", "F.recv", "F.allgather",
        "multi_node_iterator", "checkpointer"])
def test_unsupported_names_import_but_raise_when_used(comm, call):
    with pytest.raises(NotImplementedError, match="not supported by plait.chainermn"):
        call(comm)


def test_the_alias_serves_chainermn_and_chainer_together():
    code = (
        "import sys, chainer, chainermn, chainermn.communicators, plait.chainermn, plait.chainer\n"
        "assert chainermn is plait.chainermn and chainer is plait.chainer\n"
        "assert chainermn.communicators is plait.chainermn.communicators\n"
        "print(chainermn.create_communicator('naive').size)\n"
    )
    for extra in ({"PLAIT_AS_CHAINER": "1"}, {}):
        args = ["-c", code] if extra else ["-c", "import plait.chainermn_alias as a; a.install()\n" + code]
        result = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, env=env(**extra))
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.split() == ["1"]


def test_the_chainermn_script_runs_alone_under_the_alias_and_not_without(tmp_path):
    script = str(HERE / "_chainermn_mnist.py")
    result = subprocess.run([sys.executable, "-m", "plait.chainermn_alias", script, "--communicator", "flat", "--epoch", "1"],
                            capture_output=True, text=True, timeout=60, env=env())
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Num process (COMM_WORLD): 1" in result.stdout
    result = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=60, env=env())
    if result.returncode != 0:  # unless a real chainer and chainermn are installed, nothing serves them
        assert "No module named 'chainer" in result.stderr, result.stderr[-2000:]
