"""The ``notewell`` command. Each subcommand is a thin wrapper over one library call.

Commands that read (search, status, similar) ask the running daemon when there is one
and fall back to a short-lived in-process engine when there is not.

Owns the command line; may import anything of notewell (it is the top layer). Split
along what commands do: ``parser`` (the arguments, ``--version``), ``common`` (the command
registry and what commands share), ``reads`` (commands that read the index) and
``manage`` (commands that build, serve and set up). None of them imports anything heavy
at load: each command imports what it needs when it runs. ``notewell mcp`` (the relay an
agent's client starts, once per session) goes straight to ``agents.relay`` before any of
them is imported.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not ``typing``'s: importing it costs ``notewell mcp`` ~4 ms
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from notewell.model.embedding import Embedder


# What the Alfred workflow runs through the notewell its home records (the fallback of its
# zsh client and its actions, ``launcher/scripts/notewell-query.zsh``): the user's text goes
# through untouched, never through argparse, which would take a query like "-h" for an option.
ALFRED_ENTRIES = {"query": "notewell.wire.client", "action": "notewell.launcher.alfred_actions",
                  "related": "notewell.launcher.alfred_related"}


def main(argv: list[str] | None = None, *,
         embedder: Callable[[], Embedder] | None = None) -> int:
    """Run one command. ``embedder`` makes the embedder for the commands that need one
    (default: the shipped model); tests wire in ``notewell.model.fake`` here."""
    words = sys.argv[1:] if argv is None else argv
    if len(words) > 1 and words[0] == "alfred" and words[1] in ALFRED_ENTRIES:
        import importlib

        return importlib.import_module(ALFRED_ENTRIES[words[1]]).main(words[2:])
    relay = _relay_args(words)
    if relay is not None:  # an agent's session starting: no argparse, no logging set-up
        from notewell.agents import relay as mcp_relay

        return mcp_relay.run(*relay)
    import logging

    from notewell.cli import manage, reads  # noqa: F401  (importing them registers commands)
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


def _run(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """One command, its known failures one line on stderr; stdout flushed here so a
    closed pipe is seen by ``main``, not at exit."""
    from notewell.cli.parser import LIGHT_COMMANDS

    if args.command in LIGHT_COMMANDS:  # imports no index, model or config code
        code = command(args)
    else:
        from notewell.config import ConfigError
        from notewell.index.schema import IndexProblem
        from notewell.model.files import ModelError
        from notewell.sources import SourceError

        try:
            code = command(args)
        except (ConfigError, IndexProblem, ModelError, SourceError) as e:
            print(f"notewell: {e}", file=sys.stderr)
            code = 1
    sys.stdout.flush()
    return code




def _relay_args(words: list[str]) -> tuple[bool, float] | None:
    """(start, wait) for a plain ``notewell mcp [--no-start] [--wait SECONDS]``; None for
    anything else, which argparse reads (and explains when it is wrong)."""
    if not words or words[0] != "mcp":
        return None
    start, wait, rest = True, 20.0, words[1:]
    while rest:
        if rest[0] == "--no-start":
            start, rest = False, rest[1:]
        elif rest[0] == "--wait" and len(rest) > 1:
            try:
                wait = float(rest[1])
            except ValueError:
                return None
            rest = rest[2:]
        else:
            return None
    return start, wait
