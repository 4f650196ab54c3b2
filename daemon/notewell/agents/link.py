"""Asking the daemon for an agent: one request per tool call over ``wire.client``, and
the daemon started once when it is not running.

An MCP client starts one ``notewell mcp`` per session and expects its tools to work, so
when no daemon answers the link starts one, once per session: through the login agent
when it is installed, else ``notewell serve`` detached (``ops.agent.start``), then waits
a bounded time for it to load. When that fails every call raises ``Unavailable`` with what
to run; the session stays up and the next call tries the socket again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from notewell.wire import client, protocol

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 30.0
START_HINT = ("run `notewell serve` in a terminal, or `notewell agent install` to keep it "
              "running; `notewell doctor` says what is wrong")


class Unavailable(Exception):
    """The daemon cannot answer now; the message says why and what to run."""


class Refused(Exception):
    """The daemon answered with an error: ``code`` and its message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def start_daemon() -> str:
    from notewell.ops import agent  # imported only when a start is needed

    return agent.start()


class DaemonLink:
    """Requests to the daemon at ``socket_path`` (default: this home's). ``start`` is
    called at most once per link when nothing answers (None: never start); ``wait`` bounds
    how long a call waits for a starting or warming daemon."""

    def __init__(self, socket_path: str | None = None,
                 start: Callable[[], str] | None = start_daemon, wait: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.socket_path = socket_path
        self.start = start
        self.wait = wait
        self.sleep = sleep
        self.monotonic = monotonic
        self.started: str | None = None  # what starting the daemon said, once tried
        self.start_error: str | None = None
        self.gave_up = False
        self._lock = threading.Lock()

    def ask(self, op: str, **args) -> dict:
        """The result of one op; raises ``Unavailable`` or ``Refused``."""
        deadline: float | None = None
        while True:
            try:
                reply = client.ask(protocol.request(op, **args), timeout=REQUEST_TIMEOUT,
                                   socket_path=self.socket_path)
            except (FileNotFoundError, ConnectionRefusedError):
                if not self._start_once():
                    raise Unavailable(self._down_message()) from None
                reply = None
            except TimeoutError:
                raise Unavailable("notewell's daemon did not answer within "
                                  f"{REQUEST_TIMEOUT:.0f} s; it may be busy indexing: try "
                                  "again, or see `notewell status`") from None
            except (OSError, protocol.ProtocolError) as e:
                raise Unavailable(f"notewell's daemon could not be reached ({e}); "
                                  + START_HINT) from None
            if reply is not None:
                if reply.get("ok"):
                    return reply.get("result") or {}
                error = reply.get("error") or {}
                code = str(error.get("code", "internal"))
                message = str(error.get("message", ""))
                if code not in ("warming_up",):
                    if code == "version_mismatch":
                        message += "; then start a new session"
                    raise Refused(code, message)
            # Starting or loading its model: wait, within bounds.
            now = self.monotonic()
            deadline = now + self.wait if deadline is None else deadline
            if now >= deadline:
                if reply is None:
                    self.gave_up = True  # later calls fail at once unless it comes up
                raise Unavailable(
                    f"notewell's daemon is not ready after {self.wait:.0f} s "
                    + ("(it is still loading its model and index); try again shortly"
                       if reply is not None else f"of starting it; {START_HINT}"))
            self.sleep(0.1)

    def _start_once(self) -> bool:
        """Start the daemon unless that was tried already; whether a start is under way."""
        if self.start is None:
            return False
        with self._lock:
            if self.started is None and self.start_error is None:
                try:
                    self.started = self.start()
                    log.info("notewell's daemon was not running: %s", self.started)
                except Exception as e:  # the agent's manager refused, no notewell found
                    self.start_error = f"{type(e).__name__}: {e}"
                    log.warning("could not start notewell's daemon: %s", self.start_error)
            return self.started is not None and not self.gave_up

    def _down_message(self) -> str:
        if self.start is None:
            return f"notewell's daemon is not running; {START_HINT}"
        if self.start_error:
            return (f"notewell's daemon is not running and starting it failed "
                    f"({self.start_error}); {START_HINT}")
        if self.gave_up:
            return (f"notewell's daemon is not running: it was started ({self.started}) "
                    f"but did not answer within {self.wait:.0f} s; {START_HINT}")
        return f"notewell's daemon is not running; {START_HINT}"
