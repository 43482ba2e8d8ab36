"""`create_multi_node_evaluator`, `AllreducePersistent`; `create_multi_node_checkpointer` is not supported.

Chainer 1.7.2, whose API plait.chainer serves, has no `chainer.training` (trainers, extensions,
`extensions.Evaluator`: they arrived in Chainer 1.11), so these work on plain objects:

* the evaluator is any object with an ``evaluate()`` method returning a dict of numbers (or
  arrays, or Variables), such as a hand-written evaluator or a later Chainer's
  ``extensions.Evaluator``; or a plain function returning such a dict;
* AllreducePersistent is a callable taking an optional, ignored, trainer.
"""
from __future__ import annotations

import sys
import types
from typing import Any, Dict

import numpy


def _host_value(value: Any) -> Any:
    variable = sys.modules.get("plait.chainer.variable")
    data = value.data if variable is not None and isinstance(value, variable.Variable) else value
    if type(data).__module__.split(".", 1)[0] == "cupy":
        import cupy

        data = cupy.asnumpy(data)
    if isinstance(data, numpy.ndarray) and data.ndim == 0:
        return data[()]
    return data


def _mean_over_ranks(result: Dict[str, Any], communicator: Any) -> Dict[str, Any]:
    if not isinstance(result, dict):
        raise TypeError(f"multi-node evaluator: evaluate() must return a dict, got {type(result).__name__}")
    local = {key: _host_value(value) for key, value in sorted(result.items())}
    everyone = communicator.allgather_obj(local)
    keys = [sorted(r) for r in everyone]
    if any(k != keys[0] for k in keys):
        differ = [rank for rank, k in enumerate(keys) if k != keys[0]]
        raise ValueError(
            f"multi-node evaluator: rank(s) {', '.join(map(str, differ))} reported other keys than rank 0 "
            f"({keys[differ[0]]} against {keys[0]}); every rank must report the same values."
        )
    size = len(everyone)
    mean = {}
    for key in keys[0]:
        total = everyone[0][key]
        for other in everyone[1:]:
            total = total + other[key]
        mean[key] = total / size
    return mean


def create_multi_node_evaluator(actual_evaluator: Any, communicator: Any) -> Any:
    """Make `actual_evaluator` report the mean over ranks of what each rank evaluates.

    With an object that has ``evaluate()`` (returning a dict of numbers, arrays or Variables),
    its ``evaluate`` is replaced on that object, which is returned: ``evaluate()`` and anything
    that calls it (a Chainer Evaluator's ``__call__``) then give every key's mean over all ranks,
    on every rank. With a plain function returning such a dict, a function doing the same is
    returned. Every rank must call it (it is a collective) and report the same keys. Each rank
    counts once, whatever its number of examples (as in ChainerMN): split the data evenly
    (scatter_dataset does).
    """
    original = getattr(actual_evaluator, "evaluate", None)
    if original is None:
        if not callable(actual_evaluator):
            raise TypeError(
                "create_multi_node_evaluator: expected an object with an evaluate() method returning a dict, "
                f"or a function returning one; got {type(actual_evaluator).__name__}"
            )

        def evaluate_function(*args: Any, **kwargs: Any) -> Dict[str, Any]:
            return _mean_over_ranks(actual_evaluator(*args, **kwargs), communicator)

        return evaluate_function

    def evaluate(self: Any) -> Dict[str, Any]:
        return _mean_over_ranks(original(), communicator)

    actual_evaluator._mn_original_evaluate = original
    actual_evaluator._mn_communicator = communicator
    actual_evaluator.evaluate = types.MethodType(evaluate, actual_evaluator)
    return actual_evaluator


class AllreducePersistent:
    """Average the floating-point persistent values of a model (BatchNormalization's avg_mean
    and avg_var) over all ranks, in place, when called. Integer persistents (N) are left alone.
    Call it before evaluating or saving the model."""

    trigger = 1, "epoch"
    priority = 301  # a later Chainer's PRIORITY_WRITER + 1: before evaluators

    def __init__(self, model: Any, comm: Any) -> None:
        self.model = model
        self.comm = comm

    def __call__(self, trainer: Any = None) -> None:
        if self.comm.size == 1:
            return
        paths, arrays = [], []
        for link_path, link in sorted(self.model.namedlinks(), key=lambda item: item[0]):
            for name in sorted(getattr(link, "_persistent", ())):
                value = getattr(link, name)
                is_array = isinstance(value, numpy.ndarray) or type(value).__module__.split(".", 1)[0] == "cupy"
                if is_array and value.dtype.kind == "f":
                    paths.append(f"{link_path.rstrip('/')}/{name}")
                    arrays.append(value)
        means = self.comm._backend.allreduce_mean(arrays, arrays, labels=paths)
        for link_path, mean, array in zip(paths, means, arrays):
            if mean is not array:
                array[...] = mean


def create_multi_node_checkpointer(name: str, comm: Any, cp_interval: int = 5, gc_interval: int = 5, path: Any = None) -> Any:
    """Not supported: ChainerMN's checkpointer is an extension of `chainer.training`'s Trainer,
    which Chainer 1.7.2 (plait.chainer) does not have."""
    raise NotImplementedError(
        "chainermn.create_multi_node_checkpointer is not supported by plait.chainermn: it snapshots a "
        "chainer.training Trainer, which Chainer 1.7.2 (plait.chainer) does not have. Save with "
        "chainer.serializers.save_npz on rank 0 instead."
    )


__all__ = ["AllreducePersistent", "create_multi_node_checkpointer", "create_multi_node_evaluator"]
