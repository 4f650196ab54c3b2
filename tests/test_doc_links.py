"""Every place an error message sends a user to (a README section, a docs page and its
section, an anchor) exists, so a renamed heading cannot leave a message pointing nowhere."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "daemon" / "notewell"
# `README, "Configuration"`, `docs/languages.md, "Your own model"`, `docs/x.md#anchor`.
NAMED = re.compile(r'\b(README|docs/[\w.-]+\.md|bench/README\.md), "([^"]+)"')
ANCHOR = re.compile(r"\b((?:docs/)?[\w.-]+\.md)#([\w-]+)")
BARE = re.compile(r"\bsee (?:the )?README\b(?!,)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _headings(doc: Path) -> set[str]:
    return {line.lstrip("#").strip() for line in doc.read_text().splitlines()
            if line.startswith("#")}


def _doc(name: str) -> Path:
    return REPO / ("README.md" if name == "README" else name)


def message_strings() -> list[tuple[str, str]]:
    """(where, text) for every string literal of the package that is not a docstring, an
    f-string's literal parts joined (a message is often cut across lines)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                           ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values
                               if isinstance(v, ast.Constant) and isinstance(v.value, str))
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and id(node) not in docstrings):
                text = node.value
            else:
                continue
            found.append((f"{path.relative_to(REPO)}:{node.lineno}", text))
    return found


def test_every_section_a_message_names_exists():
    named = 0
    for where, text in message_strings():
        for doc, section in NAMED.findall(text):
            named += 1
            assert _doc(doc).exists(), f"{where}: {doc} does not exist"
            assert section in _headings(_doc(doc)), f"{where}: {doc} has no {section!r}"
        for doc, anchor in ANCHOR.findall(text):
            path = REPO / doc if doc.startswith("docs/") or doc == "README.md" \
                else REPO / "docs" / doc
            assert path.exists(), f"{where}: {doc} does not exist"
            assert anchor in {_slug(h) for h in _headings(path)}, f"{where}: no #{anchor}"
        assert not BARE.search(text), f"{where}: 'see README' names no section: {text!r}"
    assert named >= 5  # the check sees the messages (model folders, config)


def test_the_slug_rule_matches_the_anchors_the_docs_use():
    """The README links to its own docs by anchor; those resolve with the same rule."""
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target, anchor in re.findall(r"\]\(((?:docs/)?[\w.-]*\.md)?#([\w-]+)\)",
                                         doc.read_text()):
            path = doc if not target else (doc.parent / target)
            assert anchor in {_slug(h) for h in _headings(path)}, f"{doc.name}: #{anchor}"
