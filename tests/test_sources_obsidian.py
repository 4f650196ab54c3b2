"""Obsidian vaults: what is skipped (.obsidian, .trash, the vault's excluded files),
frontmatter and inline tags, titles, links, obsidian:// URLs, and the vault registry."""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path

import pytest
from helpers import write_notes
from notewell import cli
from notewell.config import SourceConfig
from notewell.sources import SourceError
from notewell.sources.obsidian import ObsidianSource, list_vaults

VAULT_NOTES = {
    "Daily/2024-05-01.md": "---\ntags: [journal, health/sleep]\naliases: Mayday\n---\n"
                           "# A long day\n\nSlept badly; see [[Sleep hygiene#Evening|evening "
                           "routine]] and [[Sleep hygiene#Evening#Screens]]. #mood/tired\n"
                           "![[chart.png]]\n",
    "Projects/Apollo plan.md": "---\ntitle: Apollo launch plan\ntag: work\nalias: [AP, apollo]\n"
                               "---\n## Scope\n\nBeta for ten customers. #2024 is not a tag, "
                               "#q3-goals is.\n\n```\n#include <stdio.h>\n```\n",
    "Sleep hygiene.md": "No screens after 22:00.\n\n## Evening\n\nRead paper books. `#code`\n",
    "Templates/Daily template.md": "# {{date}}\n\n#template\n",
    "Archive/old/stale.md": "# Stale\n\nold stuff\n",
    "Archive/keep.md": "# Kept\n\nstill relevant\n",
    ".trash/deleted.md": "# Deleted\n",
    ".obsidian/snippets/x.md": "# Not a note\n",
    "attachments/diagram.canvas": "{}",
}


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = write_notes(tmp_path / "My Vault", VAULT_NOTES)
    (root / ".obsidian" / "app.json").write_text(json.dumps(
        {"userIgnoreFilters": ["Templates/", "/^Archive/old/"], "alwaysUpdateLinks": True}))
    return root


def source(root: Path, **options) -> ObsidianSource:
    return ObsidianSource(SourceConfig("vault", "obsidian", str(root), (), options))


def load_all(src: ObsidianSource) -> dict:
    return {s.note_id.split(":", 1)[1]: src.load(s.note_id) for s in src.scan()}


def test_skips_config_trash_and_the_vaults_excluded_files(vault):
    notes = load_all(source(vault))
    assert sorted(notes) == ["Archive/keep.md", "Daily/2024-05-01.md",
                             "Projects/Apollo plan.md", "Sleep hygiene.md"]


def test_excluded_files_are_reread_when_app_json_changes(vault):
    src = source(vault)
    assert "Archive/keep.md" in load_all(src)
    (vault / ".obsidian" / "app.json").write_text(json.dumps(
        {"userIgnoreFilters": ["Archive"]}))
    os.utime(vault / ".obsidian" / "app.json", (1, 1))  # a new stamp, whatever the clock
    assert sorted(load_all(src)) == ["Daily/2024-05-01.md", "Projects/Apollo plan.md",
                                     "Sleep hygiene.md", "Templates/Daily template.md"]


def test_frontmatter_and_inline_tags(vault):
    notes = load_all(source(vault))
    daily = notes["Daily/2024-05-01.md"]
    assert daily.tags == ("journal", "health/sleep", "mood/tired")
    # The note's path within the vault names it too (searched with its title).
    assert daily.aliases == ("Mayday", "Daily/2024-05-01")
    apollo = notes["Projects/Apollo plan.md"]
    assert apollo.tags == ("work", "q3-goals")  # deprecated 'tag'; #2024 and code are not
    assert apollo.aliases == ("AP", "apollo", "Projects/Apollo plan")
    assert notes["Sleep hygiene.md"].tags == ()


def test_titles_follow_obsidian(vault):
    notes = load_all(source(vault))
    assert notes["Projects/Apollo plan.md"].title == "Apollo launch plan"  # frontmatter
    assert notes["Daily/2024-05-01.md"].title == "2024-05-01"  # the file name, not the H1
    assert notes["Sleep hygiene.md"].title == "Sleep hygiene"


def test_links_read_as_visible_text_and_embeds_vanish(vault):
    text = load_all(source(vault))["Daily/2024-05-01.md"].text
    assert "see evening routine and Sleep hygiene > Evening > Screens." in text
    assert "chart.png" not in text and "[[" not in text


def test_obsidian_urls(vault):
    src = source(vault)
    note = load_all(src)["Projects/Apollo plan.md"]
    assert note.url == "obsidian://open?vault=My%20Vault&file=Projects%2FApollo%20plan"
    assert src.passage_url(note, "Scope & goals") == (
        "obsidian://open?vault=My%20Vault&file=Projects%2FApollo%20plan%23Scope%20%26%20goals")
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(src.passage_url(note, "Scope")).query)
    assert query == {"vault": ["My Vault"], "file": ["Projects/Apollo plan#Scope"]}
    assert src.passage_url(note, None) == note.url


def test_url_template_overrides(vault):
    src = source(vault, url_template="x-editor://open?file={path}")
    note = load_all(src)["Sleep hygiene.md"]
    assert note.url.startswith("x-editor://open?file=") and note.url.endswith(
        "Sleep%20hygiene.md")


def test_a_folder_without_dot_obsidian_is_not_a_vault(tmp_path):
    write_notes(tmp_path / "plain", {"a.md": "# A\n"})
    with pytest.raises(SourceError, match='type = "markdown"'):
        list(source(tmp_path / "plain").scan())


def test_watch_paths_is_the_vault(vault):
    assert source(vault).watch_paths() == [str(vault)]


def registry(tmp_path: Path, vault: Path) -> Path:
    reg = tmp_path / "obsidian.json"
    reg.write_text(json.dumps({"vaults": {
        "ef6ca3e3b524d22f": {"path": str(vault), "ts": 1700000000000, "open": True},
        "0123456789abcdef": {"path": str(tmp_path / "Gone Vault"), "ts": 1},
        "bad": "not a dict"}, "frame": "hidden"}))
    return reg


def test_list_vaults_reads_the_registry(tmp_path, vault):
    vaults = list_vaults(str(registry(tmp_path, vault)))
    assert [(v["name"], v["exists"], v["open"]) for v in vaults] == [
        ("Gone Vault", False, False), ("My Vault", True, True)]
    with pytest.raises(SourceError, match="does not exist"):
        list_vaults(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SourceError, match="cannot read"):
        list_vaults(str(bad))


def test_vaults_command(tmp_path, vault, home, capsys):
    reg = registry(tmp_path, vault)
    assert cli.main(["vaults", "--registry", str(reg)]) == 0
    out = capsys.readouterr().out
    assert "My Vault" in out and "Gone Vault" in out and "(missing)" in out
    assert 'type = "obsidian"' in out and f'path = "{vault}"' in out
    assert cli.main(["vaults", "--registry", str(reg), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {v["name"]: v["configured"] for v in listed} == {"Gone Vault": False,
                                                             "My Vault": False}
