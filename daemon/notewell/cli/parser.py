"""The argument parser of the ``notewell`` command: its global options and ``--version``,
and a subparser for each registered command, built from what the command declares beside
its function (``common.command``)."""

from __future__ import annotations

import argparse
import os
import sys

from notewell import __version__
from notewell.cli import manage, reads  # noqa: F401  (importing them registers commands)
from notewell.cli.common import COMMANDS
from notewell.wire import paths

# The order ``notewell --help`` lists the commands in; one not named here comes last.
HELP_ORDER = ("demo", "index", "sync", "serve", "search", "show", "tags", "recent", "similar",
              "related", "eval", "status", "vaults", "alfred", "agent", "setup", "mcp",
              "model", "doctor")


class _Version(argparse.Action):
    # argparse's own "version" action re-wraps the text to the terminal's width.
    def __call__(self, parser, namespace, values, option_string=None) -> None:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # notewell/
        print(f"notewell {__version__} ({here}, Python {sys.version.split()[0]})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="notewell",
        description="Semantic search over your notes (Bear, Obsidian, Markdown), "
                    "answered by a warm local daemon. Files live in $NOTEWELL_HOME "
                    f"(now {paths.home()}).")
    p.add_argument("--version", action=_Version, nargs=0,
                   help="show the version, where this notewell is installed, and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="log more (to stderr)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    place = {name: i for i, name in enumerate(HELP_ORDER)}
    for name in sorted(COMMANDS, key=lambda name: place.get(name, len(place))):
        command = COMMANDS[name]
        s = sub.add_parser(name, help=command.help, description=command.description)
        for argument in command.arguments:
            argument(s)
    return p
