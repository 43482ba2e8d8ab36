"""Op-tree evaluation and Autodiff leave no reference cycles: a step's lazy op-trees and
temporaries go when the step's names do, not at the next cyclic garbage collection."""
import numpy
from _cycles import assert_no_cycles

from plait.neon import Autodiff, gen_backend


def test_op_trees_and_autodiff_leave_no_garbage_cycles():
    be = gen_backend(backend="cpu", batch_size=8)
    rng = numpy.random.default_rng(0)
    x = be.array(rng.random((4, 8)).astype("float32"))
    w = be.array(rng.random((3, 4)).astype("float32"))
    y = be.empty((3, 8))
    dw = be.empty((3, 4))

    def step():
        be.compound_dot(w, x, y)
        y[:] = be.maximum(y, 0) * 2 + be.exp(-y) / (1 + be.square(y))
        be.compound_dot(y, x.T, dw)
        w[:] = w - 0.01 * dw
        cost = be.sum(be.square(be.dot(w, x)), axis=None)
        grads = Autodiff(cost, be, next_error=None).get_grad_asnumpyarray([w])
        assert grads[0].shape == (3, 4)

    assert_no_cycles(step, "neon op-trees + Autodiff")
