"""The ``notewell`` command. Each subcommand is a thin wrapper over one library call.

Commands that read (search, status, similar) ask the running daemon when there is one
and fall back to a short-lived in-process engine when there is not.

Owns the command line; may import anything of notewell (it is the top layer). Split
along what commands do: ``common`` (the command registry and what commands share),
``reads`` (commands that read the index) and ``manage`` (commands that build, serve and
set up), each command's help and arguments declared beside its function, and ``parser``
(the global options, ``--version``, a subparser per registered command). None of them
imports anything heavy at load: each command imports what it needs when it runs.

``main`` is the one dispatch route: the commands of ``FAST_ROUTES`` (the MCP relay an
agent's client starts, the Alfred workflow's entries) are answered before argparse or any
of those modules is imported; every other one goes through argparse to its function.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not ``typing``'s: importing it costs ``notewell mcp`` ~4 ms
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from notewell.cli.common import Command
    from notewell.model.embedding import Embedder


def _entry(module: str) -> Callable[[list[str]], int]:
    def run(words: list[str]) -> int:
        import importlib

        return importlib.import_module(module).main(words)
    return run


def _relay(words: list[str]) -> int | None:
    """A plain ``notewell mcp [--no-start] [--wait SECONDS]``: an agent's session starting,
    no argparse, no logging set-up. None for anything else, which argparse reads (and
    explains when it is wrong)."""
    start, wait = True, 20.0
    while words:
        if words[0] == "--no-start":
            start, words = False, words[1:]
        elif words[0] == "--wait" and len(words) > 1:
            try:
                wait = float(words[1])
            except ValueError:
                return None
            words = words[2:]
        else:
            return None
    from notewell.agents import relay

    return relay.run(start=start, wait=wait)


# The first words of a command answered before the rest of ``cli`` loads, and what answers
# the words after them (None: argparse reads them). The Alfred workflow runs its entries
# through the notewell its home records (its zsh client's fallback and its actions): the
# user's text goes through untouched, never through argparse, which would take a query
# like "-h" for an option.
FAST_ROUTES: dict[tuple[str, ...], Callable[[list[str]], int | None]] = {
    ("alfred", "query"): _entry("notewell.wire.client"),
    ("alfred", "action"): _entry("notewell.launcher.alfred_actions"),
    ("alfred", "related"): _entry("notewell.launcher.alfred_related"),
    ("mcp",): _relay,
}


def main(argv: list[str] | None = None, *,
         embedder: Callable[[], Embedder] | None = None) -> int:
    """Run one command. ``embedder`` makes the embedder for the commands that need one
    (default: the shipped model); tests wire in ``notewell.model.fake`` here."""
    words = sys.argv[1:] if argv is None else argv
    for first, answer in FAST_ROUTES.items():
        if tuple(words[:len(first)]) == first:
            code = answer(words[len(first):])
            if code is not None:
                return code
    import logging

    from notewell.cli.common import COMMANDS, default_embedder
    from notewell.cli.parser import build_parser

    parser = build_parser()
    args = parser.parse_args(argv)
    args.embedder = embedder or default_embedder
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return _run(COMMANDS[args.command], args)
    except BrokenPipeError:
        # `notewell search git | head -1`: the reader has gone, so say nothing, as a
        # command killed by SIGPIPE would; stdout goes to /dev/null so the interpreter's
        # own flush at exit raises no second error.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        return 130


def _run(command: Command, args: argparse.Namespace) -> int:
    """One command, its known failures one line on stderr; stdout flushed here so a
    closed pipe is seen by ``main``, not at exit."""
    if command.light:  # imports no index, model or config code
        code = command.run(args)
    else:
        from notewell.config import ConfigError
        from notewell.index.schema import IndexProblem
        from notewell.model.files import ModelError
        from notewell.sources import SourceError

        try:
            code = command.run(args)
        except (ConfigError, IndexProblem, ModelError, SourceError) as e:
            print(f"notewell: {e}", file=sys.stderr)
            code = 1
    sys.stdout.flush()
    return code
