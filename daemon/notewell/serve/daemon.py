"""The resident daemon: holds the model and the index, answers on a Unix socket, syncs.

Wires three parts together: ``transport`` (one listening socket, 0600 in a 0700 folder,
and one thread per connection for framing), ``handlers`` (each request ``{op, **args}`` to
its handler, the index-reading ones on a small fixed pool of workers, so database
connections are few and a slow client only ever holds its own thread) and ``background``
(the engine's start and keeping the index in sync with the sources). The socket is up
before the model loads, so clients get a "warming up" answer instead of a refused
connection. ``run`` is ``notewell serve``: signals, malloc limits, and how it exits; after
an upgrade in place (a client of the new version asked, ``handlers``) it stops as usual
and then runs the same command again in the same process (``execv``), so the new version
serves whether an agent, a terminal or Alfred's "start" item started it.

Also hosts agents' MCP sessions (``agents.session``), imported on the first switch to MCP,
or in the background at start when ``notewell mcp install`` configured a client
(``paths.mcp_marker``): a user who never uses agents never loads the SDK.

May import ``engine`` and what is below it, the rest of ``serve``, and (lazily)
``agents.session``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

from notewell import __version__
from notewell.clock import SYSTEM_CLOCK, Clock
from notewell.config import Config
from notewell.engine import Engine
from notewell.index import failures
from notewell.memory import limit_heaps
from notewell.serve.background import Background
from notewell.serve.handlers import Handlers
from notewell.serve.transport import AlreadyRunning, Server
from notewell.timemachine import exclude_caches
from notewell.wire import paths

log = logging.getLogger(__name__)

STOP_BUDGET = 0.6  # seconds a SIGTERM waits for the sync and requests before exiting


class Daemon:
    def __init__(self, config: Config, engine_factory: Callable[[Config], Engine] | None = None,
                 poll_seconds: float = 5.0, debounce: float = 1.0, use_events: bool = True,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        factory = engine_factory or Engine
        self.stop_event = threading.Event()
        self.background = Background(lambda: factory(config), self.stop_event,
                                     poll_seconds=poll_seconds, debounce=debounce,
                                     use_events=use_events, clock=clock)
        self.handlers = Handlers(config, self.background, self.request_stop, clock=clock,
                                 request_restart=self.request_restart)
        self.restart_requested = False
        self.server = Server(self.handlers.answer, self.stop_event, mcp_host=self.mcp_host,
                             clock=clock)
        self.clock = clock  # the stop's budget
        self._stop_at: float | None = None
        self._mcp = None  # the MCP session host, once loaded (``mcp_host``)
        self._mcp_lock = threading.Lock()
        self.handlers.mcp_sessions = lambda: None if self._mcp is None else self._mcp.count()

    def mcp_host(self):
        """The MCP session host (``agents.session.Sessions``), loaded on first use."""
        with self._mcp_lock:
            if self._mcp is None:
                from notewell.agents.session import Sessions  # the SDK: only when used

                self._mcp = Sessions(self.handlers.answer)
            return self._mcp

    def _preload_mcp(self) -> None:
        try:
            self.mcp_host()
        except Exception:
            log.exception("could not load the MCP server (an agent's client is configured)")

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Take the lock, bind the socket, and start loading the engine in the background."""
        self.server.open()
        for path in paths.narrow_modes():  # the home and logs: nobody else reads them
            log.info("narrowed %s to this user alone", path)
        exclude_caches()  # from Time Machine's hourly backups (macOS; best effort)
        try:
            paths.record_socket(self.server.socket_path)  # where the zsh client finds it
        except OSError as e:
            log.warning("could not write %s (%s): Alfred's zsh client falls back to Python "
                        "until it can", paths.socket_record(), e)
        # Which zsh client Alfred's workflow hands keystrokes to: this version's. Imported
        # here: the workflow builder is needed by nothing else in the daemon.
        from notewell.launcher.alfred_workflow import this_installation

        try:
            paths.record_client(this_installation().fast_client)
        except OSError as e:
            log.warning("could not write %s (%s): Alfred's workflow uses its own copy of the "
                        "zsh client", paths.client_record(), e)
        with contextlib.suppress(FileNotFoundError):  # a restart after an upgrade is done
            os.remove(paths.restart_marker())
        self.background.start()
        if os.path.exists(paths.mcp_marker()):  # an agent's client will connect: be ready
            threading.Thread(target=self._preload_mcp, daemon=True, name="mcp-load").start()

    def serve_forever(self) -> bool:
        """Accept until stopped; returns ``shutdown()``'s verdict."""
        log.info("notewell %s listening on %s (pid %d)", __version__,
                 self.server.socket_path, os.getpid())
        self.server.serve_forever()
        return self.shutdown()

    def shutdown(self) -> bool:
        """Stop within ``STOP_BUDGET`` of the request: socket first (clients see "not
        running" at once), then wait for the sync and in-flight requests. A sync stops
        between model calls and every write is one transaction, so whatever is still
        running when the budget is spent can be abandoned: SQLite rolls back an
        uncommitted transaction, exactly as after a crash. Returns True if everything
        finished (the index is closed), False if the caller should exit regardless."""
        self.stop_event.set()
        self.background.wake()
        deadline = (self._stop_at or self.clock.monotonic()) + STOP_BUDGET
        self.server.close_socket()
        if self._mcp is not None:
            self._mcp.close_all()
        busy = [t for t in (self.background.thread, *self.handlers.shutdown())
                if t is not None]
        for t in busy:
            t.join(timeout=max(0.0, deadline - self.clock.monotonic()))
        finished = not any(t.is_alive() for t in busy)
        engine = self.background.engine
        if engine is not None and finished:
            try:
                engine.close()
            except Exception:
                log.exception("closing the index failed")
        elif not finished:
            log.warning("stopping with a sync or request still running; it is rolled back")
        self.server.release_lock()
        return finished

    def request_stop(self, *_: object) -> None:
        """Stop serving (SIGTERM, SIGINT, the ``stop`` op); safe in a signal handler."""
        if self._stop_at is None:
            self._stop_at = self.clock.monotonic()
        self.stop_event.set()
        self.background.wake()  # from its sleep
        self.server.wake()

    def request_restart(self) -> None:
        """Stop, then start again from the files on disk (``run`` does the exec). Clients
        that find no socket meanwhile see the marker and wait (``wire.client``)."""
        paths.write_atomic(paths.restart_marker(), str(os.getpid()).encode())
        self.restart_requested = True
        self.request_stop()


def run(config: Config, poll_seconds: float = 5.0,
        engine_factory: Callable[[Config], Engine] | None = None) -> int:
    limit_heaps()  # before the worker threads exist
    daemon = Daemon(config, engine_factory=engine_factory, poll_seconds=poll_seconds)
    # Handlers first: a SIGTERM that arrives while starting still removes the socket.
    signal.signal(signal.SIGTERM, daemon.request_stop)
    signal.signal(signal.SIGINT, daemon.request_stop)
    with contextlib.suppress(AttributeError):
        # SIGHUP: sync every source now, changed or not, as `notewell sync` asks.
        signal.signal(signal.SIGHUP, lambda *_: daemon.background.request_sync())
    try:
        daemon.start()
    except AlreadyRunning as e:
        # Not a failure: this home is served. Exit 0, which launchd's KeepAlive
        # {SuccessfulExit: false} and systemd's Restart=on-failure both leave stopped;
        # an error exit would be retried every ThrottleInterval for as long as the
        # other daemon runs.
        print(f"notewell: {e}", file=sys.stderr)
        return 0
    except PermissionError as e:
        print(f"notewell: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        what = (failures.disk_full_message(paths.home(), then="then start notewell again")
                if failures.disk_full(e) else f"{e}; see the log in {paths.log_dir()}")
        log.error("could not start: %s", what)
        print(f"notewell: could not start: {what}", file=sys.stderr)
        return 1
    finished = daemon.serve_forever()
    if daemon.restart_requested:
        _exec_again()
    if not finished:
        # A thread is still inside a model call or a query. Its transaction, if any, is
        # uncommitted, which SQLite rolls back: leave now rather than keep launchd waiting.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


EXIT_RESTART_FAILED = 75  # an error exit: an installed agent starts the daemon again


def _exec_again() -> None:
    """Run this command line again in this process: the interpreter loads the upgraded
    files. Threads still in a query or model call vanish; an uncommitted transaction
    rolls back, as after a crash. If the exec fails (the virtualenv was replaced), exit
    with an error so the agent, if installed, starts its program again."""
    argv = [sys.executable, *sys.orig_argv[1:]]
    log.info("restarting: %s", " ".join(argv))
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, argv)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(paths.restart_marker())
        print(f"notewell: restart failed ({e}); start the daemon again: "
              "`notewell agent start` or `notewell serve`", file=sys.stderr)
        os._exit(EXIT_RESTART_FAILED)
