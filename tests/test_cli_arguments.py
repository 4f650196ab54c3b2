"""The ``notewell`` command line stays what it is while its arguments move around the code:
every subcommand's help line, description and arguments (flags, dests, defaults, choices,
nargs, metavars, types, help texts, exclusive groups) against a snapshot in
``tests/data/cli_arguments.json``.

A deliberate change to the command line regenerates the snapshot (then review its diff):
    .venv/bin/python tests/test_cli_arguments.py > tests/data/cli_arguments.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from helpers import subprocess_env

SNAPSHOT = Path(__file__).parent / "data" / "cli_arguments.json"


def _actions(parser: argparse.ArgumentParser) -> list[dict]:
    groups = [sorted(a.dest for a in g._group_actions)
              for g in parser._mutually_exclusive_groups]
    return [{"flags": a.option_strings, "dest": a.dest, "default": a.default,
             "choices": list(a.choices) if a.choices is not None else None,
             "nargs": a.nargs, "metavar": a.metavar, "const": a.const,
             "type": getattr(a.type, "__name__", a.type), "required": a.required,
             "action": type(a).__name__, "help": a.help,
             "exclusive_with": next((g for g in groups if a.dest in g), None)}
            for a in parser._actions if not isinstance(a, argparse._SubParsersAction)]


def describe(parser: argparse.ArgumentParser) -> dict:
    """The whole command line as data: the top level's own options, then each subcommand
    in the order ``--help`` lists them."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    return {"options": _actions(parser),
            "commands": [{"name": name, "help": helps.get(name),
                          "description": p.description, "arguments": _actions(p)}
                         for name, p in sub.choices.items()]}


def dump(described: dict) -> str:
    """JSON with one line per argument, so a change reads as a short diff."""
    def lines(actions: list[dict]) -> str:
        return ",\n".join("  " + json.dumps(a, ensure_ascii=False) for a in actions)

    commands = ",\n".join(
        " " + json.dumps({k: v for k, v in c.items() if k != "arguments"},
                         ensure_ascii=False)[:-1] + ', "arguments": [\n'
        + lines(c["arguments"]) + "]}" for c in described["commands"])
    return ('{"options": [\n' + lines(described["options"]) + '],\n"commands": [\n'
            + commands + "]}")


def test_the_command_line_is_the_snapshot():
    from notewell.cli.parser import build_parser

    now = describe(build_parser())
    expected = json.loads(SNAPSHOT.read_text())
    assert [c["name"] for c in now["commands"]] == [c["name"] for c in expected["commands"]]
    assert now["options"] == expected["options"]
    for got, want in zip(now["commands"], expected["commands"], strict=True):
        assert got == want, got["name"]


def test_a_light_command_imports_no_index_model_or_config_code(home, user_home):
    """``notewell mcp install`` goes through argparse and the registry, yet stays thin: the
    registry marks it light, so ``main`` does not load the errors of the heavy layers."""
    probe = ("import sys\nfrom notewell.cli import main\ncode = main(sys.argv[1:])\n"
             "sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)))\n"
             "sys.exit(code)\n")
    out = subprocess.run([sys.executable, "-c", probe, "mcp", "install", "--client", "cursor",
                          "--dry-run"], capture_output=True, text=True, timeout=60,
                         env=subprocess_env(home, HOME=str(user_home)), check=False)
    assert out.returncode == 0 and "would change" in out.stdout, out.stderr
    loaded = out.stderr.rsplit("MODULES ", 1)[1].split()
    assert "notewell.cli.parser" in loaded  # it did go through argparse
    heavy = [m for m in loaded if m.split(".")[:2] in (
        ["notewell", "config"], ["notewell", "index"], ["notewell", "model"],
        ["notewell", "sources"], ["notewell", "engine"])]
    assert not heavy, heavy


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parents[1] / "daemon"))
    from notewell.cli.parser import build_parser

    print(dump(describe(build_parser())))
