"""Asking the daemon's handlers for an agent's tool call, in the daemon's own process.

A session's tool call is one request ``{op, **args}`` answered by the same handlers the
socket's ops use (``ask``: ``serve.handlers.Handlers.answer``), with no round trip through
the socket. While the daemon is still loading its model and index a call waits, within
``wait`` seconds, rather than failing at once; any other error reply becomes ``Refused``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from notewell.wire import protocol

START_HINT = ("run `notewell serve` in a terminal, or `notewell agent install` to keep it "
              "running; `notewell doctor` says what is wrong")


class Unavailable(Exception):
    """The daemon cannot answer now; the message says why and what to run."""


class Refused(Exception):
    """The daemon answered with an error: ``code`` and its message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class DaemonLink:
    """Requests answered by ``ask`` (a decoded request -> its reply, None when the daemon
    is stopping); ``wait`` bounds how long a call waits for a warming daemon."""

    def __init__(self, ask: Callable[[dict], dict | None], wait: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._ask = ask
        self.wait = wait
        self.sleep = sleep
        self.monotonic = monotonic

    def ask(self, op: str, **args) -> dict:
        """The result of one op; raises ``Unavailable`` or ``Refused``."""
        deadline: float | None = None
        while True:
            reply = self._ask(protocol.request(op, **args))
            if reply is None:
                raise Unavailable("notewell's daemon is stopping; start a new session "
                                  f"once it is back ({START_HINT})")
            if reply.get("ok"):
                return reply.get("result") or {}
            error = reply.get("error") or {}
            code = str(error.get("code", "internal"))
            if code != "warming_up":
                raise Refused(code, str(error.get("message", "")))
            # Loading its model and index: wait, within bounds.
            now = self.monotonic()
            deadline = now + self.wait if deadline is None else deadline
            if now >= deadline:
                raise Unavailable(f"notewell's daemon is not ready after {self.wait:.0f} s "
                                  "(it is still loading its model and index); try again "
                                  "shortly, or see `notewell status`")
            self.sleep(0.1)
