"""Stand-in commands for the launcher tests: ``launchctl``, ``systemctl``, ``open``,
``pbcopy``, ``qlmanage`` and ``osascript`` that record their arguments (and ``pbcopy``'s
input) as JSON lines and answer by rules, so macOS code paths run on Linux."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

STAND_IN = """#!{python}
import json, os, sys
name = os.path.basename(sys.argv[0])
args = sys.argv[1:]
stdin = sys.stdin.buffer.read().decode() if name == "pbcopy" else None
with open(os.environ["STANDIN_LOG"], "a") as f:
    f.write(json.dumps({{"cmd": name, "args": args, "stdin": stdin}}) + "\\n")
rules_path = os.environ.get("STANDIN_RULES", "")
rules = json.load(open(rules_path)) if os.path.exists(rules_path) else {{}}
for rule in rules.get(name, []):
    if args[:len(rule["prefix"])] == rule["prefix"]:
        sys.stdout.write(rule.get("stdout", ""))
        sys.stderr.write(rule.get("stderr", ""))
        sys.exit(rule.get("rc", 0))
"""

COMMANDS = ("launchctl", "systemctl", "open", "pbcopy", "qlmanage", "osascript")


class StandIns:
    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.log = root / "calls.jsonl"
        self.rules_path = root / "rules.json"
        for name in COMMANDS:
            path = self.bin / name
            path.write_text(STAND_IN.format(python=sys.executable))
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.bin}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                "STANDIN_LOG": str(self.log), "STANDIN_RULES": str(self.rules_path)}

    def rules(self, rules: dict[str, list[dict]]) -> None:
        self.rules_path.write_text(json.dumps(rules))

    def calls(self, cmd: str | None = None) -> list[dict]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r for r in rows if cmd is None or r["cmd"] == cmd]

    def args(self, cmd: str) -> list[list[str]]:
        return [r["args"] for r in self.calls(cmd)]

    def clear(self) -> None:
        if self.log.exists():
            self.log.unlink()


def install_stand_ins(tmp_path: Path, monkeypatch) -> StandIns:
    s = StandIns(tmp_path / "standins")
    for key, value in s.env().items():
        monkeypatch.setenv(key, value)
    return s
