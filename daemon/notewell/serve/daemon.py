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
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import CancelledError, ThreadPoolExecutor

import msgpack

from notewell import __version__
from notewell.config import Config
from notewell.engine import Engine
from notewell.index import store
from notewell.index.database import Index, IndexProblem, connect
from notewell.ingest.watch import ChangeWatcher
from notewell.launcher import alfred
from notewell.memory import limit_heaps, release_memory
from notewell.search.query import MAX_QUERY_CHARS
from notewell.serve.response_cache import ResponseCache
from notewell.wire import paths, protocol

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
IDLE_TIMEOUT = 10.0  # seconds a connection may sit between requests
FRAME_TIMEOUT = 2.0  # seconds from a request's first byte to its last, however it trickles
WORKERS = 4
MAX_LIMIT = 200
STOP_BUDGET = 0.6  # seconds a SIGTERM waits for the sync and requests before exiting
# Ops that touch no index: answered on the connection's thread, so a ping answers while
# every worker is busy and `sync --wait` never holds a worker while it waits.
INLINE_OPS = frozenset({"ping", "stop", "sync", "latest_query"})
BEHIND_AFTER = 60.0  # seconds of unapplied changes (or failing syncs) before results say so


class RequestError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class AlreadyRunning(Exception):
    pass


class Daemon:
    def __init__(self, config: Config, engine_factory: Callable[[Config], Engine] | None = None,
                 poll_seconds: float = 5.0, debounce: float = 1.0, use_events: bool = True
                 ) -> None:
        self.config = config
        self.engine_factory = engine_factory or (lambda cfg: Engine(cfg))
        self.poll_seconds = poll_seconds
        self.debounce = debounce
        self.use_events = use_events
        self.watcher: ChangeWatcher | None = None
        # Per source: since when the index has lagged it (changes taken for a sync that has
        # not succeeded yet, or failing syncs), and the last sync error.
        self.behind: dict[str, float] = {}
        self.errors: dict[str, str] = {}
        self._failures: dict[str, int] = {}
        self.engine: Engine | None = None
        self.state = "starting"
        self.problem: str | None = None
        self.stop_event = threading.Event()
        self.sync_now = threading.Event()
        self.last_reports: list[dict] = []
        self.started = time.time()
        self._listener: socket.socket | None = None
        self._lock_fd: int | None = None
        self._sync_thread: threading.Thread | None = None
        self._connections = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="notewell-worker")
        self._retired: list[tuple[float, Index]] = []  # replaced indexes, closed later
        self._responses = ResponseCache(connect)
        # The newest query an Alfred client asked for: the stale-Enter guard compares an
        # actioned item's query with it (``launcher.alfred_actions``). Kept here rather
        # than written by the client, which would cost every keystroke a file write.
        self.latest_alfred_query: str | None = None
        # Rounds of the background sync: `sync --wait` waits for one that starts after it
        # asked, so the index has one writer and the request holds no worker meanwhile.
        self._rounds = threading.Condition()
        self._round_started = 0
        self._round_done = 0
        self._stop_at: float | None = None
        # Written to by ``request_stop`` (signal-safe) to wake the accept loop at once:
        # shutting a listening AF_UNIX socket down does not wake a waiting poll on Linux.
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self.handlers: dict[str, Callable[[dict], object]] = {
            "ping": self.op_ping,
            "status": self.op_status,
            "search": self.op_search,
            "similar": self.op_similar,
            "sync": self.op_sync,
            "stop": self.op_stop,
            "latest_query": self.op_latest_query,
        }

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Take the lock, bind the socket, and start loading the engine in the background."""
        check_parent(paths.ensure_private_dir(paths.runtime_dir()))
        self._lock_fd = acquire_lock(paths.lock_path())
        self._listener = bind_socket(paths.socket_path())
        self._sync_thread = threading.Thread(target=self._background, name="notewell-sync",
                                             daemon=True)
        self._sync_thread.start()

    def serve_forever(self) -> bool:
        """Accept until stopped; returns ``shutdown()``'s verdict."""
        assert self._listener is not None
        self._listener.setblocking(False)
        log.info("notewell %s listening on %s (pid %d)", __version__, paths.socket_path(),
                 os.getpid())
        waiter = selectors.DefaultSelector()
        waiter.register(self._listener, selectors.EVENT_READ)
        waiter.register(self._wake_r, selectors.EVENT_READ)
        while not self.stop_event.is_set():
            waiter.select()
            if self.stop_event.is_set():
                break
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
        return self.shutdown()

    def shutdown(self) -> bool:
        """Stop within ``STOP_BUDGET`` of the request: socket first (clients see "not
        running" at once), then wait for the sync and in-flight requests. A sync stops
        between model calls and every write is one transaction, so whatever is still
        running when the budget is spent can be abandoned: SQLite rolls back an
        uncommitted transaction, exactly as after a crash. Returns True if everything
        finished (the index is closed), False if the caller should exit regardless."""
        self.stop_event.set()
        self.sync_now.set()
        deadline = (self._stop_at or time.monotonic()) + STOP_BUDGET
        sock_path = paths.socket_path()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(sock_path)
        self._pool.shutdown(wait=False, cancel_futures=True)
        busy = [t for t in (self._sync_thread,
                            *getattr(self._pool, "_threads", ())) if t is not None]
        for t in busy:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        finished = not any(t.is_alive() for t in busy)
        if self.engine is not None and finished:
            try:
                self.engine.close()
            except Exception:
                log.exception("closing the index failed")
        elif not finished:
            log.warning("stopping with a sync or request still running; it is rolled back")
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        return finished

    def request_stop(self, *_: object) -> None:
        if self._stop_at is None:
            self._stop_at = time.monotonic()
        self.stop_event.set()
        self.sync_now.set()  # wake the sync thread from its sleep
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)

    def _background(self) -> None:
        try:
            self.state = "warming"
            self.engine = self.engine_factory(self.config)
            # A damaged index was moved aside for an empty one: say so until it is full.
            self.state = "rebuilding" if self.engine.index.recovered_from else "ready"
            log.info("engine ready: %s", self.engine.embedder.fingerprint())
        except IndexProblem as e:
            self.state, self.problem = "error", str(e)
            log.error("%s", e)
            return
        except Exception as e:  # keep answering, with the reason, rather than dying
            self.state, self.problem = "error", f"{type(e).__name__}: {e}"
            log.exception("engine failed to start")
            return
        # The in-memory vector copy loads in the background now, so the first keystroke
        # does not pay for it (index.Index.warm_vectors).
        with contextlib.suppress(Exception):
            self.engine.index.warm_vectors()
        # Baselines first, then one full sync: a change made during that sync is seen.
        self.watcher = ChangeWatcher(self.engine.sources, debounce=self.debounce,
                                     poll_seconds=self.poll_seconds, use_events=self.use_events,
                                     on_change=self.sync_now.set)
        try:
            self.watcher.start()
            log.info("watching sources: %s", ", ".join(
                f"{n} ({m})" for n, m in self.watcher.mode.items()) or "none")
        except Exception:
            log.exception("change detection failed to start; syncing every %.0f s",
                          self.poll_seconds)
            self.watcher = None
        self._sync_once()
        # The keyword copy after that first sync, not before: built earlier it would hold
        # an index the sync is still changing (FTS5 answers meanwhile).
        with contextlib.suppress(Exception):
            self.engine.index.warm_keywords()
        while not self.stop_event.is_set():
            # Sleep until a debounced change is due, a sync is asked for, or (at the latest)
            # poll_seconds, to pick up a rebuilt index.
            wait = self.watcher.next_due_in() if self.watcher else None
            self.sync_now.wait(self.poll_seconds if wait is None else min(wait, self.poll_seconds))
            self.sync_now.clear()
            if self.stop_event.is_set():
                break
            # Hand back what queries freed: glibc keeps it per thread (bench/memory.py:
            # 125 MB of 570 at 100k chunks under load); about 4 ms, at most every poll.
            release_memory()
            # Notes a change of the chunks, and rebuilds the keyword copy once they have
            # been still for a while, even when nobody is searching.
            with contextlib.suppress(Exception):
                self.engine.index.keywords()
            if self.watcher is None:
                self._sync_once()
                continue
            due = self.watcher.take_due()
            if due:
                self._sync_once(due)
            else:
                self._switch_generation()
                self._close_retired()
        if self.watcher is not None:
            self.watcher.stop()

    def request_sync(self) -> None:
        """Sync every source now, changed or not (``notewell sync``, SIGHUP)."""
        if self.watcher is not None:
            self.watcher.force()
        self.sync_now.set()

    def _switch_generation(self) -> None:
        engine = self.engine
        assert engine is not None
        newer = engine.newer_generation()
        if newer:
            log.info("switching to rebuilt index %s", newer)
            old = engine.index
            # Queries may be running on the old file: it is closed (and deleted) later.
            engine.reopen(newer, close_old=False)
            self._retired.append((time.monotonic(), old))

    def _sync_once(self, due: dict[str, float] | None = None) -> None:
        """Sync the sources ``due`` (name -> when its change was first seen), or all of
        them (as of now)."""
        engine = self.engine
        assert engine is not None
        reports_before = self._begin_round()
        only = set(due) if due is not None else None
        names = only if only is not None else {s.name for s in engine.sources}
        now = time.time()
        for name in names:
            first = (due or {}).get(name, now)
            self.behind[name] = min(self.behind.get(name, first), first)
        try:
            self._switch_generation()
            reports = engine.sync(should_stop=self.stop_event.is_set, only=only)
            self.last_reports = [r.to_dict() for r in reports]
            self._note_reports(reports)
            for r in reports:
                if r.changed or r.error:
                    log.info("sync %s: +%d ~%d -%d, %d chunks embedded%s", r.source, r.added,
                             r.updated, r.deleted, r.embedded,
                             f", error: {r.error}" if r.error else "")
        except Exception as e:
            for name in names:
                self.errors[name] = f"{type(e).__name__}: {e}"
            log.exception("sync failed; will retry")
            self._retry_later(names)
        self._close_retired()
        self._end_round(reports_before, complete=names >= {s.name for s in engine.sources})

    def _retry_later(self, names: set[str] | list[str]) -> None:
        if self.watcher is None:
            return
        for name in names:
            self._failures[name] = self._failures.get(name, 0) + 1
            delay = min(60.0, self.poll_seconds * 2 ** min(self._failures[name] - 1, 4))
            self.watcher.mark_later([name], delay)

    def _note_reports(self, reports: list) -> None:
        for r in reports:
            if r.error:
                self.errors[r.source] = r.error
                self.behind.setdefault(r.source, time.time())
                self._retry_later([r.source])
            elif r.pending:
                self.behind.setdefault(r.source, time.time())
            else:
                self.errors.pop(r.source, None)
                self.behind.pop(r.source, None)
                self._failures.pop(r.source, None)

    def lag(self) -> dict | None:
        """How far behind its sources the index is, once that exceeds ``BEHIND_AFTER``:
        ``minutes``, the ``sources`` concerned and the last ``error`` among them."""
        since = dict(self.behind)
        if self.watcher is not None:
            for name, t in self.watcher.dirty_since().items():
                since[name] = min(t, since.get(name, t))
        now = time.time()
        late = {n: t for n, t in since.items() if now - t >= BEHIND_AFTER}
        if not late:
            return None
        errors = {n: self.errors[n] for n in late if n in self.errors}
        return {"minutes": int((now - min(late.values())) // 60),
                "sources": sorted(late),
                "error": next(iter(errors.items()), None)}

    def _close_retired(self) -> None:
        # Old index connections may still be in use by a query that started before the
        # switch; they are closed a while later, when no query can still hold them.
        now = time.monotonic()
        keep = []
        closed = False
        for when, index in self._retired:
            if now - when > 30:
                with contextlib.suppress(Exception):
                    index.close()
                closed = True
            else:
                keep.append((when, index))
        self._retired = keep
        if closed and not keep and self.engine is not None:
            with contextlib.suppress(OSError):
                store.remove_old(self.engine.index_dir, keep=self.engine.index.path)

    def _begin_round(self) -> list[dict]:
        with self._rounds:
            self._round_started += 1
        return self.last_reports

    def _end_round(self, reports_before: list[dict], complete: bool) -> None:
        # ``_sync_once`` replaces ``last_reports`` only when the sync ran to its end.
        ran = self.last_reports is not reports_before
        if (self.state == "rebuilding" and ran and complete and not self.stop_event.is_set()
                and not any(r.get("pending") for r in self.last_reports)):
            self.state = "ready"
            log.info("index rebuilt after recovery")
        with self._rounds:
            self._round_done = self._round_started
            self._rounds.notify_all()

    def wait_for_sync(self, timeout: float | None = None) -> list[dict]:
        """Ask for a sync of every source and wait until one that started after this call
        has finished; returns its reports. Raises ``RequestError`` if it failed."""
        with self._rounds:
            target = self._round_started + 1
        before = self.last_reports
        self.request_sync()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._rounds:
            while self._round_done < target:
                if self.stop_event.is_set():
                    raise RequestError("stopping", "notewell is stopping; the sync will "
                                       "resume when it starts again")
                if deadline is not None and time.monotonic() > deadline:
                    raise RequestError("timeout", "the sync is still running; see "
                                       "`notewell status` for progress")
                thread = self._sync_thread
                if thread is None or not thread.is_alive():
                    raise RequestError("unavailable", "the sync thread has stopped; see the "
                                       "log, then restart the daemon")
                self._rounds.wait(0.25)
        if self.last_reports is before:
            errors = "; ".join(f"{k}: {v}" for k, v in self.errors.items())
            raise RequestError("sync_failed", errors or "the sync failed; see the log")
        return self.last_reports

    # -- connections ----------------------------------------------------------------------------

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            uid = peer_uid(conn)
            if uid != os.getuid():
                log.warning("refused a connection from uid %s", uid)
                return
            while not self.stop_event.is_set():
                try:
                    first = _recv_until(conn, 1, time.monotonic() + IDLE_TIMEOUT)
                except (TimeoutError, OSError):
                    return  # idle too long between requests
                if not first:
                    return  # closed between requests: the normal end
                # A whole frame must follow its first byte within FRAME_TIMEOUT: a per-recv
                # timeout would let a client holding a slot send one byte every few seconds.
                deadline = time.monotonic() + FRAME_TIMEOUT
                try:
                    header = first + _recv_until(conn, protocol.HEADER_BYTES - 1, deadline,
                                                 eof_ok=False)
                    size = protocol.frame_length(header, protocol.MAX_REQUEST_BYTES)
                    body = _recv_until(conn, size, deadline, eof_ok=False)
                except protocol.ProtocolError as e:
                    _refuse(conn, "bad_frame", str(e))
                    return
                except TimeoutError:
                    _refuse(conn, "timeout",
                            f"a request must arrive whole within {FRAME_TIMEOUT:g} s")
                    return
                except OSError:
                    return
                reply = self._answer(body)
                if reply is None:
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

    def _answer(self, body: bytes) -> dict | None:
        """The reply to one request body; None when the daemon is stopping."""
        req, bad = decode_request(body)
        if bad is not None:
            return bad
        if isinstance(req, dict) and req.get("op") in INLINE_OPS:
            return self.handle(req)
        try:
            return self._pool.submit(self.handle, req).result()
        except (RuntimeError, CancelledError):  # the pool is shut down: we are stopping
            return None

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
            # The message may quote the query or a note (an SQLite error does): it goes
            # to the asking client only; the log gets the type and where it happened.
            if self.config.debug_log:
                log.exception("op %s failed", req["op"])
            else:
                where = "".join(traceback.format_tb(e.__traceback__, limit=-3))
                log.error("op %s failed: %s at\n%s", req["op"], type(e).__name__, where)
            return error_reply("internal", f"{type(e).__name__}: {e}")

    # -- ops --------------------------------------------------------------------------------

    def _ready_engine(self) -> Engine:
        if self.state in ("ready", "rebuilding") and self.engine is not None:
            return self.engine
        if self.state == "error":
            raise RequestError("unavailable", self.problem or "the engine failed to start")
        raise RequestError("warming_up", "notewell is loading its model and index")

    def rebuilding(self) -> dict | None:
        """While a damaged index is being rebuilt: how far it got and where the damaged
        file was moved; None otherwise."""
        engine = self.engine
        if self.state != "rebuilding" or engine is None:
            return None
        notes = engine.index.db.execute("SELECT count(*) FROM notes").fetchone()[0]
        return {"notes": notes, "moved_to": engine.index.recovered_from}

    def op_ping(self, req: dict) -> dict:
        return {"pong": True, "version": __version__, "protocol": protocol.PROTOCOL_VERSION,
                "state": self.state, "pid": os.getpid()}

    def op_status(self, req: dict) -> dict:
        base = {"state": self.state, "problem": self.problem, "pid": os.getpid(),
                "uptime": round(time.time() - self.started, 1), "version": __version__,
                "socket": paths.socket_path(), "last_reports": self.last_reports}
        if self.engine is not None:
            base.update(self.engine.status())
            base["rebuilding"] = self.rebuilding()
            if self.watcher is not None:
                base["watching"] = self.watcher.mode
            lag = self.lag()
            base["behind"] = ({"minutes": lag["minutes"], "sources": lag["sources"]}
                              if lag else None)
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
        if fmt == "alfred":
            self.latest_alfred_query = query
        limit = max(1, min(limit, MAX_LIMIT))
        engine = self._ready_engine()
        lag = self.lag()
        rebuilding = self.rebuilding()
        # A repeated query on an unchanged index gets its prepared answer (response_cache).
        key = (query, limit, mode, fmt, repr(lag), repr(rebuilding))
        version = self._responses.version(engine.index.path)
        cached = self._responses.get(key, version) if version else None
        if cached is not None:
            return cached
        result = engine.search(query, limit=limit, mode=mode)
        if self.config.debug_log:  # queries are private: logged only when asked for
            log.info("search %r (%s): %d hits", query, mode, len(result.hits))
        if fmt == "alfred":
            out = {"alfred": alfred.results_feedback(result.hits, result.notices, query, lag,
                                                     rebuilding=rebuilding)}
        else:
            out = result.to_dict()
            if rebuilding:
                out["rebuilding"] = rebuilding
            if lag:
                out["behind"] = {"minutes": lag["minutes"], "sources": lag["sources"],
                                 "error": list(lag["error"]) if lag["error"] else None}
        if version:
            self._responses.put(key, version, out)
        return out

    def op_latest_query(self, req: dict) -> dict:
        return {"query": self.latest_alfred_query}

    def op_similar(self, req: dict) -> dict:
        note_id = _arg(req, "note_id", str, "")
        limit = max(1, min(_arg(req, "limit", int, 20), MAX_LIMIT))
        hits = self._ready_engine().similar(note_id, limit)
        return {"hits": [h.to_dict() for h in hits], "notices": []}

    def op_sync(self, req: dict) -> dict:
        self._ready_engine()
        if _arg(req, "wait", bool, False):
            # The background thread runs it: one writer, and no worker held meanwhile.
            return {"reports": self.wait_for_sync()}
        self.request_sync()
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


def decode_request(body: bytes) -> tuple[object, dict | None]:
    """(request, None), or (None, an error reply) for bytes that are not a message.
    The limits bound what a hostile frame can make us allocate."""
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=True,
                               max_str_len=protocol.MAX_REQUEST_BYTES, max_bin_len=0,
                               max_array_len=1024, max_map_len=64), None
    except Exception as e:
        return None, error_reply("bad_message", f"not a msgpack message: {type(e).__name__}")


def _recv_until(conn: socket.socket, n: int, deadline: float, eof_ok: bool = True) -> bytes:
    """Exactly ``n`` bytes by ``deadline`` (``TimeoutError`` otherwise). End of stream
    before the first byte returns b"" when ``eof_ok``; anywhere else it is a
    ``ProtocolError``."""
    buf = bytearray()
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        conn.settimeout(left)
        data = conn.recv(min(n - len(buf), 1 << 16))
        if not data:
            if eof_ok and not buf:
                return b""
            raise protocol.ProtocolError("connection closed mid-frame")
        buf += data
    return bytes(buf)


def _send(conn: socket.socket, reply: dict) -> None:
    conn.sendall(protocol.frame(msgpack.packb(reply, use_bin_type=True)))


def _refuse(conn: socket.socket, code: str, message: str) -> None:
    with contextlib.suppress(OSError):
        conn.settimeout(1.0)
        _send(conn, error_reply(code, message))
    with contextlib.suppress(OSError):
        conn.close()


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
    sock.listen(1024)  # the kernel caps it (Linux somaxconn 4096, macOS 128)
    return sock


def peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid, from the kernel (SO_PEERCRED / LOCAL_PEERCRED);
    -1 if the kernel would not say, None where we know no way to ask. Callers accept
    only their own uid, so both of those are refused."""
    try:
        if hasattr(socket, "SO_PEERCRED"):
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                    struct.calcsize("3i"))
            return struct.unpack("3i", creds)[1]
        if sys.platform == "darwin" or sys.platform.startswith("freebsd"):
            # struct xucred {u_int cr_version; uid_t cr_uid; short cr_ngroups; ...}
            sol_local, local_peercred = 0, 0x001
            creds = conn.getsockopt(sol_local, local_peercred, struct.calcsize("IIh16I"))
            return struct.unpack_from("II", creds)[1]
    except OSError:
        return -1
    return None


def run(config: Config, poll_seconds: float = 5.0,
        engine_factory: Callable[[Config], Engine] | None = None) -> int:
    limit_heaps()  # before the worker threads exist
    daemon = Daemon(config, engine_factory=engine_factory, poll_seconds=poll_seconds)
    # Handlers first: a SIGTERM that arrives while starting still removes the socket.
    signal.signal(signal.SIGTERM, daemon.request_stop)
    signal.signal(signal.SIGINT, daemon.request_stop)
    with contextlib.suppress(AttributeError):
        signal.signal(signal.SIGHUP, lambda *_: daemon.request_sync())
    try:
        daemon.start()
    except (AlreadyRunning, PermissionError) as e:
        print(f"notewell: {e}", file=sys.stderr)
        return 1
    if not daemon.serve_forever():
        # A thread is still inside a model call or a query. Its transaction, if any, is
        # uncommitted, which SQLite rolls back: leave now rather than keep launchd waiting.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
