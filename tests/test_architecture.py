"""The package layout holds: each package imports only the layers below it, no module
imports itself back through others, every package says what it owns and may import, and
SQL stays in the index package. Read from the source with ``ast``; nothing is imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "daemon" / "notewell"
# Top-level modules, the lowest layer.
CORE = {"clock", "config", "notes", "memory", "priority", "timemachine", "__init__"}
BELOW_ENGINE = {"core", "wire", "sources", "model", "index", "ingest", "search"}
# What each part of notewell may import (besides itself), lowest layer first.
ALLOWED: dict[str, set[str]] = {
    "wire": set(),
    "core": {"wire"},
    "sources": {"core", "wire"},
    "model": {"core", "wire"},
    "index": {"core", "wire"},
    "ingest": {"core", "wire", "sources", "model", "index"},
    "search": {"core", "wire", "model", "index"},
    "engine": BELOW_ENGINE,
    # The read ops' answers, one per op (``api.OPS_TABLE``), beside the engine they call.
    "api": BELOW_ENGINE | {"engine"},
    "evaluation": BELOW_ENGINE | {"engine"},
    "launcher": {"core", "wire"},
    "serve": BELOW_ENGINE | {"engine", "api", "launcher"},
    "ops": BELOW_ENGINE | {"engine", "api", "launcher", "serve"},
    # The MCP relay (a thin process over the socket; of ops only the agent, to start the
    # daemon; tests/test_mcp.py checks the modules it loads) and the SDK server the
    # daemon hosts, which answers through the handlers it is given.
    "agents": {"core", "wire", "ops"},
    "cli": BELOW_ENGINE | {"engine", "api", "evaluation", "launcher", "serve", "ops",
                           "agents"},
}
# The one upward import, by design: the fake embedder's test-only entry point runs the CLI.
# And the keystroke client reads ``notewell.__version__`` (it sends it with every search):
# the top-level ``__init__``, loaded before any ``wire`` module anyway, imports nothing.
# And the daemon hosts agents' MCP sessions: it imports their host, when first used.
EXCEPTIONS = {("notewell.model.fake", "notewell.cli"), ("notewell.wire.client", "notewell"),
              ("notewell.serve.daemon", "notewell.agents.session")}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """The layer a ``notewell.*`` module belongs to."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in CORE:
        return "core"
    return "cli" if parts[1] == "__main__" else parts[1]


def imports(path: Path) -> set[str]:
    """Every ``notewell`` module the file imports, at module level or inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "notewell"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "notewell":
                continue
            for alias in node.names:  # ``from notewell.x import y``: y may be a module
                sub = f"{node.module}.{alias.name}"
                found.add(sub if (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists()
                          or (PACKAGE.parent / sub.replace(".", "/")).is_dir()
                          else node.module)
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}


def test_each_part_imports_only_the_layers_below_it():
    wrong = []
    for module, deps in graph().items():
        mine = part_of(module)
        for dep in deps:
            theirs = part_of(dep)
            if (theirs != mine and theirs not in ALLOWED[mine]
                    and (module, dep) not in EXCEPTIONS):
                wrong.append(f"{module} ({mine}) imports {dep} ({theirs})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_import_cycles():
    deps = graph()
    deps = {m: {d for d in ds if d in deps} for m, ds in deps.items()}
    # A package's __init__ is imported with any of its modules; it imports none of them
    # by design (checked below), so edges are between modules only.
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(deps.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt):], nxt] if nxt in trail else [nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(deps):
        if start not in state:
            visit(start, [start])
    assert not cycles, cycles


def test_every_package_says_what_it_owns_and_may_import():
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "Owns" in doc or "owns" in doc, f"{init} does not say what it owns"
        assert re.search(r"[Mm]ay import|[Ii]mports", doc), f"{init} does not say what it " \
                                                             "may import"


def test_the_keystroke_package_imports_nothing_else_of_notewell():
    """``wire`` runs on every keystroke: its ``__init__`` (run with any of its modules) and
    the top-level ``__init__`` import nothing at all, its modules only each other."""
    for init in (PACKAGE / "__init__.py", PACKAGE / "wire" / "__init__.py"):
        assert not any(isinstance(node, ast.Import | ast.ImportFrom)
                       for node in ast.walk(ast.parse(init.read_text(encoding="utf-8")))), init
    for module in (PACKAGE / "wire").glob("*.py"):
        deps = {d for d in imports(module) if (module_name(module), d) not in EXCEPTIONS}
        assert {part_of(d) for d in deps} <= {"wire"}, module


def test_wordfreq_is_read_as_data_by_the_search_layer_only():
    """Typo correction's word lists (``search.lexicon``) are read from wordfreq's package
    data: no module imports wordfreq (its import alone costs 12.5 MB), and only ``search``
    and the daemon's warm-up reach ``search.lexicon``, never the keystroke client."""
    importers, users = [], set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if re.search(r"^\s*(import|from)\s+wordfreq\b", text, re.M):
            importers.append(module_name(path))
        if "notewell.search.lexicon" in imports(path):
            users.add(module_name(path))
    assert importers == []
    assert users == {"notewell.search.terms", "notewell.search.searcher",
                     "notewell.serve.background"}, users


def test_sql_lives_in_the_index_package():
    """Bear's source reads Bear's own database: that SQL is the source's, not the index's."""
    sql = re.compile(r"\.execute\(|[\"']\s*(?:SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA)\b")
    outside = []
    for path in PACKAGE.rglob("*.py"):
        module = module_name(path)
        if part_of(module) == "index" or module == "notewell.sources.bear":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if sql.search(line) and not line.lstrip().startswith("#"):
                outside.append(f"{module}:{n}: {line.strip()}")
    assert not outside, "\n".join(outside)


def test_tests_import_no_other_test_file():
    """What tests share lives in conftest.py or a helpers module, not in a test file."""
    tests = Path(__file__).parent
    names = {p.stem for p in tests.glob("test_*.py")}
    for path in sorted(tests.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in names:
                raise AssertionError(f"{path.name}:{node.lineno} imports {node.module}")
            if isinstance(node, ast.Import):
                bad = [a.name for a in node.names if a.name in names]
                assert not bad, f"{path.name}:{node.lineno} imports {bad}"
