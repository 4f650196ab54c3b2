"""Handing memory the daemon freed back to the operating system.

glibc keeps what a thread frees for reuse, so after a one-off peak (a batch of long chunks
embedded, the vector copy read through 8,192-row batches) a resident daemon stays at its
high-water mark; ``malloc_trim`` returns the free pages. macOS's allocator returns large
blocks by itself and has no ``malloc_trim``: a no-op there.
"""

from __future__ import annotations

_TRIM: object = None


def release_memory() -> None:
    """Return free heap pages to the system (measured, bench/memory.py: the daemon stayed
    near 530 MB after its first sync without it, and 53 MB above its vector copy after
    loading it at 100k chunks)."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = getattr(ctypes.CDLL(None), "malloc_trim", False)
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)  # type: ignore[operator]


# glibc's mallopt parameters (malloc.h).
_M_ARENA_MAX = -8
_M_MMAP_THRESHOLD = -3


def limit_heaps(arenas: int = 2, mmap_from: int = 128 * 1024) -> None:
    """Keep a long-running process's heap near what it uses. Threads share ``arenas``
    malloc heaps instead of one per thread and core, and blocks from ``mmap_from`` bytes
    (a query's numpy temporaries at 100k chunks) are mapped and unmapped on their own
    rather than left in a heap, which glibc otherwise starts doing once such a block is
    freed. Measured at 100k chunks under load (bench/memory.py): 359 MB with glibc's
    defaults, 318 MB with two arenas. Call before threads start; a no-op without glibc."""
    try:
        import ctypes

        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    except OSError:
        return
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, arenas)
        mallopt(_M_MMAP_THRESHOLD, mmap_from)
