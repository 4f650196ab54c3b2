"""Background priority for the daemon's background threads, so typing stays smooth while a
large vault indexes: the sync thread, the watcher's loop and the in-memory copies' loader
threads (nobody waits for them) call ``lower_this_thread`` at their start; the keystroke
path (connection threads, handler workers) never does.

macOS: the calling thread's quality-of-service class is set to utility
(``pthread_set_qos_class_self_np`` from libSystem). Utility rather than background:
background QoS keeps a thread on the efficiency cores and throttles its disk reads hard,
which would stretch a first index the user is watching; utility is Apple's class for long
work whose progress the user can see, below the default QoS of the threads that answer.
A thread created later does not inherit it (pthread_create starts threads at the default
QoS), so each background thread calls it itself.

Linux: the calling thread's nice value is raised to ``BACKGROUND_NICE``; on Linux nice is
per thread (``setpriority`` on the thread id) and threads created afterwards inherit it.
An unprivileged process can raise its nice but never lower it again: this is one way.

Best effort everywhere: a refusal is logged and the thread runs on as it was.
May import nothing of notewell.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger(__name__)

QOS_CLASS_UTILITY = 0x11  # <sys/qos.h>
BACKGROUND_NICE = 10
LIBSYSTEM = "/usr/lib/libSystem.B.dylib"


def lower_this_thread(platform: str | None = None, libsystem: object | None = None) -> bool:
    """Run the calling thread at background priority; True if the system took it.
    ``libsystem`` stands in for libSystem on darwin (tests)."""
    platform = platform or sys.platform
    try:
        if platform == "darwin":
            if libsystem is None:
                import ctypes

                libsystem = ctypes.CDLL(LIBSYSTEM, use_errno=True)
            result = libsystem.pthread_set_qos_class_self_np(QOS_CLASS_UTILITY, 0)
            if result != 0:
                raise OSError(result, os.strerror(result))
            return True
        if platform.startswith("linux"):
            tid = threading.get_native_id()
            if os.getpriority(os.PRIO_PROCESS, tid) < BACKGROUND_NICE:
                os.setpriority(os.PRIO_PROCESS, tid, BACKGROUND_NICE)
            return True
    except (OSError, AttributeError) as e:
        log.info("background priority not set for %s: %s", threading.current_thread().name, e)
    return False
