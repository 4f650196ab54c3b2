"""What the daemon answers: the dispatch of a request to its op.

The read ops (``search``, ``similar``, ``note``, ``tags``, ``recent``, ``status``) are
answered by ``api.OPS_TABLE``, as the CLI answers them without a daemon; here they get
what only the daemon knows (``behind``, ``rebuilding``, its pid and uptime in
``status``) and the transport: Alfred's format, the prepared answers of a search
(``response_cache``, kept only for an answer ``api.Searched.timeless``) and the newest
query Alfred asked for (the stale-Enter guard). Owns the other ops: ``ping``,
``sync_now`` (a sync round, waited for, with progress frames), ``schedule_sync`` (one
soon), their old names ``index`` and ``sync`` (one release), ``stop``, ``restart`` (into
the config and model on disk: ``notewell model use``), both sending their reply before
they stop, ``latest_query`` and ``mcp`` (the switch to an MCP session); the errors
(``api.refusal``, an ``api.OpError``) as error replies with their codes, the protocol
version check, and the worker pool that runs the ops touching the index (the rest answer
on the connection's thread). An op that fails unexpectedly is logged with its type and
place, never with the query, unless ``debug_log`` is set.

Also the notewell version check: a client of another version makes a daemon older than
its installation on disk restart itself into the new one (``_other_version``).

May import ``engine``, ``api`` and what is below them, ``launcher.alfred`` (it renders
Alfred's JSON), ``wire``, and of ``serve``: ``background`` (the engine and its state),
``response_cache`` and ``transport.error_reply`` (the reply envelope).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import CancelledError, ThreadPoolExecutor

import notewell
from notewell import __version__, api, installed_version
from notewell import config as config_file
from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.config import Config
from notewell.engine import Engine, ReadView
from notewell.index import failures
from notewell.launcher import alfred, quicklook
from notewell.serve.background import Background, SyncError
from notewell.serve.response_cache import ResponseCache
from notewell.serve.transport import REPLIED, error_reply
from notewell.wire import paths, protocol, requests

log = logging.getLogger(__name__)

WORKERS = 4
# Ops that touch no index: answered on the connection's thread, so a ping answers while
# every worker is busy and `sync --wait` never holds a worker while it waits.
INLINE_OPS = frozenset({"ping", "stop", "restart", "schedule_sync", "sync_now", "sync",
                        "latest_query", "index", "mcp"})
# Ops given ``send``: ``sync_now`` sends progress frames ({"progress": event}) before its
# reply, ``stop`` and ``restart`` send their reply before they stop the daemon.
STREAMING_OPS = frozenset({"sync_now", "index", "stop", "restart"})
Send = Callable[[dict], None]
SENT = object()  # a handler's result when it has sent its reply itself: close


class Handlers:
    def __init__(self, config: Config, background: Background,
                 request_stop: Callable[[], None], clock: Clock = SYSTEM_CLOCK,
                 request_restart: Callable[[], None] | None = None) -> None:
        self.config = config
        self.background = background
        self.request_stop = request_stop
        # Stop, then run the installation on disk in this process (``serve.daemon``).
        self.request_restart = request_restart
        # (mtime of the package's __init__.py, the version it says), replaced whole: the
        # Alfred workflow carries its own client, which asks as the old version after an
        # upgrade in place, so the files on disk are looked at too (``_upgraded``).
        self._on_disk: tuple[int, str | None] = (0, __version__)
        self._restart_lock = threading.Lock()  # taken once, by the first to restart
        self.clock = clock
        self.started = clock.time()
        # The newest query an Alfred client asked for: the stale-Enter guard compares an
        # actioned item's query with it (``launcher.alfred_actions``). Kept here rather
        # than written by the client, which would cost every keystroke a file write.
        self.latest_alfred_query: str | None = None
        self._responses = ResponseCache(clock=clock)
        # How many MCP sessions are open; None while the MCP server is not loaded (the
        # daemon wires this in: ``serve.daemon``).
        self.mcp_sessions: Callable[[], int | None] = lambda: None
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="notewell-worker")
        # The read ops are answered by ``api``; search and status add what only the
        # daemon knows, and search the transport (Alfred's format, prepared answers).
        self.ops: dict[str, Callable[..., object]] = {
            **{op: self._read(op) for op in api.OPS_TABLE},
            "search": self.op_search,
            "related": self.op_related,
            "status": self.op_status,
            "ping": self.op_ping,
            "sync_now": self.op_sync_now,
            "schedule_sync": self.op_schedule_sync,
            "index": self.op_sync_now,  # the old names, for one release (wire.requests)
            "sync": self.op_sync,
            "stop": self.op_stop,
            "restart": self.op_restart,
            "latest_query": self.op_latest_query,
            "mcp": self.op_mcp,
        }

    def answer(self, req: object, send: Send | None = None) -> dict | object | None:
        """The reply to one decoded request; None when the daemon is stopping or the
        client has gone. ``send`` sends a frame: progress before the reply (for
        ``STREAMING_OPS``), and a read's reply itself (then ``REPLIED``)."""
        op = req.get("op") if isinstance(req, dict) else None
        if isinstance(op, str) and op in INLINE_OPS:  # an op of another type: handle says so
            return self.handle(req, send)
        try:
            # Quick Look's pages wait while a read is answered and its reply sent: their
            # writes, and their hold on the interpreter, would slow both.
            with quicklook.writer().answering():
                reply = self._pool.submit(self.handle, req, send).result()
                if reply is None or send is None:
                    return reply
                send(reply)
                return REPLIED
        except OSError:  # the client has gone before its reply
            return None
        except (RuntimeError, CancelledError):  # the pool is shut down: we are stopping
            return None

    def shutdown(self) -> list[threading.Thread]:
        """Take no more work; returns the workers, which may still be running a request."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        return list(getattr(self._pool, "_threads", ()))

    def handle(self, req: object, send: Send | None = None) -> dict | None:
        """The reply to one request; None when it was sent already through ``send`` (a
        stop or restart follows: the connection closes)."""
        if not isinstance(req, dict) or not isinstance(req.get("op"), str):
            return error_reply("bad_request", "a request is a map with a string 'op'")
        asker = req.get("notewell")
        if isinstance(asker, str) and (asker != __version__ or self._upgraded()):
            return self._other_version(asker, send)
        version = req.get("v", protocol.PROTOCOL_VERSION)
        if version != protocol.PROTOCOL_VERSION:
            return error_reply(
                "version_mismatch",
                f"the daemon speaks protocol {protocol.PROTOCOL_VERSION}, the client "
                f"{version!r}: restart the daemon (`notewell agent restart`)")
        handler = self.ops.get(req["op"])
        if handler is None:
            return error_reply("unknown_op", f"unknown op {req['op'][:40]!r}; "
                               f"known: {', '.join(sorted(self.ops))}")
        try:
            if req["op"] in STREAMING_OPS:
                result = handler(req, send)
                return None if result is SENT else _ok(result)
            with self._one_generation(req["op"]) as view:
                # An op on the index reads through the request's one view.
                return _ok(handler(req) if view is None else handler(req, view))
        except (api.OpError, SyncError) as e:  # refused, or a sync waited for failed
            return error_reply(e.code, str(e))
        except Exception as e:
            if failures.damaged(e):  # the sync thread checks the file and rebuilds it
                self.background.report_damage()
                log.error("op %s read a damaged index: %s", req["op"], type(e).__name__)
                return error_reply("damaged", "the index is damaged: notewell is moving "
                                   "it aside and rebuilding it from your notes; results "
                                   "return as it fills")
            refused = api.refusal(e)  # a bad argument or date, an unknown note
            if refused is not None:
                return error_reply(refused.code, str(refused))
            # The message may quote the query or a note (an SQLite error does): it goes
            # to the asking client only; the log gets the type and where it happened.
            if self.config.debug_log:
                log.exception("op %s failed", req["op"])
            else:
                where = "".join(traceback.format_tb(e.__traceback__, limit=-3))
                log.error("op %s failed: %s at\n%s", req["op"], type(e).__name__, where)
            return error_reply("internal", f"{type(e).__name__}: {e}")

    def _upgraded(self) -> bool:
        """Whether the package on disk is another version than this process (one stat per
        request; the file is read again only when it changed)."""
        try:
            stamp = os.stat(notewell.__file__).st_mtime_ns
        except OSError:
            return False
        if stamp != self._on_disk[0]:
            self._on_disk = (stamp, installed_version())
        return self._on_disk[1] not in (None, __version__)

    def _other_version(self, asker: str, send: Send | None) -> dict | None:
        """A client of another notewell version asked. After an upgrade in place the
        files on disk are newer than this process: restart into them (once; the client
        waits). Otherwise the client belongs to another installation, and the reply says
        what to run."""
        on_disk = installed_version()
        if on_disk is not None and on_disk != __version__ and self.request_restart:
            reply = error_reply("restarting", f"notewell was updated to {on_disk}; the "
                                f"daemon (still {__version__}) is restarting")
            if not self._restart_lock.acquire(blocking=False):  # two workers may ask
                return reply
            log.info("notewell %s is installed (this daemon runs %s): restarting",
                     on_disk, __version__)
            return None if _then(reply, self.request_restart, send) else reply
        return error_reply(
            "other_installation",
            f"the launcher runs notewell {asker}, the daemon notewell {__version__} "
            f"({sys.executable}): "
            "run `notewell agent install` with the notewell you use, then "
            "`notewell alfred build`")

    def _one_generation(self, op: str) -> contextlib.AbstractContextManager[ReadView | None]:
        """An op on the index reads through one view from here to its reply
        (``Engine.reading``): a switch meanwhile neither mixes two files in its answer nor
        closes the one it reads, and each read's side (a copy or SQLite) is decided once.
        The inline ops hold none (``sync`` may wait long)."""
        engine = self.background.engine
        if op in INLINE_OPS or engine is None:
            return contextlib.nullcontext()
        return engine.reading()

    def _ready_view(self, view: ReadView | None) -> ReadView:
        self._ready_engine()
        if view is None:
            raise api.OpError("warming_up", "notewell is loading its model and index")
        return view

    def _ready_engine(self) -> Engine:
        bg = self.background
        if bg.state in ("ready", "rebuilding") and bg.engine is not None:
            return bg.engine
        if bg.state == "error":
            raise api.OpError("unavailable", bg.problem or "the engine failed to start")
        raise api.OpError("warming_up", "notewell is loading its model and index")

    # -- ops --------------------------------------------------------------------------------

    def op_ping(self, req: dict) -> dict:
        return {"pong": True, "version": __version__, "protocol": protocol.PROTOCOL_VERSION,
                "state": self.background.state, "pid": os.getpid(), "started": self.started}

    def op_status(self, req: dict, view: ReadView | None = None) -> dict:
        bg = self.background
        base = {"state": bg.state, "problem": bg.problem, "pid": os.getpid(),
                "uptime": round(self.clock.time() - self.started, 1), "version": __version__,
                "socket": paths.socket_path(), "last_reports": bg.last_reports,
                "mcp_sessions": self.mcp_sessions(), "disk_full": bg.disk_full}
        if bg.engine is not None:
            if view is not None:
                base.update(api.op_status(view, requests.request_args("status", req)))
                errors = bg.source_errors()  # newer than the index's record (a full disk)
                for src in base["sources"]:
                    src["last_error"] = errors.get(src["name"], src["last_error"])
            base["rebuilding"] = bg.rebuilding()
            if bg.watcher is not None:
                base["watching"] = bg.watcher.mode
            lag = bg.lag()
            base["behind"] = ({"minutes": lag["minutes"], "sources": lag["sources"]}
                              if lag else None)
        return base

    def op_search(self, req: dict, view: ReadView | None = None) -> dict:
        args = requests.request_args("search", req)  # a long query is cut, not refused
        query, fmt = args["query"], args["format"]
        if fmt == "alfred":
            self.latest_alfred_query = query
        view = self._ready_view(view)
        lag = self.background.lag()
        rebuilding = self.background.rebuilding()
        # A repeated query on an unchanged index gets its prepared answer (response_cache);
        # whether one is kept is decided once the search has read the query (``timeless``).
        key = (query, args["limit"], args["mode"], fmt, repr(lag), repr(rebuilding),
               repr(api.filters(args)))
        version = self._responses.version(view.index_path)
        cached = self._responses.get(key, version) if version else None
        if cached is not None:
            return cached
        # JSON clients (Raycast, MCP, the CLI) show a note's next best passages too; the
        # keystroke's Alfred list needs only the one it shows.
        found = api.searched(view, args, passages=1 if fmt == "alfred" else None)
        if self.config.debug_log and found.result:  # queries are private: logged if asked
            log.info("search %r (%s): %d hits", query, args["mode"], len(found.result.hits))
        if fmt == "alfred":
            out = {"alfred": _alfred(found, lag, rebuilding)}
        else:
            out = self._with_state(found.to_dict(), lag, rebuilding)
        if version and found.timeless:
            self._responses.put(key, version, out)
        return out

    @staticmethod
    def _with_state(out: dict, lag: dict | None, rebuilding: dict | None) -> dict:
        """A JSON answer with what only the daemon knows: a rebuild going on, and how far
        the index lags its sources (absent when neither, as without a daemon)."""
        if rebuilding:
            out["rebuilding"] = rebuilding
        if lag:
            out["behind"] = {"minutes": lag["minutes"], "sources": lag["sources"],
                             "error": list(lag["error"]) if lag["error"] else None}
        return out

    def op_related(self, req: dict, view: ReadView | None = None) -> dict:
        """The table's ``related``, or for Alfred (the Universal Action, the Hotkey) its
        items."""
        args = requests.request_args("related", req)
        view = self._ready_view(view)
        if args["format"] != "alfred":
            return api.op_related(view, args)
        result = api.related(view, args)
        return {"alfred": alfred.related_feedback(result.hits, result.notices)}

    def op_latest_query(self, req: dict) -> dict:
        return {"query": self.latest_alfred_query}

    def _read(self, op: str) -> Callable[..., dict]:
        """The handler of a read op of ``api.OPS_TABLE``: its arguments checked, then
        answered from the request's one view (``_one_generation``)."""
        def handle(req: dict, view: ReadView | None = None) -> dict:
            args = requests.request_args(op, req)
            return api.OPS_TABLE[op](self._ready_view(view), args)

        return handle

    def op_schedule_sync(self, req: dict) -> dict:
        """A sync round soon (``notewell sync`` without waiting, SIGHUP does the same)."""
        requests.request_args("schedule_sync", req)
        self._ready_engine()
        self.background.request_sync()
        return {"scheduled": True}

    def op_sync(self, req: dict) -> dict:
        """The old name (``schedule_sync``; with ``wait``, a round waited for): kept for
        one release."""
        if not requests.request_args("sync", req)["wait"]:
            return self.op_schedule_sync({})
        self._ready_engine()
        # The background thread runs it: one writer, and no worker held meanwhile.
        return {"reports": self.background.wait_for_sync()}

    def op_sync_now(self, req: dict, send: Send | None = None) -> dict:
        """``notewell index [--rebuild]`` and ``notewell sync``: a sync round, waited for;
        the sync thread, the index's one writer, does the work, even if the engine is
        still loading; with ``progress``, its progress events come first as
        ``{"progress": event}`` frames."""
        args = requests.request_args("sync_now", req)
        bg = self.background
        if bg.state == "error":  # nothing here writes: the command does, under the lock
            raise api.OpError("unavailable", bg.problem or "the engine failed to start")
        try:
            on_disk = config_file.load()
        except config_file.ConfigError as e:
            raise api.OpError("bad_config", str(e)) from None
        if dataclasses.asdict(on_disk) != dataclasses.asdict(self.config):
            raise api.OpError("config_changed", f"{on_disk.path} changed since the daemon "
                               "started; restart it so it reads it (`notewell agent "
                               "restart`, or stop and start `notewell serve`), then run "
                               "this again")
        relay = _relay(send) if args["progress"] and send else None
        return {"reports": bg.wait_for_sync(rebuild=args["rebuild"], on_progress=relay)}

    def op_mcp(self, req: dict) -> dict:
        """The switch to MCP (``notewell mcp``): after this ok, ``transport`` hands the
        connection to an MCP session."""
        return {"mcp": True, "version": __version__}

    def op_stop(self, req: dict, send: Send | None = None) -> object:
        result = {"stopping": True}
        return SENT if _then(_ok(result), self.request_stop, send) else result

    def op_restart(self, req: dict, send: Send | None = None) -> object:
        """Stop, then run the same command again in this process: it reads config.toml
        and loads the model anew (``notewell model use`` asks, after switching them)."""
        if self.request_restart is None:
            raise api.OpError("unavailable", "this daemon cannot restart itself; stop it "
                               "and start it again")
        result = {"restarting": True}
        return SENT if _then(_ok(result), self.request_restart, send) else result


def _alfred(found: api.Searched, lag: dict | None, rebuilding: dict | None) -> str:
    """A search's answer as Alfred's JSON, with the daemon's state in it."""
    if found.result is None:  # "#" or "#wor": the tags, not a search
        return alfred.tags_feedback(found.tags or [], found.query)
    # Quick Look's pages are named now and written after the answer is rendered, by
    # their own thread: the keystroke never waits on the disk.
    previews = quicklook.writer().job(found.result.hits)
    out = alfred.results_feedback(
        found.result.hits, found.result.notices, found.query, lag, rebuilding=rebuilding,
        new_notes=found.new_notes, dated=found.result.query.dated, previews=previews.paths)
    quicklook.writer().submit(previews)
    return out


def _ok(result: dict) -> dict:
    return {"ok": True, "result": result}


def _then(reply: dict, stop: Callable[[], None], send: Send | None) -> bool:
    """Send ``reply``, then ``stop``: the stop never cuts its own reply short, and no
    delay is guessed for it. True when sent (the caller closes the connection); without
    ``send`` (a caller in this process) the caller returns the reply itself."""
    if send is not None:
        with contextlib.suppress(OSError):  # the client has gone: stop all the same
            send(reply)
    stop()
    return send is not None


def _relay(send: Send) -> Callable[[dict], None]:
    """Progress events to the client as frames, until it has gone (the work goes on)."""
    gone = False

    def emit(event: dict) -> None:
        nonlocal gone
        if not gone:
            try:
                send({"progress": event})
            except OSError:
                gone = True

    return emit
