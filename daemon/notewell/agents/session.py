"""MCP sessions hosted by the daemon: one SDK session per relay connection.

``notewell mcp`` (``relay``) switches its socket connection to MCP; from then on the
connection carries MCP's stdio framing, newline-delimited JSON-RPC, and this module runs
the SDK's server over it (``server.build``) on the connection's own thread, in its own
event loop, until either side closes. Tool calls are answered by the daemon's handlers in
this process (``link``). Imported by the daemon only when the first MCP connection comes
(or at start when an agent's client is configured), so the SDK costs nothing otherwise.

A session that misbehaves is closed, after one JSON-RPC error saying why, and nothing
else notices: a line that is not JSON-RPC, a message over ``MAX_MESSAGE_BYTES``, or a
client that does not read what it is sent within ``SEND_TIMEOUT``. At most
``MAX_SESSIONS`` run at once, so agents never take every connection from the launcher;
their tool calls are answered ``CALLS_AT_ONCE`` at a time, on threads of lower priority
than the keystroke path's, so agents searching in a loop slow a person typing little.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from notewell import priority
from notewell.agents.link import DaemonLink
from notewell.agents.server import build

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 1 << 20  # an agent's requests are small; a note's page is 40,000 chars
SEND_TIMEOUT = 10.0  # seconds a client may leave an answer unread before it is dropped
MAX_SESSIONS = 32  # of the daemon's 64 connections
# Agents' tool calls answered at once, across every session: the rest queue. A keystroke
# then shares the daemon with at most this many agent searches (agents wait a little;
# a person typing would notice).
CALLS_AT_ONCE = 1
CHUNK = 1 << 16


class Misbehaved(Exception):
    """The client broke the protocol; the message says how (sent to it, then closed)."""


class Sessions:
    """Every MCP session of the daemon; ``ask`` answers a request as the socket would."""

    def __init__(self, ask: Callable[[dict], dict | None], wait: float = 20.0) -> None:
        calls = threading.BoundedSemaphore(CALLS_AT_ONCE)

        def one_at_a_time(req: dict) -> dict | None:
            with calls:
                return ask(req)

        self.link = DaemonLink(one_at_a_time, wait=wait)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._reserved = 0

    def reserve(self) -> bool:
        """Take a session slot (False when ``MAX_SESSIONS`` run); ``serve`` frees it."""
        with self._lock:
            if self._reserved >= MAX_SESSIONS:
                return False
            self._reserved += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._reserved -= 1

    def serve(self, conn: socket.socket) -> None:
        """Run one session on ``conn`` (whose switch was answered) until it ends."""
        with self._lock:
            self._open.add(conn)
        # The session's protocol work (JSON, pydantic) yields to the keystroke path's
        # threads; on Linux the threads it starts inherit this.
        priority.lower_this_thread()
        try:
            anyio.run(self._session, conn)
        except Exception:
            log.exception("an MCP session failed")
        finally:
            with self._lock:
                self._open.discard(conn)
            self.release()

    def close_all(self) -> None:
        """End every session (the daemon is stopping): each relay sees the end."""
        with self._lock:
            conns = list(self._open)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def count(self) -> int:
        with self._lock:
            return len(self._open)

    async def _session(self, conn: socket.socket) -> None:
        stream = await anyio.abc.UNIXSocketStream.from_socket(conn)
        sending = anyio.Lock()
        read_in, read_out = create_context_streams[SessionMessage | Exception](0)
        write_in, write_out = create_context_streams[SessionMessage](0)
        server = build(self.link)

        async def send(data: bytes) -> None:
            async with sending:
                with anyio.fail_after(SEND_TIMEOUT):
                    await stream.send(data)

        async def reader() -> None:
            buf = bytearray()
            async with read_in:
                while True:
                    try:
                        data = await stream.receive(CHUNK)
                    except (anyio.EndOfStream, anyio.BrokenResourceError,
                            anyio.ClosedResourceError):
                        return
                    buf += data
                    while (end := buf.find(b"\n")) >= 0:
                        line = bytes(buf[:end])
                        del buf[:end + 1]
                        if line.strip():
                            await read_in.send(SessionMessage(_message(line)))
                    if len(buf) > MAX_MESSAGE_BYTES:
                        raise Misbehaved(f"a message is over the limit of "
                                         f"{MAX_MESSAGE_BYTES} bytes")

        async def writer() -> None:
            async with write_out:
                async for message in write_out:
                    await send(message.message.model_dump_json(
                        by_alias=True, exclude_unset=True).encode() + b"\n")

        problem: list[str] = []  # why the session was closed, when it broke a rule

        async def guarded(task: Callable[[], Awaitable[None]], scope: anyio.CancelScope,
                          ends: bool = True) -> None:
            """Run ``task``; a broken rule, or its end when it ``ends`` the session, ends
            the whole session."""
            try:
                await task()
            except Misbehaved as e:
                problem.append(str(e))
            except (TimeoutError, anyio.BrokenResourceError, anyio.ClosedResourceError,
                    OSError):
                problem.append("the client stopped reading")
            else:
                if not ends:
                    return
            scope.cancel()

        async def serve() -> None:
            await server.run(read_out, write_in, server.create_initialization_options())

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(guarded, writer, tg.cancel_scope)
                tg.start_soon(guarded, serve, tg.cancel_scope)
                # The client's end closes the server's input: it answers what it has read,
                # then ``serve`` ends, and with it the session.
                tg.start_soon(guarded, reader, tg.cancel_scope, False)
            if problem:
                log.warning("closed an MCP session: %s", problem[0])
                if problem[0] != "the client stopped reading":
                    with contextlib.suppress(Exception):
                        await send(_error_line(types.PARSE_ERROR, problem[0]))
        finally:
            with contextlib.suppress(Exception):
                await stream.aclose()


def _message(line: bytes) -> types.JSONRPCMessage:
    try:
        return types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:
        raise Misbehaved("not a JSON-RPC message; the session is closed") from None


def _error_line(code: int, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": None,
                       "error": {"code": code, "message": message}}).encode() + b"\n"
