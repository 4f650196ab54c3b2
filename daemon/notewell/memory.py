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


# glibc's mallopt parameter for the number of malloc arenas (malloc.h).
_M_ARENA_MAX = -8


def limit_heaps(arenas: int = 2) -> None:
    """Let the process's threads share ``arenas`` malloc heaps instead of one per thread
    and core. Each query thread otherwise keeps its own heap of freed numpy temporaries:
    measured at 100k chunks, 359 MB under load with the default and 318 MB with two
    (bench/memory.py). Call before threads start; a no-op where glibc is absent."""
    try:
        import ctypes

        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    except OSError:
        return
    if mallopt is not None:
        mallopt(_M_ARENA_MAX, arenas)
