"""``notewell setup``: find the notes on this machine and set up everything around them.

Finds Bear's database and Obsidian's vaults (from Obsidian's own registry,
``obsidian.json``), proposes a config that keeps every source already configured and
adds what it found, and with ``--yes`` writes it, builds the index (progress bar with time
left), installs the auto-start agent and builds the Alfred workflow. Each step is
idempotent, so running setup again only adds what is new.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from notewell import config
from notewell.ops import privacy
from notewell.wire import paths

if TYPE_CHECKING:
    from notewell.model.embedding import Embedder


@dataclass
class Found:
    bear: str | None = None
    vaults: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def discover() -> Found:
    """Bear's database (where the Bear source looks by default) and the existing vaults in
    Obsidian's registry (``obsidian.json``), as the sources modules find them."""
    from notewell.sources import SourceError
    from notewell.sources.bear import find_database
    from notewell.sources.obsidian import list_vaults

    found = Found(bear=find_database())
    try:
        vaults = list_vaults()
    except SourceError as e:
        found.problems.append(str(e))
        vaults = []
    for v in vaults:
        if v["exists"]:
            found.vaults.append(os.path.abspath(v["path"]))
        else:
            found.problems.append(f"Obsidian lists vault {v['path']}, which no longer exists")
    return found


def propose(current: config.Config, found: Found) -> tuple[config.Config, list[str]]:
    """``current`` plus what was found and is not configured yet; and what was added."""
    sources = list(current.sources)
    names = {s.name for s in sources}
    configured = {s.path for s in sources if s.path}
    added = []
    if found.bear and not any(s.type == "bear" for s in sources):
        # No path: the Bear source finds the database itself, wherever Bear keeps it.
        sources.append(config.SourceConfig(_unique("bear", names), "bear"))
        added.append(f"Bear ({found.bear})")
    for vault in found.vaults:
        if vault in configured:
            continue
        name = _unique(_slug(os.path.basename(vault)) or "vault", names)
        sources.append(config.SourceConfig(name, "obsidian", vault))
        added.append(f"Obsidian vault {vault} as {name!r}")
    return config.Config(tuple(sources), current.debug_log, current.path, current.model), added


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-")[:32]


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}-{n}", n + 1
    taken.add(candidate)
    return candidate


Say = Callable[[str], None]


def _refused_bear() -> str | None:
    """Bear's database at a default location that macOS privacy controls refuse."""
    from notewell.sources.bear import DEFAULT_LOCATIONS

    for loc in DEFAULT_LOCATIONS:
        path = os.path.expanduser(loc)
        found = privacy.diagnose(path)
        if found is not None and found[0] == "not allowed":
            return path
    return None


def run(yes: bool = False, *, index: bool = True, agent: bool = True, workflow: bool = True,
        platform: str | None = None, say: Say = print,
        confirm: Callable[[str], bool] | None = None,
        embedder: Callable[[], Embedder] | None = None) -> int:
    """The whole setup; returns an exit code (1 if any step failed). ``embedder`` makes
    the embedder the index is built with (default: the shipped model)."""
    platform = platform or sys.platform
    current = config.load()
    found = discover()
    proposed, added = propose(current, found)
    say(f"notewell setup · home {paths.home()}")
    say("found: " + (", ".join(added) if added else "nothing new"))
    for problem in found.problems:
        say(f"  note: {problem}")
    if platform == "darwin" and not found.bear:
        refused = _refused_bear()
        if refused:
            say(f"  Bear's database is there but not allowed ({refused}): "
                f"{privacy.grant_hint(platform, refused)}; then run setup again")
        else:
            say("  no Bear database found (is Bear installed and opened once?)")
    if not proposed.sources:
        say("no notes found: add a [[sources]] table to "
            f"{proposed.path or paths.config_path()} (see README, \"Configuration\"), then "
            "run setup again")
        return 1
    changed = bool(added) or not os.path.exists(proposed.path or paths.config_path())
    say(f"\nconfig ({proposed.path or paths.config_path()}):\n")
    say(config.dump(proposed))
    question = "Write this config, build the index, install the agent and the Alfred workflow?"
    if not yes and (confirm is None or not confirm(question + " [y/N] ")):
        say("nothing written; run `notewell setup --yes` to do it")
        return 0
    if changed:
        say(f"wrote {config.save(proposed, proposed.path)}")
    else:
        say("config unchanged")
    failures = 0
    if index:
        failures += _step("index", lambda: _build_index(config.load(proposed.path), embedder),
                          say)
    if agent:
        from notewell.ops import login_agent as agent_mod

        failures += _step("agent", lambda: agent_mod.install(platform), say)
    if workflow:
        failures += _step("alfred workflow", lambda: _build_workflow(platform), say)
    say("\nnext: `notewell doctor` checks every link; type `n` and a few words in Alfred"
        if not failures else "\nsome steps failed; `notewell doctor` says what to do")
    return 1 if failures else 0


def _step(name: str, fn: Callable[[], str], say: Say) -> int:
    say(f"\n== {name}")
    sys.stdout.flush()  # progress bars go to stderr; keep the two in order
    try:
        say(fn())
        return 0
    except Exception as e:  # one failed step must not hide the others
        say(f"{name} failed: {e}")
        return 1


def _build_index(cfg: config.Config, embedder: Callable[[], Embedder] | None) -> str:
    from notewell.engine import Engine
    from notewell.index import writer

    def waiting(holder: str) -> None:
        print(f"waiting for {holder} to finish writing the index…", file=sys.stderr,
              flush=True)

    # Setup run again with the daemon up (or another command indexing): take turns.
    with writer.hold(paths.index_dir(), "notewell setup", on_wait=waiting):
        engine = Engine(cfg, embedder=embedder() if embedder else None)
        try:
            reports = engine.sync(progress=True)
        finally:
            engine.close()
    lines = [f"{r.source}: {r.added} added, {r.updated} updated, {r.deleted} deleted"
             + (f", ERROR {r.error}" if r.error else "") for r in reports]
    errors = [r for r in reports if r.error]
    if errors:
        raise RuntimeError("; ".join(lines))
    return "\n".join(lines)


def _build_workflow(platform: str) -> str:
    from notewell.launcher import alfred_workflow

    out = alfred_workflow.default_output()
    before = _read(out)
    path = alfred_workflow.build(out)
    if platform != "darwin":
        return f"built {path} (Alfred is macOS-only: nothing to install here)"
    if before == _read(path):
        return f"{path} is up to date (already imported? `notewell alfred install` opens it)"
    _, message = alfred_workflow.install(path, platform)
    return message


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
