"""Stand-in commands for the launcher tests: ``launchctl``, ``systemctl``, ``open``,
``pbcopy``, ``qlmanage`` and ``osascript`` that record their arguments (and ``pbcopy``'s
input) as JSON lines and answer by rules, so macOS code paths run on Linux; and what the
Alfred workflow's and the zsh client's tests share: a built workflow unpacked, Alfred's
environment, a stand-in installation, the zsh client run as Alfred runs it."""

from __future__ import annotations

import json
import os
import plistlib
import shlex
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

from helpers import REPO, SCRIPTS

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


ZSH_CLIENT = SCRIPTS / "notewell-query.zsh"


def run_zsh(env: dict[str, str], *args: str, timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run(["zsh", "-f", str(ZSH_CLIENT), *args], capture_output=True, env=env,
                          timeout=timeout, check=False)


def unpack(built: Path, dest: Path) -> dict:
    with zipfile.ZipFile(built) as zf:
        zf.extractall(dest)
        for info in zf.infolist():
            os.chmod(dest / info.filename, info.external_attr >> 16 & 0o777)
        return plistlib.loads(zf.read("info.plist"))


def alfred_env(plist: dict, **extra: str) -> dict[str, str]:
    """What Alfred gives a script: the workflow variables, no site or PYTHONPATH of ours."""
    env = {"PATH": "/usr/bin:/bin", "alfred_workflow_bundleid": plist["bundleid"]}
    env.update(plist["variables"])
    env.update(extra)
    return env


def installation(where: Path, home: Path) -> Path:
    """A notewell installed at ``where`` (a wrapper running this checkout's package with
    this interpreter), recorded in ``home`` as `notewell serve` records itself; it logs
    each run to ``where/runs``."""
    where.mkdir(parents=True)
    program = where / "notewell"
    program.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(where / "runs"))}\n'
                       f'PYTHONPATH={shlex.quote(str(REPO / "daemon"))} '
                       f'exec {shlex.quote(sys.executable)} -m notewell "$@"\n')
    program.chmod(0o755)
    (home / "notewell-command").write_text(json.dumps([str(program)]))
    return where


def runs(inst: Path) -> list[str]:
    log = inst / "runs"
    return log.read_text().splitlines() if log.exists() else []
