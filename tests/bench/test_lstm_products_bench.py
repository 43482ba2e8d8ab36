"""Smoke test of bench/lstm_products.py: the quick grid times the LSTM kernels' whole-sequence
products against the BLAS table, prints every shape, the suggested sizes and the installed rule,
and writes them as JSON. Never checks the speed."""
import pytest
from _grid import bench_module, first_column, run_quick_grid

from plait.backends import _numpy_lstm


def _script_module():
    return bench_module("lstm_products")


def test_quick_grid_prints_every_shape_and_the_rule(tmp_path):
    if _numpy_lstm._compiled is None:
        pytest.skip("the compiled LSTM kernels are not built")
    lines, data = run_quick_grid("lstm_products.py", tmp_path)
    assert sorted(first_column(lines, "product")) == sorted(["input", "dW", "dWh", "dX"] * 2)
    for label in ("the input projection and input gradient", "the weight gradients"):
        assert any(line.startswith(f"For {label}, the table is faster in at least 90% of the shapes from")
                   for line in lines)
    assert sum(line.startswith("  installed here") for line in lines) == 2
    rows = data["rows"]
    assert len(rows) == 8 and all(r["kernel_ms"] > 0 and r["table_ms"] > 0 for r in rows)
    assert len(data["threshold"]) == 2
    # The child runs the same build on the same processor: the rule installed here.
    assert data["rule"] == _script_module().installed_rule()


def test_threshold_is_the_smallest_size_where_the_table_mostly_wins():
    LP = _script_module()

    def row(macs, kernel, table):
        return dict(macs=macs, kernel_ms=kernel, table_ms=table)

    rows = [row(1 << 20, 1.0, 2.0), row(1 << 25, 1.0, 1.5), row(1 << 29, 2.0, 1.0), row(1 << 31, 3.0, 2.0)]
    assert LP.threshold(rows) == 1 << 26
    assert LP.threshold([row(1 << 20, 1.0, 0.5), row(1 << 22, 1.0, 0.9)]) == 1 << 10
    assert LP.threshold([row(1 << 20, 1.0, 2.0)]) is None
