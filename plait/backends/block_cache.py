"""numpy's data allocator with a cache of freed large blocks, installed when plait's backends load.

A training step of a wide model allocates and frees the same large arrays every step (a
tagger at width 512 and batch 256: several of 35-46 MB). glibc maps every block above 32 MB
anew and the kernel zeroes each page on first touch, although the producer then writes the
whole array: that zeroing was 15% of such a step (`perf`: `clear_page_erms`, under numpy's
huge-page advice). With the cache, a freed block of at least 64 KiB is kept (up to a limit in
all, the oldest released first) and serves the next request of its size class, already
mapped: blocks from 16 MiB are mappings of their own, smaller ones malloc's, moved to a 64-byte
boundary and kept instead of freed. The smaller ones matter where a step churns arrays of 0.1-1
MB: glibc trimmed its heap and mapped such blocks anew, 20,000 fresh pages an epoch of the text
CNN at width 64, whose training ran 10-17% faster with them kept (bench/README.md). Blocks below
64 KiB are left to malloc's heap. Before a request that no kept block serves is allocated,
the oldest kept blocks are given back until kept and live blocks together are within half again
the most the live ones have been: with kept blocks only bounded by the limit, a spaCy training
run peaked at 809 MB against 561 MB without the cache; with this bound, 584 MB (both measured
when only blocks from 16 MiB were kept). With blocks from 64 KiB, bench/spacy_train.py's
training run (2026-11-28) peaks at 656-720 MB against 567-572 MB without the cache and 590 MB
with blocks from 16 MiB only, for no faster training; PLAIT_BLOCK_CACHE=64 keeps nearly all of
its hits at 597 MB. Giving back blocks not reused within 256 frees, or capping the malloc blocks
kept at 64 MiB, did not lower that peak (bench/README.md).

* ``PLAIT_BLOCK_CACHE``: ``auto`` (default; 512 MiB or a sixteenth of the machine's memory,
  the smaller), a limit in MiB (``256``), or ``off``/``0`` (numpy's own allocator stays).
  Read when plait's backends are first imported.
* It is numpy's documented allocator hook (NEP 49), set in the context of the thread that
  imports plait (other threads keep numpy's allocator); an allocator the program set itself
  is left in place. Arrays remember their allocator, so ones made before or elsewhere are
  freed by their own.
* ``numpy.zeros`` still gets fresh zero pages (untouched ones cost nothing), never a kept block.
* The kept blocks count in the process's memory: ``release()`` gives them back now,
  ``stats()`` shows hits, misses and what is held.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

from ._kernels_cpu import memcache as _mc

VARIABLE = "PLAIT_BLOCK_CACHE"
_HANDLER_NAME = "plait_block_cache"
#: Smallest block kept. Below it malloc's heap reuses memory well; from it up, glibc's trimming
#: of the heap's top and its mmap threshold (which rises to at most 32 MB) had blocks mapped and
#: zeroed anew every step (bench/README.md, "... and blocks from 64 KiB").
MIN_BYTES = 64 << 10
#: The `auto` limit: at most this, and at most a sixteenth of physical memory. The tagger at
#: width 512 / batch 256 kept 53 of 64 hits with 256 MiB (bench/README.md).
AUTO_LIMIT = 512 << 20

_previous: Optional[Any] = None
_installed = False


def _physical_memory() -> Optional[int]:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def limit_from_environment(raw: Optional[str] = None) -> int:
    """The byte limit PLAIT_BLOCK_CACHE asks for (0: no cache)."""
    raw = os.environ.get(VARIABLE, "") if raw is None else raw
    text = raw.strip().lower()
    if text in ("", "auto"):
        memory = _physical_memory()
        return AUTO_LIMIT if memory is None else min(AUTO_LIMIT, memory // 16)
    if text in ("off", "no", "false", "none"):
        return 0
    try:
        mib = float(text)
    except ValueError:
        mib = -1.0
    if not mib >= 0 or mib != mib or mib > (1 << 40):
        raise ValueError(
            f"{VARIABLE}={raw!r} is not a cache size plait understands. Use 'auto' (the default), "
            f"'off', or a limit in MiB such as '256'."
        )
    return int(mib * (1 << 20))


def install(limit_bytes: Optional[int] = None, min_bytes: Optional[int] = None) -> bool:
    """Make the caching allocator numpy's allocator in this thread's context.

    limit_bytes: most bytes kept (default: from PLAIT_BLOCK_CACHE); min_bytes: the smallest
    block kept (default MIN_BYTES, at least 4096). Returns whether it is installed now; with a
    limit of 0, or where the program installed an allocator of its own, numpy's stays.
    """
    global _previous, _installed
    limit = limit_from_environment() if limit_bytes is None else int(limit_bytes)
    smallest = MIN_BYTES if min_bytes is None else int(min_bytes)
    if limit < 0:
        raise ValueError(f"block_cache.install: limit_bytes must be >= 0, got {limit_bytes}")
    _mc.configure(limit, smallest)
    if limit == 0:
        uninstall()
        return False
    name = _current_name()
    if name == _HANDLER_NAME:
        _installed = True
        return True
    if name != "default_allocator":
        return False  # the program's own allocator: leave it
    _previous = _mc.set_handler(_mc.handler)
    _installed = True
    return True


def uninstall() -> None:
    """Put back the allocator install() replaced (in this thread's context) and release the
    kept blocks. Arrays allocated meanwhile are still freed correctly."""
    global _previous, _installed
    if _installed and _previous is not None and _current_name() == _HANDLER_NAME:
        _mc.set_handler(_previous)
    _previous = None
    _installed = False
    _mc.configure(0, MIN_BYTES)
    _mc.release()


def installed() -> bool:
    """Whether numpy allocates through the cache in this thread's context."""
    return _current_name() == _HANDLER_NAME


def release() -> int:
    """Give every kept block back to the system now; returns the bytes released. The live peak
    that bounds what is kept starts again from what is live now."""
    return int(_mc.release())


def stats() -> Dict[str, int]:
    """hits, misses (requests of at least min_bytes served fresh), kept, released, cached_bytes,
    cached_blocks, limit_bytes, min_bytes, live_bytes (blocks of at least min_bytes in use) and
    peak_live_bytes (the most they have been since the last release(): kept and live blocks
    together stay within half again that)."""
    return {k: int(v) for k, v in _mc.stats().items()}


def _current_name() -> str:
    """The name of numpy's allocator in this thread's context."""
    try:
        from numpy._core.multiarray import get_handler_name
    except ImportError:  # pragma: no cover - numpy 1.x layout
        from numpy.core.multiarray import get_handler_name  # type: ignore[no-redef]
    return str(get_handler_name())
