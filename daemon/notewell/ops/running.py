"""The daemon running for this home, found by its lock (``serve.transport.acquire_lock``):
which pid holds it, asking it to stop and waiting until it has exited, or asking it to
restart (into the config and model on disk: ``notewell model use``) and waiting until it
answers again.

``notewell agent install`` stops a daemon started by hand or from a launcher before it
starts the agent's: otherwise the agent's daemon finds the lock held and exits, and the
agent is installed but not running. The lock, not the socket or the pid, says when the old
daemon is gone: a process releases it when it exits, even as a zombie nobody reaped.

``wait_started`` watches a daemon just spawned (``agent start`` without an agent) until it
answers or has exited, so a daemon that fails at once is never reported as started.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
import time
from collections.abc import Callable

from notewell.wire import client, paths, protocol

STOP_TIMEOUT = 10.0  # seconds for a daemon asked to stop to exit (it takes about 0.6 s)
RESTART_TIMEOUT = 120.0  # seconds for a restarted daemon to load its model and index

Ask = Callable[..., dict]


class StillRunning(Exception):
    """The daemon did not exit when asked; the message says what to do."""


def holder() -> int | None:
    """The pid of the daemon holding this home's lock (0 if its pid cannot be read), or
    None when no daemon runs."""
    try:
        fd = os.open(paths.lock_path(), os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)  # free: nobody serves this home
        return None
    finally:
        os.close(fd)


def wait_for_exit(timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the lock to be released; True once it is. A
    blocking ``flock`` on a thread of its own returns the moment the holder exits."""
    try:
        fd = os.open(paths.lock_path(), os.O_RDWR)
    except FileNotFoundError:
        return True
    released = threading.Event()

    def wait() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            fcntl.flock(fd, fcntl.LOCK_UN)  # at once: the agent's daemon takes it next
            released.set()
        finally:
            os.close(fd)

    threading.Thread(target=wait, name="notewell-wait-exit", daemon=True).start()
    return released.wait(timeout)


def stop(ask: Ask = client.ask, kill: Callable[[int, int], None] = os.kill,
         timeout: float = STOP_TIMEOUT) -> int | None:
    """Stop the daemon serving this home, if one runs, and wait until it has exited;
    returns its pid (0 if unknown), None if none ran. Asks over the socket first (the
    daemon stops as for SIGTERM, a clean exit its service manager does not restart);
    a daemon that does not answer, or refuses (another protocol version), gets SIGTERM."""
    pid = holder()
    if pid is None:
        return None
    try:
        stopping = bool(ask(protocol.request("stop"), timeout=2.0).get("ok"))
    except (OSError, protocol.ProtocolError):
        stopping = False
    if not stopping and pid:
        with contextlib.suppress(ProcessLookupError):
            kill(pid, signal.SIGTERM)
    if not wait_for_exit(timeout):
        raise StillRunning(f"the running notewell daemon (pid {pid or '?'}) did not stop "
                           f"within {timeout:.0f} s; stop it (`kill {pid or 'PID'}`) and run "
                           "`notewell agent install` again")
    return pid


START_TIMEOUT = 30.0  # seconds for a spawned daemon to answer (or fail) before we stop looking


def wait_started(proc, ask: Ask = client.ask, timeout: float = START_TIMEOUT,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> dict:
    """After spawning ``notewell serve`` as ``proc`` (a ``Popen``): watch it until it has
    exited or it answers with its engine loaded or failed, whatever comes first (its
    state is polled; nothing is decided by a pause). ``{"state": "exited", "code": N}``,
    the ping reply of the spawned process (``ready``, ``rebuilding``, or ``error`` with
    the ``problem`` from ``status``), or ``{"state": "starting"}`` if neither happened
    within ``timeout`` (it may still come up)."""
    deadline = clock() + timeout
    while clock() < deadline:
        code = proc.poll()
        if code is not None:
            return {"state": "exited", "code": code}
        try:
            now = ask(protocol.request("ping"), timeout=2.0).get("result") or {}
        except (OSError, protocol.ProtocolError):
            now = {}  # not listening yet
        # Another daemon may answer (this one then exits: the home is served).
        if now.get("pid") == proc.pid and now.get("state") not in ("starting", "warming"):
            if now["state"] == "error":
                status = ask(protocol.request("status"), timeout=5.0).get("result") or {}
                now = {**now, "problem": status.get("problem")}
            return now
        sleep(0.05)
    return {"state": "starting"}


def restart(ask: Ask = client.ask) -> dict | None:
    """Ask the daemon serving this home to restart in its process (it reads config.toml
    and loads its model again) and wait until the new one answers; its ``ping`` reply
    (``state``: ready, or error with its ``problem`` from ``status``), ``{"state":
    "restarting"}`` when it is not back within ``RESTART_TIMEOUT``, or None when no daemon
    runs."""
    if holder() is None:
        return None
    try:
        before = ask(protocol.request("ping"), timeout=5.0)
        reply = ask(protocol.request("restart"), timeout=5.0)
    except (OSError, protocol.ProtocolError):
        return {"state": "unreachable"}
    if not reply.get("ok"):
        return {"state": "refused", "problem": (reply.get("error") or {}).get("message")}
    started = (before.get("result") or {}).get("started")
    deadline = time.monotonic() + RESTART_TIMEOUT
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            now = ask(protocol.request("ping"), timeout=2.0).get("result") or {}
        except (OSError, protocol.ProtocolError):
            continue  # between the old process's socket and the new one's
        if now.get("started") == started or now.get("state") not in ("ready", "error"):
            continue
        if now["state"] == "error":
            status = ask(protocol.request("status"), timeout=5.0).get("result") or {}
            now = {**now, "problem": status.get("problem")}
        return now
    return {"state": "restarting"}
