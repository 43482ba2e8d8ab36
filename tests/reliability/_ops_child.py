"""Runs Ops calls in a child process and compares NumpyOps against the reference Ops.

A crash (SIGSEGV, abort) in a compiled kernel kills only the child: the parent sees which case
was running and restarts the child after it. Cases are recipes (picklable data), rebuilt in the
child twice, once per backend, so that layouts that do not survive pickling (strided views,
read-only flags, arrays sharing memory) reach both backends as built.

Argument recipes:
    ("lit", value)               the value itself (a copy of it where it is an array)
    ("arr", base, variant)       base (a numpy array) as: "c" a C-contiguous copy, "none" None,
                                 "list" base.tolist(), "scalar" its first value as a Python number,
                                 "dtype:NAME" cast, "strided" a non-contiguous view holding base,
                                 "fortran", "ro" a read-only copy, "obj" an object array
    ("overlap", base, j, offset) a view into argument j's memory (offset bytes in) holding base's
                                 values, dtype and shape (a fresh copy where j's memory is too small)
    ("tuple", [recipes]), ("list", [recipes]), ("padded", [data, size_at_t, lengths, indices])
"""
import json
import os
import pickle
import subprocess
import sys
import traceback

import numpy

CLEAN_ERRORS = (TypeError, ValueError, IndexError, OverflowError, KeyError, NotImplementedError, ZeroDivisionError)


def _strided(base):
    shape = base.shape
    if base.ndim == 0:
        return base.copy()
    big = numpy.zeros(shape[:-1] + (shape[-1] * 2,), dtype=base.dtype)
    view = big[..., ::2]
    view[...] = base
    return view


def build_one(recipe, built):
    kind = recipe[0]
    if kind == "lit":
        v = recipe[1]
        return v.copy() if isinstance(v, numpy.ndarray) else _deep(v)
    if kind == "arr":
        base, variant = recipe[1], recipe[2]
        if variant == "c":
            return numpy.ascontiguousarray(base).copy()
        if variant == "none":
            return None
        if variant == "list":
            return base.tolist()
        if variant == "scalar":
            return base.reshape(-1)[0].item() if base.size else 1.0
        if variant.startswith("dtype:"):
            with numpy.errstate(all="ignore"):
                return base.astype(variant[6:])
        if variant == "strided":
            return _strided(base)
        if variant == "fortran":
            return numpy.asfortranarray(base.copy())
        if variant == "ro":
            out = base.copy()
            out.flags.writeable = False
            return out
        if variant == "obj":
            return base.astype(object)
        raise ValueError(variant)
    if kind == "overlap":
        base, j, offset = recipe[1], recipe[2], recipe[3]
        target = built[j]
        ok = isinstance(target, numpy.ndarray) and target.flags.c_contiguous and target.flags.writeable
        mem = target.reshape(-1).view(numpy.uint8) if ok and target.dtype.kind != "O" else None
        if mem is None or mem.size - offset < base.itemsize:
            return base.copy()
        n = min(base.size, (mem.size - offset) // base.itemsize)
        if n < base.size:
            return base.copy()
        view = mem[offset: offset + n * base.itemsize].view(base.dtype).reshape(base.shape)
        view[...] = base  # valid values, in memory that the other argument owns
        return view
    if kind == "tuple":
        return tuple(build_one(r, built) for r in recipe[1])
    if kind == "list":
        return [build_one(r, built) for r in recipe[1]]
    if kind == "padded":  # a plait.types.Padded of four recipes (data, size_at_t, lengths, indices)
        from plait.types import Padded

        return Padded(*(build_one(r, built) for r in recipe[1]))
    raise ValueError(kind)


def _deep(v):
    if isinstance(v, list):
        return [_deep(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_deep(x) for x in v)
    if isinstance(v, numpy.ndarray):
        return v.copy()
    return v


def build(args, kwargs):
    built = []
    for r in args:
        built.append(build_one(r, built))
    kw = {k: build_one(r, built) for k, r in kwargs.items()}
    return built, kw


def same(a, b, path="result"):
    """None if a and b are equal (arrays within float tolerance), else a description."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        if not isinstance(b, (list, tuple)) or not isinstance(a, (list, tuple)) or len(a) != len(b):
            return f"{path}: {type(a).__name__} vs {type(b).__name__}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = same(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if hasattr(a, "shape") and hasattr(b, "shape") and not numpy.isscalar(a):
        a, b = numpy.asarray(a), numpy.asarray(b)
        if a.shape != b.shape:
            return f"{path}: shape {a.shape} vs {b.shape}"
        if a.dtype != b.dtype:
            return f"{path}: dtype {a.dtype} vs {b.dtype}"
        if a.dtype.kind in "fc":
            tol = 1e-3 if a.dtype.itemsize <= 4 else 1e-6
            if not numpy.allclose(a, b, rtol=tol, atol=tol, equal_nan=True):
                return f"{path}: values differ (max abs diff {numpy.nanmax(numpy.abs(a - b)) if a.size else 0})"
            return None
        if a.dtype.kind == "O" or not numpy.array_equal(a, b):
            if a.dtype.kind == "O" and all(same(x, y) is None for x, y in zip(a.ravel(), b.ravel())):
                return None
            return f"{path}: values differ"
        return None
    if a is None or b is None:
        return None if a is b else f"{path}: {a!r} vs {b!r}"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return None if a == b or (a != a and b != b) or abs(a - b) <= 1e-4 * max(1.0, abs(a)) else f"{path}: {a} vs {b}"
    return None if type(a) is type(b) else f"{path}: {type(a).__name__} vs {type(b).__name__}"


def _call(ops, method, args, kwargs):
    try:
        with numpy.errstate(all="ignore"):
            return None, getattr(ops, method)(*args, **kwargs)
    except BaseException as err:  # noqa: B902 - reported, not swallowed
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        return err, None


def run_case(case, ops_ref, ops_np):
    method, args, kwargs = case["method"], case["args"], case.get("kwargs", {})
    try:
        ref_args, ref_kw = build(args, kwargs)
        np_args, np_kw = build(args, kwargs)
    except CLEAN_ERRORS as err:  # an argument object refusing its parts (Padded checks its own)
        return {"ref": "build", "np": "build", "np_msg": f"{type(err).__name__}: {err}"[:400]}
    ref_err, ref_val = _call(ops_ref, method, ref_args, ref_kw)
    np_err, np_val = _call(ops_np, method, np_args, np_kw)
    out = {"ref": type(ref_err).__name__ if ref_err else "ok", "np": type(np_err).__name__ if np_err else "ok"}
    if np_err is not None:
        out["np_msg"] = str(np_err)[:400]
        # Both refusing to allocate what the arguments ask for (a garbage row count) is the same refusal.
        both_memory = isinstance(np_err, MemoryError) and isinstance(ref_err, MemoryError)
        if not (isinstance(np_err, CLEAN_ERRORS) or both_memory) or not str(np_err):
            out["fail"] = f"unclean error {type(np_err).__name__}: {np_err!s:.300}"
            out["tb"] = "".join(traceback.format_exception(np_err))[-1500:]
        elif ref_err is None:
            out["fail"] = f"NumpyOps raised {type(np_err).__name__} ({np_err!s:.300}) where the reference returns a result"
        return out
    if ref_err is not None:
        out["fail"] = f"NumpyOps returned a result where the reference raises {type(ref_err).__name__}: {ref_err!s:.300}"
        return out
    if case.get("loose"):
        d = None if getattr(ref_val, "shape", None) == getattr(np_val, "shape", None) else "shape differs"
    else:
        d = same(ref_val, np_val) or same(ref_args, np_args, "arguments after the call")
    if d:
        out["fail"] = f"NumpyOps differs from the reference: {d}"
    return out


def child_main(path, start):
    with open(path, "rb") as f:
        cases = pickle.load(f)
    sys.path.insert(0, os.getcwd())
    from plait.backends import NumpyOps, Ops

    ops_ref, ops_np = Ops(), NumpyOps()
    for i in range(start, len(cases)):
        sys.stdout.write(f"S {i}\n")
        sys.stdout.flush()
        res = run_case(cases[i], ops_ref, ops_np)
        sys.stdout.write(f"R {i} {json.dumps(res)}\n")
        sys.stdout.flush()


def run_cases(cases, tmp_path, timeout=300):
    """Run the cases in child processes; one result dict per case ("crash" set where it died)."""
    path = os.path.join(str(tmp_path), "cases.pkl")
    with open(path, "wb") as f:
        pickle.dump(cases, f)
    results = [None] * len(cases)
    start = 0
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONFAULTHANDLER="0")
    while start < len(cases):
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), path, str(start)],
            capture_output=True, text=True, cwd=root, env=env, timeout=timeout,
        )
        running = None
        for line in proc.stdout.splitlines():
            if line.startswith("S "):
                running = int(line.split()[1])
            elif line.startswith("R "):
                _, i, payload = line.split(" ", 2)
                results[int(i)] = json.loads(payload)
                running = None
        if proc.returncode == 0 and running is None:
            break
        if running is None:  # died outside a case (import error): report on the next case
            running = start
            while running < len(cases) and results[running] is not None:
                running += 1
            if running >= len(cases):
                break
        results[running] = {
            "crash": proc.returncode,
            "fail": f"the process died (exit status {proc.returncode}); stderr: {proc.stderr[-800:]}",
        }
        start = running + 1
    return results


def describe_case(case):
    def short(r):
        if r[0] == "arr":
            return f"{r[1].dtype}{list(r[1].shape)}:{r[2]}"
        if r[0] == "overlap":
            return f"overlap(arg{r[2]}+{r[3]})"
        if r[0] == "lit":
            v = r[1]
            return f"{v.dtype}{list(v.shape)}" if isinstance(v, numpy.ndarray) else repr(v)[:40]
        return r[0]

    args = ", ".join(short(r) for r in case["args"])
    kw = ", ".join(f"{k}={short(r)}" for k, r in case.get("kwargs", {}).items())
    return f"{case['method']}({args}{', ' if kw else ''}{kw})"


if __name__ == "__main__":
    child_main(sys.argv[1], int(sys.argv[2]))
