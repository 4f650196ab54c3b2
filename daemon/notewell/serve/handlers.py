"""What the daemon answers: one handler per op, and the dispatch of a request to it.

Owns the ops (``ping``, ``status``, ``search``, ``similar``, ``sync``, ``stop``,
``restart`` (into the config and model on disk: ``notewell model use``), ``latest_query``,
``note``, ``tags``, ``recent``, ``index``, ``mcp``: the switch to an MCP session), their
errors (a bad argument, as ``wire.requests`` checks it for every path, a bad date, an
unknown note, a ``RequestError`` become an error reply with its code), the protocol
version check, the worker pool that runs the ops touching the index
(the rest answer on the connection's thread), the prepared answers of the search handler
(``response_cache``) and the newest query Alfred asked for (the stale-Enter guard). An op
that fails unexpectedly is logged with its type and place, never with the query, unless
``debug_log`` is set.

Also the notewell version check: a client of another version makes a daemon older than
its installation on disk restart itself into the new one (``_other_version``).

May import ``engine`` and what is below it, ``launcher.alfred`` (it renders Alfred's JSON),
``wire``, and of ``serve``: ``background`` (the engine and its state),
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
from notewell import __version__, installed_version
from notewell import config as config_file
from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.config import Config
from notewell.engine import Engine, HeadingNotFound, NoteNotFound
from notewell.launcher import alfred, quicklook
from notewell.search.dates import DateError
from notewell.search.query import parse
from notewell.serve.background import Background, SyncError
from notewell.serve.response_cache import ResponseCache
from notewell.serve.transport import error_reply
from notewell.wire import paths, protocol, requests

log = logging.getLogger(__name__)

WORKERS = 4
PASSAGES_PER_HIT = 3  # a note's best passages a JSON search lists (``Hit.passages``)
# Ops that touch no index: answered on the connection's thread, so a ping answers while
# every worker is busy and `sync --wait` never holds a worker while it waits.
INLINE_OPS = frozenset({"ping", "stop", "restart", "sync", "latest_query", "index", "mcp"})
# Ops that may send progress frames ({"progress": event}) before their reply.
STREAMING_OPS = frozenset({"index"})
Send = Callable[[dict], None]


class RequestError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _arg(req: dict, name: str, kind: type, default):
    value = req.get(name, default)
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise RequestError("bad_args", f"'{name}' must be {kind.__name__}")
    return value


def _filters(args: dict) -> dict:
    """The filters of checked search or recent arguments, as the engine takes them."""
    return {**{k: args[k] for k in requests.FILTERS}, "tags": tuple(args["tags"])}


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
        self.ops: dict[str, Callable[[dict], object]] = {
            "ping": self.op_ping,
            "status": self.op_status,
            "search": self.op_search,
            "similar": self.op_similar,
            "sync": self.op_sync,
            "stop": self.op_stop,
            "restart": self.op_restart,
            "latest_query": self.op_latest_query,
            "note": self.op_note,
            "tags": self.op_tags,
            "recent": self.op_recent,
            "index": self.op_index,
            "mcp": self.op_mcp,
        }

    def answer(self, req: object, send: Send | None = None) -> dict | None:
        """The reply to one decoded request; None when the daemon is stopping. ``send``
        sends a frame before the reply (progress, for ``STREAMING_OPS``)."""
        if isinstance(req, dict) and req.get("op") in INLINE_OPS:
            return self.handle(req, send)
        try:
            return self._pool.submit(self.handle, req).result()
        except (RuntimeError, CancelledError):  # the pool is shut down: we are stopping
            return None

    def shutdown(self) -> list[threading.Thread]:
        """Take no more work; returns the workers, which may still be running a request."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        return list(getattr(self._pool, "_threads", ()))

    def handle(self, req: object, send: Send | None = None) -> dict:
        if not isinstance(req, dict) or not isinstance(req.get("op"), str):
            return error_reply("bad_request", "a request is a map with a string 'op'")
        asker = req.get("notewell")
        if isinstance(asker, str) and (asker != __version__ or self._upgraded()):
            return self._other_version(asker)
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
                return {"ok": True, "result": handler(req, send)}  # type: ignore[call-arg]
            with self._one_generation(req["op"]):
                return {"ok": True, "result": handler(req)}
        except RequestError as e:
            return error_reply(e.code, str(e))
        except DateError as e:
            return error_reply("bad_date", str(e))
        except requests.BadArguments as e:  # the engine's ArgumentError too
            return error_reply(e.code, str(e))
        except (NoteNotFound, HeadingNotFound) as e:
            return error_reply("not_found", str(e.args[0]))
        except Exception as e:
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

    def _other_version(self, asker: str) -> dict:
        """A client of another notewell version asked. After an upgrade in place the
        files on disk are newer than this process: restart into them (once; the client
        waits). Otherwise the client belongs to another installation, and the reply says
        what to run."""
        on_disk = installed_version()
        if on_disk is not None and on_disk != __version__ and self.request_restart:
            if self._restart_lock.acquire(blocking=False):  # two workers may ask at once
                log.info("notewell %s is installed (this daemon runs %s): restarting",
                         on_disk, __version__)
                threading.Timer(0.05, self.request_restart).start()
            return error_reply("restarting", f"notewell was updated to {on_disk}; the "
                               f"daemon (still {__version__}) is restarting")
        return error_reply(
            "other_installation",
            f"the launcher runs notewell {asker}, the daemon notewell {__version__} "
            f"({sys.executable}): "
            "run `notewell agent install` with the notewell you use, then "
            "`notewell alfred build`")

    def _one_generation(self, op: str) -> contextlib.AbstractContextManager:
        """An op on the index holds one index generation from here to its reply
        (``Engine.reading``): a switch meanwhile neither mixes two files in its answer nor
        closes the one it reads. The inline ops hold none (``sync`` may wait long)."""
        engine = self.background.engine
        if op in INLINE_OPS or engine is None:
            return contextlib.nullcontext()
        return engine.reading()

    def _ready_engine(self) -> Engine:
        bg = self.background
        if bg.state in ("ready", "rebuilding") and bg.engine is not None:
            return bg.engine
        if bg.state == "error":
            raise RequestError("unavailable", bg.problem or "the engine failed to start")
        raise RequestError("warming_up", "notewell is loading its model and index")

    # -- ops --------------------------------------------------------------------------------

    def op_ping(self, req: dict) -> dict:
        return {"pong": True, "version": __version__, "protocol": protocol.PROTOCOL_VERSION,
                "state": self.background.state, "pid": os.getpid(), "started": self.started}

    def op_status(self, req: dict) -> dict:
        bg = self.background
        base = {"state": bg.state, "problem": bg.problem, "pid": os.getpid(),
                "uptime": round(self.clock.time() - self.started, 1), "version": __version__,
                "socket": paths.socket_path(), "last_reports": bg.last_reports,
                "mcp_sessions": self.mcp_sessions()}
        if bg.engine is not None:
            base.update(bg.engine.status())
            base["rebuilding"] = bg.rebuilding()
            if bg.watcher is not None:
                base["watching"] = bg.watcher.mode
            lag = bg.lag()
            base["behind"] = ({"minutes": lag["minutes"], "sources": lag["sources"]}
                              if lag else None)
        return base

    def op_search(self, req: dict) -> dict:
        args = requests.request_args("search", req)  # a long query is cut, not refused
        query, limit, fmt, mode = args["query"], args["limit"], args["format"], args["mode"]
        filters = _filters(args)
        if fmt == "alfred":
            self.latest_alfred_query = query
        engine = self._ready_engine()
        lag = self.background.lag()
        rebuilding = self.background.rebuilding()
        # A repeated query on an unchanged index gets its prepared answer (response_cache).
        # Relative dates ("7d") move with the clock: those answers are not kept.
        key = (query, limit, mode, fmt, repr(lag), repr(rebuilding), repr(filters))
        keep = not any(isinstance(filters[k], str)
                       for k in ("modified_after", "modified_before"))
        keep = keep and not parse(query).dates  # typed dates may be relative too
        version = self._responses.version(engine.index.path) if keep else None
        cached = self._responses.get(key, version) if version else None
        if cached is not None:
            return cached
        tags = engine.tag_completions(query) if not any(filters.values()) else None
        if tags is not None:  # "#" or "#wor": the tags, not a search
            out = ({"alfred": alfred.tags_feedback(tags, query)} if fmt == "alfred"
                   else {"hits": [], "notices": [], "tags": tags, "new_note": []})
            if version:
                self._responses.put(key, version, out)
            return out
        # JSON clients (Raycast, MCP, the CLI) show a note's next best passages too; the
        # keystroke's Alfred list needs only the one it shows.
        result = engine.search(query, limit=limit, mode=mode, **filters,
                               passages=1 if fmt == "alfred" else PASSAGES_PER_HIT)
        if self.config.debug_log:  # queries are private: logged only when asked for
            log.info("search %r (%s): %d hits", query, mode, len(result.hits))
        new_notes = engine.new_notes(query)
        if fmt == "alfred":
            # Quick Look's pages are named now and written after the answer is rendered,
            # by their own thread: the keystroke never waits on the disk.
            previews = quicklook.writer().job(result.hits)
            out = {"alfred": alfred.results_feedback(
                result.hits, result.notices, query, lag, rebuilding=rebuilding,
                new_notes=new_notes, dated=result.query.dated, previews=previews.paths)}
            quicklook.writer().submit(previews)
        else:
            out = result.to_dict()
            out["new_note"] = new_notes
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
        args = requests.request_args("similar", req)
        note_id = args["note_id"]
        engine = self._ready_engine()
        hits = engine.similar(note_id, args["limit"])
        if not hits and args["strict"] \
                and engine.index.reads.note_record(note_id) is None:
            raise NoteNotFound(f"no note with id {note_id[:200]!r}; note ids come from "
                               "search results (note_id)")
        return {"hits": [h.to_dict() for h in hits], "notices": []}

    def op_note(self, req: dict) -> dict:
        args = requests.request_args("note", req)
        return self._ready_engine().note(args["note_id"], heading=args["heading"],
                                         offset=args["offset"], max_chars=args["max_chars"])

    def op_tags(self, req: dict) -> dict:
        args = requests.request_args("tags", req)
        return {"tags": self._ready_engine().tags(args["prefix"])}

    def op_recent(self, req: dict) -> dict:
        args = requests.request_args("recent", req)
        return self._ready_engine().recent(args["limit"], **_filters(args)).to_dict()

    def op_sync(self, req: dict) -> dict:
        self._ready_engine()
        if _arg(req, "wait", bool, False):
            # The background thread runs it: one writer, and no worker held meanwhile.
            try:
                return {"reports": self.background.wait_for_sync()}
            except SyncError as e:
                raise RequestError(e.code, str(e)) from None
        self.background.request_sync()
        return {"scheduled": True}

    def op_index(self, req: dict, send: Send | None = None) -> dict:
        """``notewell index [--rebuild]`` and ``notewell sync``: the sync thread, the
        index's one writer, does the work, even if the engine is still loading; with
        ``progress``, its progress events come first as ``{"progress": event}`` frames."""
        rebuild = _arg(req, "rebuild", bool, False)
        progress = _arg(req, "progress", bool, False)
        bg = self.background
        if bg.state == "error":  # nothing here writes: the command does, under the lock
            raise RequestError("unavailable", bg.problem or "the engine failed to start")
        try:
            on_disk = config_file.load()
        except config_file.ConfigError as e:
            raise RequestError("bad_config", str(e)) from None
        if dataclasses.asdict(on_disk) != dataclasses.asdict(self.config):
            raise RequestError("config_changed", f"{on_disk.path} changed since the daemon "
                               "started; restart it so it reads it (`notewell agent "
                               "restart`, or stop and start `notewell serve`), then run "
                               "this again")
        try:
            return {"reports": bg.wait_for_sync(
                rebuild=rebuild, on_progress=_relay(send) if progress and send else None)}
        except SyncError as e:
            raise RequestError(e.code, str(e)) from None

    def op_mcp(self, req: dict) -> dict:
        """The switch to MCP (``notewell mcp``): after this ok, ``transport`` hands the
        connection to an MCP session."""
        return {"mcp": True, "version": __version__}

    def op_stop(self, req: dict) -> dict:
        threading.Timer(0.05, self.request_stop).start()
        return {"stopping": True}

    def op_restart(self, req: dict) -> dict:
        """Stop, then run the same command again in this process: it reads config.toml
        and loads the model anew (``notewell model use`` asks, after switching them)."""
        if self.request_restart is None:
            raise RequestError("unavailable", "this daemon cannot restart itself; stop it "
                               "and start it again")
        threading.Timer(0.05, self.request_restart).start()
        return {"restarting": True}


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
