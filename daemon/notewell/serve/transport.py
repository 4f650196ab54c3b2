"""The daemon's socket: who may connect, how requests arrive, and how replies leave.

Owns the listening socket (0600 from the moment it is bound, in a 0700 folder whose parent
nobody else can rename it in), the lock file that keeps a second daemon off the same home,
the accept loop and the pipe that wakes it, one thread per connection checking the peer's
uid and reading length-prefixed msgpack frames under deadlines and limits, and the reply
envelope (``error_reply``). It knows nothing about ops: each decoded request goes to the
``answer`` callable the daemon wires in, and whatever that returns is sent back; the one
exception is the switch to MCP (``MCP_OP``, answered ok by the handlers), after which the
connection belongs to the MCP session host the daemon wires in (``mcp_host``).

May import ``wire`` and ``clock`` (the deadlines read it), nothing else of notewell.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import selectors
import signal
import socket
import threading
from collections.abc import Callable
from functools import partial
from typing import Protocol

import msgpack

from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.wire import paths, protocol
from notewell.wire.client import peer_uid

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
IDLE_TIMEOUT = 10.0  # seconds a connection may sit between requests
FRAME_TIMEOUT = 2.0  # seconds from a request's first byte to its last, however it trickles

# A decoded request, and a function that sends a frame (progress before the reply, or the
# reply) -> its reply; ``REPLIED`` when it sent the reply itself (whoever waits on the
# reply then waits on its sending too); or None to close the connection (the daemon is
# stopping, the client has gone).
REPLIED = object()
Answer = Callable[[object, Callable[[dict], None]], dict | object | None]
MCP_OP = "mcp"  # switches a connection to MCP (``agents.relay``, ``agents.session``)


class McpHost(Protocol):
    def reserve(self) -> bool: ...  # a session slot, or False when all are taken
    def release(self) -> None: ...  # frees a slot taken for a session that never ran
    def serve(self, conn: socket.socket) -> None: ...  # runs the session; frees the slot


class AlreadyRunning(Exception):
    pass


def error_reply(code: str, message: str) -> dict:
    return {"ok": False, "error": {"code": code, "message": message}}


class Server:
    def __init__(self, answer: Answer, stop_event: threading.Event,
                 mcp_host: Callable[[], McpHost] | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.answer = answer
        self.clock = clock  # the frames' deadlines
        self.mcp_host = mcp_host  # called on the first switch to MCP (it may load the SDK)
        self.stop_event = stop_event
        self._listener: socket.socket | None = None
        self._lock_fd: int | None = None
        self.socket_path = paths.socket_path()  # where ``open`` bound it, once it has
        self._connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        # Written to by ``wake`` (signal-safe) to wake the accept loop at once: shutting a
        # listening AF_UNIX socket down does not wake a waiting poll on Linux.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def open(self) -> None:
        """Take the lock and bind the socket."""
        run_dir = claim_runtime_dir()
        check_parent(run_dir)
        self._lock_fd = acquire_lock(os.path.join(run_dir, "daemon.lock"))
        self.socket_path = os.path.join(run_dir, "notewell.sock")
        self._listener = bind_socket(self.socket_path)

    def serve_forever(self) -> None:
        """Accept until ``stop_event`` is set."""
        assert self._listener is not None
        self._listener.setblocking(False)
        waiter = selectors.DefaultSelector()
        waiter.register(self._listener, selectors.EVENT_READ)
        waiter.register(self._wake_r, selectors.EVENT_READ)
        # A signal may be delivered to any thread, and only the one it reaches leaves its
        # system call: Python's C handler writes to this pipe wherever it runs, so the wait
        # below ends and the Python handler (SIGTERM: stop) runs here at once.
        with contextlib.suppress(ValueError):  # only the main thread may set it
            signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        while not self.stop_event.is_set():
            ready = waiter.select()
            if self.stop_event.is_set():
                break
            if any(key.fileobj == self._wake_r for key, _ in ready):
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, 512)  # a signal that does not stop (SIGHUP)
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                continue  # the client gave up before we got to it
            except OSError:
                if self.stop_event.is_set():
                    break
                raise
            conn.setblocking(True)
            if not self._connections.acquire(blocking=False):
                _refuse(conn, "busy", "too many connections; retry")
                continue
            threading.Thread(target=self._serve_connection, args=(conn,), daemon=True,
                             name="notewell-conn").start()
        waiter.close()
        with contextlib.suppress(ValueError):
            signal.set_wakeup_fd(-1)

    def wake(self) -> None:
        """Wake the accept loop so it sees ``stop_event``; safe in a signal handler."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)

    def close_socket(self) -> None:
        """Close and remove the socket, so clients see "not running" at once."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)

    def release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            uid = peer_uid(conn)
            if uid != os.getuid():
                log.warning("refused a connection from uid %s", uid)
                return
            while not self.stop_event.is_set():
                try:
                    first = _recv_until(conn, 1, self.clock.monotonic() + IDLE_TIMEOUT,
                                        self.clock)
                except (TimeoutError, OSError):
                    return  # idle too long between requests
                if not first:
                    return  # closed between requests: the normal end
                # A whole frame must follow its first byte within FRAME_TIMEOUT: a per-recv
                # timeout would let a client holding a slot send one byte every few seconds.
                deadline = self.clock.monotonic() + FRAME_TIMEOUT
                try:
                    header = first + _recv_until(conn, protocol.HEADER_BYTES - 1, deadline,
                                                 self.clock, eof_ok=False)
                    size = protocol.frame_length(header, protocol.MAX_REQUEST_BYTES)
                    body = _recv_until(conn, size, deadline, self.clock, eof_ok=False)
                except protocol.ProtocolError as e:
                    _refuse(conn, "bad_frame", str(e))
                    return
                except TimeoutError:
                    _refuse(conn, "timeout",
                            f"a request must arrive whole within {FRAME_TIMEOUT:g} s")
                    return
                except OSError:
                    return
                req, bad = decode_request(body)
                reply = bad if bad is not None else self.answer(req, partial(_progress, conn))
                if reply is None:
                    return
                if reply is REPLIED:
                    continue
                assert isinstance(reply, dict)
                if (reply.get("ok") and isinstance(req, dict) and req.get("op") == MCP_OP
                        and self.mcp_host is not None):
                    self._switch_to_mcp(conn, reply)
                    return
                try:
                    conn.settimeout(IDLE_TIMEOUT)  # not what was left of the frame's time
                    _send(conn, reply)
                except OSError:
                    return
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            self._connections.release()


    def _switch_to_mcp(self, conn: socket.socket, reply: dict) -> None:
        """Hand the connection to an MCP session, which has no idle limit: an agent's
        session may sit quiet for hours. Its slot stays taken until the session ends."""
        try:
            host = self.mcp_host()  # type: ignore[misc]
        except Exception as e:  # the SDK is missing or broken: say so, keep serving
            log.exception("could not load the MCP server")
            _refuse(conn, "internal", f"the daemon cannot serve MCP ({type(e).__name__}: "
                    f"{e}); `notewell doctor` says what is wrong")
            return
        if not host.reserve():
            _refuse(conn, "busy", "too many MCP sessions; close one and retry")
            return
        try:
            conn.settimeout(IDLE_TIMEOUT)
            _send(conn, reply)
            conn.settimeout(None)
        except OSError:
            host.release()
            return
        host.serve(conn)


def decode_request(body: bytes) -> tuple[object, dict | None]:
    """(request, None), or (None, an error reply) for bytes that are not a message.
    The limits bound what a hostile frame can make us allocate."""
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=True,
                               max_str_len=protocol.MAX_REQUEST_BYTES, max_bin_len=0,
                               max_array_len=1024, max_map_len=64), None
    except Exception as e:
        return None, error_reply("bad_message", f"not a msgpack message: {type(e).__name__}")


def _recv_until(conn: socket.socket, n: int, deadline: float, clock: Clock,
                eof_ok: bool = True) -> bytes:
    """Exactly ``n`` bytes by ``deadline`` (on ``clock``; ``TimeoutError`` otherwise). End
    of stream before the first byte returns b"" when ``eof_ok``; anywhere else it is a
    ``ProtocolError``."""
    buf = bytearray()
    while len(buf) < n:
        left = deadline - clock.monotonic()
        if left <= 0:
            raise TimeoutError
        conn.settimeout(left)
        data = conn.recv(min(n - len(buf), 1 << 16))
        if not data:
            if eof_ok and not buf:
                return b""
            raise protocol.ProtocolError("connection closed mid-frame")
        buf += data
    if clock.monotonic() > deadline:  # it came, but too late (the clock says so, not recv)
        raise TimeoutError
    return bytes(buf)


def _send(conn: socket.socket, reply: dict) -> None:
    conn.sendall(protocol.frame(msgpack.packb(reply, use_bin_type=True)))


def _progress(conn: socket.socket, frame: dict) -> None:
    """A frame before the reply; ``OSError`` if the client has gone or stopped reading."""
    conn.settimeout(IDLE_TIMEOUT)
    _send(conn, frame)


def _refuse(conn: socket.socket, code: str, message: str) -> None:
    with contextlib.suppress(OSError):
        conn.settimeout(1.0)
        _send(conn, error_reply(code, message))
    with contextlib.suppress(OSError):
        conn.close()


def claim_runtime_dir() -> str:
    """Make this home's socket folder, each folder of its chain (``paths.socket_chain``)
    this user's and 0700, and return it. A deep home's name under /tmp that another user
    took first is passed over for the next (``paths.runtime_dir`` chooses the same for
    the clients), and the log says so."""
    run_dir = paths.runtime_dir()
    names = paths.fallback_dirs()
    if run_dir in names and paths.held_by_another(run_dir):  # every name taken
        import tempfile

        root = tempfile.mkdtemp(prefix=os.path.basename(os.path.dirname(names[0])) + "-",
                                dir=paths.SHORT_TMP)
        run_dir = os.path.join(root, os.path.basename(names[0]))
        names.append(run_dir)  # clients find it through the record (``record_socket``)
    if run_dir in names:
        for folder in names:
            if folder == run_dir:
                break
            if paths.held_by_another(folder):
                log.warning("the socket folder %s (another user may be posing as "
                            "notewell), so this daemon listens in %s instead; remove that "
                            "folder (as its owner, or root) to have the first name back",
                            paths.held_by_another(folder), run_dir)
    for folder in paths.socket_chain(os.path.join(run_dir, "notewell.sock")):
        paths.ensure_private_dir(folder)
    return run_dir


def check_parent(path: str) -> None:
    """Refuse a socket directory whose parent another user could rename it in (say a
    ``/tmp/notewell-UID`` made by someone else): they could swap in their own socket."""
    parent = os.path.dirname(os.path.abspath(path))
    st = os.stat(parent)
    # Group-writable is left alone: with per-user groups (umask 002) it is the norm.
    if st.st_uid not in (os.getuid(), 0):
        problem = f"owned by uid {st.st_uid}"
    elif st.st_mode & 0o002 and not st.st_mode & 0o1000:  # anyone may write, no sticky bit
        problem = "writable by every user"
    else:
        return
    raise PermissionError(f"{parent}, which holds notewell's socket folder, is {problem}: "
                          "fix or remove it, then start notewell again")


def acquire_lock(path: str) -> int:
    """An exclusive lock held for the daemon's life: a second daemon on the same home
    fails here, with the running one's pid, instead of fighting over the socket."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise
        try:
            pid = os.pread(fd, 32, 0).decode().strip() or "?"
        except OSError:
            pid = "?"
        os.close(fd)
        raise AlreadyRunning(
            f"another notewell daemon (pid {pid}) is already serving {paths.home()}; "
            "stop it first (`notewell agent stop` or kill it)") from None
    os.ftruncate(fd, 0)
    try:
        os.pwrite(fd, str(os.getpid()).encode(), 0)
    except OSError as e:  # a full disk: the lock holds all the same; only the pid is lost
        log.warning("could not write the pid into %s: %s", path, e)
    return fd


def bind_socket(path: str) -> socket.socket:
    """Bind with a umask that makes the socket 0600 from its first moment. We hold the
    lock, so a socket file already there is a stale one from a crashed daemon."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(1024)  # the kernel caps it (Linux somaxconn 4096, macOS 128)
    return sock
