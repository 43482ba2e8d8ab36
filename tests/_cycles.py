"""assert_no_cycles(step, label): run `step` with the cyclic collector off and fail if it left
objects that only the collector would free (reference cycles), naming them."""
import gc


def assert_no_cycles(step, label: str) -> None:
    step()  # first-call set-up (lazy imports, caches, compiled kernels) is not the step's doing
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        step()
        found = gc.collect()
        garbage = [type(o).__name__ + (f" {o.__qualname__}" if hasattr(o, "__qualname__") else "")
                   for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert found == 0, f"{label}: a step left {found} objects in reference cycles: {garbage[:10]}"
