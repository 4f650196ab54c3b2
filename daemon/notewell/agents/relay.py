"""``notewell mcp``: the stdio relay an agent's client starts, as thin as the launcher's.

It connects to the daemon's socket once it knows the socket is this user's (its folders
this user's alone, the daemon's uid from the kernel: ``wire.client.connect``), starting
the daemon once when nothing answers, as Alfred's "start" item does; asks it to switch
the connection to MCP with one msgpack request ``{op: "mcp"}``, and then copies bytes
both ways: MCP's stdio transport is newline-delimited JSON-RPC, and after the switch the
socket carries exactly that, so the relay never parses a message. The daemon hosts the
session with the official SDK (``agents.session``). When the daemon cannot be reached (or
its socket is refused), the relay answers every request itself with a JSON-RPC error
saying what to run (an ``initialize`` error, so the client shows it), and stdout never
carries anything but protocol messages.

Imports only ``wire`` and the standard library on its normal path (no SDK, pydantic,
numpy: ``tests/test_mcp.py`` checks); ``ops.login_agent`` only to start the daemon.
"""

import contextlib
import os
import sys
import threading
import time

from notewell import __version__
from notewell.wire import paths, protocol

START_HINT = ("run `notewell serve` in a terminal, or `notewell agent install` to keep it "
              "running; `notewell doctor` says what is wrong")
CHUNK = 1 << 16
CONNECT_TIMEOUT = 5.0
# The first session after the daemon's start may wait for it to import the MCP SDK
# (about 1.5 s on a quiet machine, much more under load).
SWITCH_TIMEOUT = 60.0
NO_DAEMON = -32002  # a JSON-RPC server error code: the daemon could not be reached


class Down(Exception):
    """The daemon cannot be reached; the message says why and what to run."""


def run(start: bool = True, wait: float = 20.0) -> int:
    """Relay one MCP session between stdin/stdout and the daemon until either side
    closes. ``start``: start the daemon when it is down; ``wait``: how long to wait for
    it to come up."""
    try:
        sock = connect(start, wait)
    except Down as e:
        print(f"notewell mcp: {e}", file=sys.stderr)
        return answer_errors(str(e))
    return pump(sock)


def connect(start: bool, wait: float, sleep=time.sleep, monotonic=time.monotonic,
            starter=None):
    """A socket switched to MCP, or ``Down``. The daemon is started at most once, then
    waited for within ``wait`` seconds (it binds its socket before loading the model)."""
    started = None
    deadline = None
    while True:
        try:
            return _switch()
        except (FileNotFoundError, ConnectionRefusedError):
            if not start:
                raise Down(f"notewell's daemon is not running; {START_HINT}") from None
            if started is None:
                try:
                    started = (starter or _start_daemon)()
                except Exception as e:  # no agent installed, its manager refused
                    raise Down(f"notewell's daemon is not running and starting it failed "
                               f"({type(e).__name__}: {e}); {START_HINT}") from None
        except _Restarting:
            pass  # a daemon restarting after an upgrade: its successor comes up shortly
        except paths.NotYours as e:  # nothing was sent: the agent's words stay private
            raise Down(f"refused to connect: {e}; another user may be posing as notewell. "
                       "`notewell agent restart` moves the daemon to a folder of your own"
                       ) from None
        except (OSError, protocol.ProtocolError) as e:
            raise Down(f"notewell's daemon could not be reached ({e}); {START_HINT}"
                       ) from None
        now = monotonic()
        deadline = now + wait if deadline is None else deadline
        if now >= deadline:
            raise Down(f"notewell's daemon did not answer within {wait:.0f} s"
                       + (f" of starting it ({started})" if started else "")
                       + f"; {START_HINT}")
        sleep(0.05)


class _Restarting(Exception):
    pass


def _switch():
    """Connect and ask for MCP; the connected socket, or an exception."""
    from notewell.wire import client

    sock = client.connect(paths.socket_path(), CONNECT_TIMEOUT)  # checks whose it is
    try:
        sock.sendall(protocol.frame(protocol.packb(
            protocol.request("mcp", notewell=__version__))))
        sock.settimeout(SWITCH_TIMEOUT)
        reply = protocol.unpackb(protocol.read_frame(sock, protocol.MAX_REPLY_BYTES))
        if not isinstance(reply, dict):
            raise protocol.ProtocolError("reply is not a map")
        if not reply.get("ok"):
            error = reply.get("error") or {}
            if error.get("code") == "restarting":
                raise _Restarting
            message = str(error.get("message") or error.get("code") or "unknown error")
            if error.get("code") == "unknown_op":
                message += ("; the running daemon is older than this notewell: restart it "
                            "with `notewell agent restart`")
            raise protocol.ProtocolError(f"the daemon refused MCP: {message}")
        sock.settimeout(None)
        return sock
    except BaseException:
        sock.close()
        raise


def _start_daemon() -> str:
    from notewell.ops import login_agent  # imported only when a start is needed

    return login_agent.start()


def pump(sock) -> int:
    """Copy stdin to the socket (on a thread) and the socket to stdout until either side
    closes; stdin's end half-closes the socket, which ends the daemon's session (as the
    end of stdin ends an MCP server on stdio), and with it this relay."""
    def upstream() -> None:
        with contextlib.suppress(OSError):
            while data := os.read(0, CHUNK):
                sock.sendall(data)
        with contextlib.suppress(OSError):
            sock.shutdown(1)  # SHUT_WR: the daemon closes its side in turn

    threading.Thread(target=upstream, daemon=True, name="stdin").start()
    try:
        while data := sock.recv(CHUNK):
            _write_all(1, data)
    except OSError:
        pass  # the daemon went away, or the client closed stdout
    finally:
        sock.close()
    return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def answer_errors(message: str) -> int:
    """Serve a session with no daemon: every request gets a JSON-RPC error with
    ``message`` (``initialize`` first, which a client shows as why it cannot connect)."""
    import json

    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = {"id": None, "method": None}  # unreadable: answered, as a parse error
        if not (isinstance(msg, dict) and "id" in msg and "method" in msg):
            continue  # a notification or a response: nothing to answer
        out = {"jsonrpc": "2.0", "id": msg["id"],
               "error": {"code": NO_DAEMON, "message": message}}
        _write_all(1, (json.dumps(out) + "\n").encode())
    return 1
