"""What every command shares: the command registry (each command declares its help and
arguments beside its function), configuration and embedder, a one-shot engine, requests
to the running daemon, writing the index (by the daemon, or here under the index's writer
lock), and printing hits and sync reports."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from notewell.wire.requests import MAX_LIMIT, default

if TYPE_CHECKING:
    from notewell.model.embedding import Embedder

Run = Callable[[argparse.Namespace], int]
Argument = Callable[[Any], object]  # adds itself to a subcommand's parser (or a group of it)


class Command(NamedTuple):
    run: Run
    help: str  # its line in ``notewell --help``
    description: str  # the text of ``notewell NAME --help``
    arguments: tuple[Argument, ...]
    light: bool  # imports no index, model or config code (``main`` expects none of their errors)


COMMANDS: dict[str, Command] = {}


def command(*, help: str, description: str, arguments: tuple[Argument, ...] = (),
            light: bool = False) -> Callable[[Run], Run]:
    """Register a ``cmd_*`` function as the subcommand of its name, with its help texts and
    arguments (``arg``, ``one_of``), which ``parser.build_parser`` adds as declared."""
    def register(fn: Run) -> Run:
        name = fn.__name__.removeprefix("cmd_").replace("_", "-")
        COMMANDS[name] = Command(fn, help, description, arguments, light)
        return fn
    return register


def arg(*names: str, **options: Any) -> Argument:
    """One argument of a command: what ``ArgumentParser.add_argument`` takes."""
    return lambda parser: parser.add_argument(*names, **options)


def one_of(*arguments: Argument) -> Argument:
    """Arguments of which at most one may be given."""
    def add(parser: argparse.ArgumentParser) -> None:
        group = parser.add_mutually_exclusive_group()
        for argument in arguments:
            argument(group)
    return add


def limit(op: str) -> Argument:
    """``--limit``, with ``op``'s default for the terminal."""
    return arg("--limit", type=int, default=default(op, "limit", "cli"),
               help=f"how many notes (default %(default)s, at most {MAX_LIMIT})")


# -- helpers ------------------------------------------------------------------------------


def load_config():
    from notewell import config

    return config.load()


def default_embedder() -> Embedder:
    """The model ``config.toml`` names in ``[model]``, else the shipped one."""
    from notewell.engine import embedder_for

    return embedder_for(load_config())


def one_shot_engine(args: argparse.Namespace):
    """An engine for one command without the daemon. It answers from SQLite (sqlite-vec,
    FTS5) rather than building the in-memory copies a resident daemon keeps: building them
    in the background took a one-shot search from 0.57 to 0.95 s (bench/keystroke.py)."""
    from notewell.engine import Engine

    engine = Engine(load_config(), embedder=args.embedder())
    engine.index.copies.settings.vectors = False
    engine.index.copies.settings.keywords = False
    return engine


def daemon_request(op: str, **args) -> dict | None:
    """The daemon's reply to one request, or None when no daemon is listening."""
    from notewell.wire import client, protocol

    try:
        reply = client.ask(protocol.request(op, **args), timeout=30.0)
    except (FileNotFoundError, ConnectionRefusedError):
        return None
    if not reply.get("ok"):
        err = reply.get("error", {})
        if err.get("code") == "warming_up":
            return None
        raise SystemExit(f"notewell: daemon: {err.get('message', err)}")
    return reply["result"]


def update_index(args: argparse.Namespace, *, rebuild: bool, quiet: bool,
                 who: str) -> list[dict]:
    """Sync every source (or ``rebuild`` the index beside the live one); the reports. A
    running daemon does it, even while it is still loading: its sync thread is the
    index's one writer, and its progress comes back here. Without one (or one that
    could not open the index) it is done here, holding the index's writer lock, which
    the daemon also takes before it writes; ``who`` is what another writer waiting for
    it is told."""
    from notewell.wire import client, protocol

    show = ShowProgress()
    try:
        reply = client.ask(protocol.request("sync_now", rebuild=rebuild, progress=not quiet),
                           on_progress=show)
    except (FileNotFoundError, ConnectionRefusedError):
        reply = None
    except KeyboardInterrupt:
        show.close()
        print("\nnotewell: stopped waiting; the daemon goes on with it in the background "
              "(`notewell status` shows how far it is)", file=sys.stderr)
        raise
    finally:
        show.close()
    if reply is not None and reply.get("ok"):
        return reply["result"]["reports"]
    if reply is not None:
        err = reply.get("error", {})
        if err.get("code") != "unavailable":
            raise SystemExit(f"notewell: daemon: {err.get('message', err)}")
        print(f"notewell: the daemon has no index open ({err.get('message')}); doing it "
              "here: restart the daemon afterwards (`notewell agent restart`)",
              file=sys.stderr)
    try:
        return _update_here(args, rebuild=rebuild, quiet=quiet, who=who)
    except KeyboardInterrupt:
        # Each sync write is one transaction, so what was written stays; a rebuild is
        # published only whole.
        kept = ("the live index is unchanged; run `notewell index --rebuild` again"
                if rebuild else
                "the notes indexed so far are kept; run `notewell index` again to go on "
                "(nothing embedded is embedded again)")
        print(f"\nnotewell: interrupted: {kept}", file=sys.stderr)
        raise


def _update_here(args: argparse.Namespace, *, rebuild: bool, quiet: bool,
                 who: str) -> list[dict]:
    """``update_index`` in this process, under the index's writer lock."""
    from notewell.index import writer
    from notewell.wire import paths

    with writer.hold(paths.index_dir(), who, on_wait=say_waiting):
        if rebuild:
            from notewell.engine import chunker_for
            from notewell.engine import rebuild as build
            from notewell.sources import open_source

            config = load_config()
            embedder = args.embedder()
            # A source that cannot be read would leave the new index without its notes.
            _, reports = build([open_source(s) for s in config.sources], embedder,
                               chunker_for(embedder), paths.index_dir(), progress=not quiet,
                               keep_if_failed={s.name for s in config.sources})
        else:
            engine = one_shot_engine(args)  # opened under the lock: the newest generation
            try:
                reports = engine.sync(progress=not quiet)
            finally:
                engine.close()
    return [r.to_dict() for r in reports]


def fail(message: str, code: int = 1) -> int:
    """Say ``message`` on stderr as notewell's; ``code``, the command's exit status."""
    print(f"notewell: {message}", file=sys.stderr)
    return code


def say_waiting(holder: str) -> None:
    print(f"notewell: waiting for {holder} to finish writing the index…", file=sys.stderr,
          flush=True)


class ShowProgress:
    """The daemon's progress events, drawn on stderr as a sync here draws them."""

    def __init__(self) -> None:
        self.bar = None

    def __call__(self, event: dict) -> None:
        if "waiting" in event:
            say_waiting(str(event["waiting"]))
            return
        from notewell.ingest.progress import Progress

        label, done, total = str(event["label"]), int(event["done"]), int(event["total"])
        bar = self.bar
        if bar is None or (bar.label, bar.total) != (label, total) or done < bar.done:
            self.close()  # another source, or the next round
            bar = self.bar = Progress(label, total)
        bar.advance(done - bar.done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def print_hits(hits: list[dict], notices: list[str], as_json: bool) -> None:
    if as_json:
        print(json.dumps(hits, ensure_ascii=False, indent=2))
        for n in notices:
            print(f"notewell: {n}", file=sys.stderr)
        return
    for n in notices:
        print(f"! {n}")
    if not hits and not notices:
        print("no matching notes")
    for i, h in enumerate(hits, 1):
        where = h["heading_path"] or os.path.basename(h.get("path") or "")
        tags = " ".join("#" + t for t in h["tags"])
        print(f"{i:2}. {h['title']}  [{h['source']}]  {h['score']:.4f}")
        if where:
            print(f"    {where}")
        print(f"    {h['snippet']}")
        if tags:
            print(f"    {tags}")
        print(f"    {h['url']}")


def print_report(r: dict) -> None:
    if r.get("error"):
        print(f"{r['source']}: ERROR {r['error']}")
        return
    print(f"{r['source']}: {r['added']} added, {r['updated']} updated, {r['deleted']} deleted, "
          f"{r['unchanged']} unchanged; {r['embedded']} embedded, {r['reused']} reused "
          f"(passages and titles; {r['seconds']:.1f}s)")
    for w in r.get("warnings", [])[:20]:
        print(f"  warning: {w}")
