"""The resident daemon: holds the model and the index, answers on a Unix socket, syncs.

One listening socket (0600, in a 0700 directory), one thread per connection for framing,
and a small fixed pool of workers that run requests, so database connections are few and
a slow client only ever holds its own thread. Each request ``{op, **args}`` goes to one
handler; anything malformed gets an error reply (or, for a broken frame, a closed
connection) and the daemon keeps serving. The model loads after the socket is up, so
clients get a "warming up" answer instead of a refused connection. A background thread
keeps the index in sync with the sources and picks up a rebuilt index when one appears.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import msgpack

from . import __version__, alfred, paths, protocol
from .config import Config
from .engine import Engine
from .index import IndexProblem
from .query import MAX_QUERY_CHARS

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
IDLE_TIMEOUT = 10.0  # seconds a connection may sit without sending a full frame
WORKERS = 4
MAX_LIMIT = 200


class RequestError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class AlreadyRunning(Exception):
    pass


class Daemon:
    def __init__(self, config: Config, engine_factory: Callable[[Config], Engine] | None = None,
                 poll_seconds: float = 5.0) -> None:
        self.config = config
        self.engine_factory = engine_factory or (lambda cfg: Engine(cfg))
        self.poll_seconds = poll_seconds
        self.engine: Engine | None = None
        self.state = "starting"
        self.problem: str | None = None
        self.stop_event = threading.Event()
        self.sync_now = threading.Event()
        self.last_reports: list[dict] = []
        self.started = time.time()
        self._listener: socket.socket | None = None
        self._lock_fd: int | None = None
        self._connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="notewell-worker")
        self._retired: list[tuple[float, Engine | object]] = []
        self.handlers: dict[str, Callable[[dict], object]] = {
            "ping": self.op_ping,
            "status": self.op_status,
            "search": self.op_search,
            "similar": self.op_similar,
            "sync": self.op_sync,
            "stop": self.op_stop,
        }

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Take the lock, bind the socket, and start loading the engine in the background."""
        paths.ensure_private_dir(paths.runtime_dir())
        self._lock_fd = acquire_lock(paths.lock_path())
        self._listener = bind_socket(paths.socket_path())
        self._sync_thread = threading.Thread(target=self._background, name="notewell-sync",
                                             daemon=True)
        self._sync_thread.start()

    def serve_forever(self) -> None:
        assert self._listener is not None
        self._listener.settimeout(0.5)
        log.info("notewell %s listening on %s (pid %d)", __version__, paths.socket_path(),
                 os.getpid())
        while not self.stop_event.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.stop_event.is_set():
                    break
                raise
            if not self._connections.acquire(blocking=False):
                _refuse(conn, "busy", "too many connections; retry")
                continue
            threading.Thread(target=self._serve_connection, args=(conn,), daemon=True,
                             name="notewell-conn").start()
        self.shutdown()

    def shutdown(self) -> None:
        self.stop_event.set()
        sock_path = paths.socket_path()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sock_path)
        self._pool.shutdown(wait=True, cancel_futures=True)
        # A sync stops between notes; each note is one transaction, so stopping mid-sync
        # leaves nothing half written. Close the index only once the sync has let go.
        thread = getattr(self, "_sync_thread", None)
        if thread is not None:
            thread.join(timeout=0.8)
        if self.engine is not None and (thread is None or not thread.is_alive()):
            self.engine.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def request_stop(self, *_: object) -> None:
        self.stop_event.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)

    def _background(self) -> None:
        try:
            self.state = "warming"
            self.engine = self.engine_factory(self.config)
            self.state = "ready"
            log.info("engine ready: %s", self.engine.status()["model"])
        except IndexProblem as e:
            self.state, self.problem = "error", str(e)
            log.error("%s", e)
            return
        except Exception as e:  # keep answering, with the reason, rather than dying
            self.state, self.problem = "error", f"{type(e).__name__}: {e}"
            log.exception("engine failed to start")
            return
        while not self.stop_event.is_set():
            self._sync_once()
            self.sync_now.wait(self.poll_seconds)
            self.sync_now.clear()

    def _sync_once(self) -> None:
        engine = self.engine
        assert engine is not None
        try:
            newer = engine.newer_generation()
            if newer:
                log.info("switching to rebuilt index %s", newer)
                old = engine.index
                engine.reopen(newer)
                self._retired.append((time.monotonic(), old))
            reports = engine.sync(should_stop=self.stop_event.is_set)
            self.last_reports = [r.to_dict() for r in reports]
            for r in reports:
                if r.changed or r.error:
                    log.info("sync %s: +%d ~%d -%d, %d chunks embedded%s", r.source, r.added,
                             r.updated, r.deleted, r.embedded,
                             f", error: {r.error}" if r.error else "")
        except Exception:
            log.exception("sync failed; will retry")
        self._close_retired()

    def _close_retired(self) -> None:
        # Old index connections may still be in use by a query that started before the
        # switch; they are closed a while later, when no query can still hold them.
        now = time.monotonic()
        keep = []
        for when, index in self._retired:
            if now - when > 30:
                with contextlib.suppress(Exception):
                    index.close()  # type: ignore[attr-defined]
            else:
                keep.append((when, index))
        self._retired = keep

    # -- connections ----------------------------------------------------------------------------

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                log.warning("refused a connection from uid %s", uid)
                return
            conn.settimeout(IDLE_TIMEOUT)
            while not self.stop_event.is_set():
                try:
                    header = conn.recv(protocol.HEADER_BYTES, socket.MSG_WAITALL)
                except (TimeoutError, OSError):
                    return
                if not header:
                    return
                if len(header) < protocol.HEADER_BYTES:
                    return
                try:
                    size = protocol.frame_length(header, protocol.MAX_REQUEST_BYTES)
                    body = protocol.recv_exact(conn, size)
                except protocol.ProtocolError as e:
                    _send(conn, error_reply("bad_frame", str(e)))
                    return
                except (TimeoutError, OSError):
                    return
                try:
                    reply = self._pool.submit(self.handle_bytes, body).result()
                except RuntimeError:  # the pool is shut down: we are stopping
                    return
                try:
                    _send(conn, reply)
                except OSError:
                    return
        finally:
            with contextlib.suppress(OSError):
                conn.close()
            self._connections.release()

    def handle_bytes(self, body: bytes) -> dict:
        try:
            req = msgpack.unpackb(body, raw=False, strict_map_key=True, max_str_len=
                                  protocol.MAX_REQUEST_BYTES, max_bin_len=0,
                                  max_array_len=1024, max_map_len=64)
        except Exception as e:
            return error_reply("bad_message", f"not a msgpack message: {type(e).__name__}")
        return self.handle(req)

    def handle(self, req: object) -> dict:
        if not isinstance(req, dict) or not isinstance(req.get("op"), str):
            return error_reply("bad_request", "a request is a map with a string 'op'")
        version = req.get("v", protocol.PROTOCOL_VERSION)
        if version != protocol.PROTOCOL_VERSION:
            return error_reply(
                "version_mismatch",
                f"the daemon speaks protocol {protocol.PROTOCOL_VERSION}, the client "
                f"{version!r}: restart the daemon (`notewell agent restart`)")
        handler = self.handlers.get(req["op"])
        if handler is None:
            return error_reply("unknown_op", f"unknown op {req['op'][:40]!r}; "
                               f"known: {', '.join(sorted(self.handlers))}")
        try:
            return {"ok": True, "result": handler(req)}
        except RequestError as e:
            return error_reply(e.code, str(e))
        except Exception as e:
            log.exception("op %s failed", req["op"])
            return error_reply("internal", f"{type(e).__name__}: {e}")

    # -- ops --------------------------------------------------------------------------------

    def _ready_engine(self) -> Engine:
        if self.state == "ready" and self.engine is not None:
            return self.engine
        if self.state == "error":
            raise RequestError("unavailable", self.problem or "the engine failed to start")
        raise RequestError("warming_up", "notewell is loading its model and index")

    def op_ping(self, req: dict) -> dict:
        return {"pong": True, "version": __version__, "protocol": protocol.PROTOCOL_VERSION,
                "state": self.state, "pid": os.getpid()}

    def op_status(self, req: dict) -> dict:
        base = {"state": self.state, "problem": self.problem, "pid": os.getpid(),
                "uptime": round(time.time() - self.started, 1), "version": __version__,
                "socket": paths.socket_path(), "last_reports": self.last_reports}
        if self.engine is not None:
            base.update(self.engine.status())
            base["state"] = self.state
        return base

    def op_search(self, req: dict) -> dict:
        query = _arg(req, "query", str, "")
        limit = _arg(req, "limit", int, 20)
        fmt = _arg(req, "format", str, "json")
        mode = _arg(req, "mode", str, "hybrid")
        if mode not in ("hybrid", "dense", "bm25"):
            raise RequestError("bad_args", "mode must be hybrid, dense or bm25")
        if fmt not in ("json", "alfred"):
            raise RequestError("bad_args", "format must be json or alfred")
        query = query[:MAX_QUERY_CHARS]
        limit = max(1, min(limit, MAX_LIMIT))
        result = self._ready_engine().search(query, limit=limit, mode=mode)
        if fmt == "alfred":
            return {"alfred": alfred.results_feedback(result.hits, result.notices, query)}
        return result.to_dict()

    def op_similar(self, req: dict) -> dict:
        note_id = _arg(req, "note_id", str, "")
        limit = max(1, min(_arg(req, "limit", int, 20), MAX_LIMIT))
        hits = self._ready_engine().similar(note_id, limit)
        return {"hits": [h.to_dict() for h in hits], "notices": []}

    def op_sync(self, req: dict) -> dict:
        engine = self._ready_engine()
        if _arg(req, "wait", bool, False):
            reports = engine.sync(should_stop=self.stop_event.is_set)
            return {"reports": [r.to_dict() for r in reports]}
        self.sync_now.set()
        return {"scheduled": True}

    def op_stop(self, req: dict) -> dict:
        threading.Timer(0.05, self.request_stop).start()
        return {"stopping": True}


def _arg(req: dict, name: str, kind: type, default):
    value = req.get(name, default)
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise RequestError("bad_args", f"'{name}' must be {kind.__name__}")
    return value


def error_reply(code: str, message: str) -> dict:
    return {"ok": False, "error": {"code": code, "message": message}}


def _send(conn: socket.socket, reply: dict) -> None:
    conn.sendall(protocol.frame(msgpack.packb(reply, use_bin_type=True)))


def _refuse(conn: socket.socket, code: str, message: str) -> None:
    with contextlib.suppress(OSError):
        conn.settimeout(1.0)
        _send(conn, error_reply(code, message))
    with contextlib.suppress(OSError):
        conn.close()


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
    os.pwrite(fd, str(os.getpid()).encode(), 0)
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
    sock.listen(128)
    return sock


def peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid, from the kernel (SO_PEERCRED / LOCAL_PEERCRED)."""
    try:
        if hasattr(socket, "SO_PEERCRED"):
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                    struct.calcsize("3i"))
            return struct.unpack("3i", creds)[1]
        if sys.platform == "darwin":
            sol_local, local_peercred = 0, 0x001
            creds = conn.getsockopt(sol_local, local_peercred, struct.calcsize("IIh16I"))
            return struct.unpack_from("II", creds)[1]
    except OSError:
        return -1
    return None


def run(config: Config, poll_seconds: float = 5.0,
        engine_factory: Callable[[Config], Engine] | None = None) -> int:
    daemon = Daemon(config, engine_factory=engine_factory, poll_seconds=poll_seconds)
    try:
        daemon.start()
    except AlreadyRunning as e:
        print(f"notewell: {e}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, daemon.request_stop)
    signal.signal(signal.SIGINT, daemon.request_stop)
    with contextlib.suppress(AttributeError):
        signal.signal(signal.SIGHUP, lambda *_: daemon.sync_now.set())
    daemon.serve_forever()
    return 0
