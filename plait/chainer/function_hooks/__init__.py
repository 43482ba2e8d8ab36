"""Ready-made function hooks (chainer.function_hooks)."""
from .debug_print import PrintHook
from .timer import TimerHook

__all__ = ["PrintHook", "TimerHook"]
