"""Keeping notewell's rebuildable caches out of Time Machine (macOS).

The index folder (rewritten with every sync: without this, hourly backups copy it again
and again) and the model folder (derived from the shipped model) are marked excluded when
the daemon starts (creating them if needed, as their owners would): the extended
attribute ``com.apple.metadata:com_apple_backup_excludeItem`` holding the binary plist
string ``com.apple.backupd``. That is what ``tmutil addexclusion PATH`` writes (its
"sticky" exclusion, which moves with the folder), set here through ``setxattr`` from
libSystem rather than by running ``tmutil``: no process per start, no dependence on
``tmutil``'s output format to read it back, and the attribute itself is the record,
re-read by ``getxattr`` (``doctor``), so no marker can disagree with it. The config and
everything else in the home is backed up as before. Nothing happens off macOS.

May import ``wire``.
"""

from __future__ import annotations

import logging
import os
import plistlib
import sys
from typing import Protocol

from notewell.wire import paths

log = logging.getLogger(__name__)

ATTRIBUTE = "com.apple.metadata:com_apple_backup_excludeItem"
VALUE = plistlib.dumps("com.apple.backupd", fmt=plistlib.FMT_BINARY)
LIBSYSTEM = "/usr/lib/libSystem.B.dylib"
ENOATTR = 93  # <sys/errno.h> on macOS: no such attribute


class Xattrs(Protocol):
    def get(self, path: str, name: str) -> bytes | None: ...

    def set(self, path: str, name: str, value: bytes) -> None: ...


class LibSystemXattrs:
    """``getxattr``/``setxattr`` of libSystem (macOS: Python's ``os`` has them on Linux
    only). ``lib`` stands in for libSystem in tests."""

    def __init__(self, lib: object | None = None) -> None:
        if lib is None:
            import ctypes

            lib = ctypes.CDLL(LIBSYSTEM, use_errno=True)
            for fn, restype in ((lib.getxattr, ctypes.c_ssize_t), (lib.setxattr, ctypes.c_int)):
                fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int]
                fn.restype = restype
        self.lib = lib

    def get(self, path: str, name: str) -> bytes | None:
        import ctypes

        p, n = os.fsencode(path), name.encode()
        size = self.lib.getxattr(p, n, None, 0, 0, 0)
        if size < 0:
            err = ctypes.get_errno()
            if err == ENOATTR:
                return None
            raise OSError(err, os.strerror(err), path)
        buf = ctypes.create_string_buffer(size)
        got = self.lib.getxattr(p, n, buf, size, 0, 0)
        if got < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
        return buf.raw[:got]

    def set(self, path: str, name: str, value: bytes) -> None:
        import ctypes

        if self.lib.setxattr(os.fsencode(path), name.encode(), value, len(value), 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)


def cache_dirs() -> dict[str, str]:
    return {"index": paths.index_dir(), "model cache": paths.model_dir()}


def is_excluded(path: str, xattrs: Xattrs) -> bool:
    value = xattrs.get(path, ATTRIBUTE)
    try:
        return value is not None and plistlib.loads(value) == "com.apple.backupd"
    except plistlib.InvalidFileException:
        return False


def exclude_caches(platform: str | None = None, xattrs: Xattrs | None = None) -> list[str]:
    """Mark the index and model folders excluded from Time Machine, creating them if
    needed; returns the folders marked now (already marked ones are left alone). Does
    nothing off macOS; a failure is logged, never raised: backups only cost space."""
    if (platform or sys.platform) != "darwin":
        return []
    marked = []
    try:
        xattrs = xattrs or LibSystemXattrs()
        for what, path in cache_dirs().items():
            if what == "index":
                paths.ensure_private_dir(path)  # as index.store creates it
            else:
                os.makedirs(path, exist_ok=True)
            if not is_excluded(path, xattrs):
                xattrs.set(path, ATTRIBUTE, VALUE)
                marked.append(path)
    except (OSError, AttributeError) as e:
        log.warning("could not exclude notewell's caches from Time Machine: %s", e)
    if marked:
        log.info("excluded from Time Machine: %s", ", ".join(marked))
    return marked
