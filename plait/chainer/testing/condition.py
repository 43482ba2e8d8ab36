"""Decorators for tests of random behaviour: run a test method several times and judge the
runs together (repeat: all must pass; retry: one must pass)."""
import functools
import unittest
from typing import Any, Callable

__all__ = ["repeat_with_success_at_least", "repeat", "retry"]


class QuietTestRunner:
    """Runs a suite into a TestResult without printing anything."""

    def run(self, suite: Any) -> unittest.TestResult:
        result = unittest.TestResult()
        suite(result)
        return result


def _report(case: unittest.TestCase, failures: int, successes: int, first: Any) -> None:
    msg = f"\nFail: {failures}, Success: {successes}"
    if first is not None:
        errors = first.failures + first.errors
        if errors:
            msg += "\n\nThe first error message:\n" + "\n".join(e[1] for e in errors)
    case.fail(msg)


def repeat_with_success_at_least(times: int, min_success: int) -> Callable:
    """Run the decorated test method up to `times` times (setUp and tearDown around each);
    it passes once `min_success` runs passed, and fails as soon as that cannot happen.
    """
    if not 0 <= min_success <= times:
        raise ValueError(
            f"repeat_with_success_at_least: need 0 <= min_success <= times, got "
            f"times={times}, min_success={min_success}."
        )

    def decorator(f: Callable) -> Callable:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            if not args or not isinstance(args[0], unittest.TestCase):
                raise TypeError(
                    f"{f.__name__}: testing.condition decorators apply to methods of a "
                    "unittest.TestCase."
                )
            case = args[0]
            successes = failures = 0
            first_failed = None
            for _ in range(times):
                trial = unittest.FunctionTestCase(
                    lambda: f(*args, **kwargs), setUp=case.setUp, tearDown=case.tearDown
                )
                result = QuietTestRunner().run(unittest.TestSuite([trial]))
                if result.wasSuccessful():
                    successes += 1
                else:
                    failures += 1
                    if first_failed is None:
                        first_failed = result
                if successes >= min_success:
                    return
                if failures > times - min_success:
                    break
            _report(case, failures, successes, first_failed)

        return wrapper

    return decorator


def repeat(times: int) -> Callable:
    """The test must pass `times` times in a row."""
    return repeat_with_success_at_least(times, times)


def retry(times: int) -> Callable:
    """The test must pass at least once in `times` runs."""
    return repeat_with_success_at_least(times, 1)
