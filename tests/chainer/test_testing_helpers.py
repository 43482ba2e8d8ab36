"""plait.chainer.testing: parameterized classes, product, retry/repeat and the GPU tags."""
import sys
import unittest

import pytest

from plait.chainer import testing
from plait.chainer.testing import attr, condition


def test_product_is_every_combination_with_sorted_keys():
    assert testing.product({"b": [1, 2], "a": ["x"]}) == [{"a": "x", "b": 1}, {"a": "x", "b": 2}]
    assert testing.product({}) == [{}]


def test_parameterize_adds_one_class_per_parameter_set_and_removes_the_base():
    module = sys.modules[__name__]

    @testing.parameterize({"n": 1}, {"n": 2})
    class Case(unittest.TestCase):
        def test_n(self):
            assert self.n in (1, 2)

    try:
        assert Case is None
        first, second = module.Case_param_0, module.Case_param_1
        assert (first.n, second.n) == (1, 2)
        assert issubclass(first, unittest.TestCase) and first.__module__ == __name__
        assert "parameter: {'n': 1}" in str(first("test_n"))
        result = unittest.TestResult()
        unittest.TestSuite([first("test_n"), second("test_n")]).run(result)
        assert result.wasSuccessful() and result.testsRun == 2
    finally:
        del module.Case_param_0, module.Case_param_1


def test_parameterize_rejects_non_testcases():
    with pytest.raises(TypeError, match="unittest.TestCase"):
        testing.parameterize({"n": 1})(object)


class _Flaky(unittest.TestCase):
    __test__ = False  # run by the tests below, not collected on its own
    calls = 0
    setups = 0

    def setUp(self):
        type(self).setups += 1

    @condition.retry(3)
    def test_passes_on_third_try(self):
        type(self).calls += 1
        assert type(self).calls >= 3

    @condition.repeat(3)
    def test_fails_on_second(self):
        type(self).calls += 1
        assert type(self).calls < 2


def _run(name):
    _Flaky.calls = 0
    _Flaky.setups = 0
    result = unittest.TestResult()
    _Flaky(name).run(result)
    return result


def test_retry_passes_once_one_trial_passes():
    result = _run("test_passes_on_third_try")
    # One setUp for the test itself, one per trial.
    assert result.wasSuccessful() and _Flaky.calls == 3 and _Flaky.setups == 4


def test_repeat_fails_with_the_first_error():
    result = _run("test_fails_on_second")
    assert not result.wasSuccessful() and _Flaky.calls == 2
    message = result.failures[0][1]
    assert "Fail: 1, Success: 1" in message and "The first error message" in message


def test_condition_needs_a_testcase_method_and_sane_counts():
    with pytest.raises(ValueError, match="min_success"):
        condition.repeat_with_success_at_least(2, 3)
    with pytest.raises(TypeError, match="unittest.TestCase"):
        condition.retry(2)(lambda: None)()


def test_gpu_tags_set_nose_style_attributes():
    @attr.gpu
    def a():
        pass

    @attr.cudnn
    class B:
        pass

    @attr.multi_gpu(2)
    def c():
        pass

    assert a.gpu is True and B.gpu is True and B.cudnn is True and c.gpu == 2


def test_run_module_does_nothing_when_imported():
    assert testing.run_module("some.module", __file__) is None
