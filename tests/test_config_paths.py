"""config.toml as a new user writes it (issue 36.7, 36.8): a misspelt table or key is an
error naming the nearest known one, an exclude that leaves out every note is a warning,
a relative ``path`` is read from the config file's folder, and a source folder moved
(its ``path`` edited) moves every hit's link and path at the next sync, embedding
nothing."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import RecordingEmbedder, subprocess_env, write_notes
from notewell import config
from notewell.config import Config, ConfigError, SourceConfig
from notewell.engine import Engine
from notewell.ops import doctor

TOML = """\
[[sources]]
name = "notes"
type = "markdown"
path = "{path}"
{extra}
"""


def write_config(home: Path, path: str = "notes", extra: str = "") -> Path:
    cfg = home / "config.toml"
    cfg.write_text(TOML.format(path=path, extra=extra))
    return cfg


@pytest.mark.parametrize("text, message", [
    ('[[source]]\nname = "notes"\ntype = "markdown"\npath = "n"\n',
     "unknown table [[source]] in {cfg}: did you mean [[sources]]?"),
    (TOML.format(path="n", extra='exlude = ["private/**"]'),
     "unknown key 'exlude' in [[sources]] 'notes' ({cfg}): did you mean 'exclude'?"),
    (TOML.format(path="n", extra='url_templte = "x://{path}"'),
     "did you mean 'url_template'?"),
    (TOML.format(path="n", extra="include_archived = false"),
     "does not apply to a markdown source (only to bear sources)"),
    ('debuglog = true\n', "unknown key 'debuglog' in {cfg}: did you mean 'debug_log'?"),
    ('[modle]\npath = "m"\n', "unknown table [modle] in {cfg}: did you mean [model]?"),
])
def test_unknown_tables_and_keys_are_refused_naming_the_nearest(home, text, message):
    cfg = home / "config.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as e:
        config.load()
    assert message.format(cfg=cfg) in str(e.value)


def test_every_key_the_docs_and_setup_write_still_loads(home, tmp_path):
    cfg = home / "config.toml"
    cfg.write_text(f"""debug_log = true
[[sources]]
name = "notes"
type = "markdown"
path = "{tmp_path}"
exclude = ["private/**", "*.tmp.md"]
url_template = "x-bbedit://open?url=file://{{path}}"
new_note_url = "x-bbedit://new?title={{title}}"
pdfs = "linked"
pdf_max_mb = 50

[[sources]]
name = "vault"
type = "obsidian"
path = "{tmp_path}"
pdfs = "all"

[[sources]]
name = "bear"
type = "bear"
include_archived = true
""")
    loaded = config.load()
    assert [s.name for s in loaded.sources] == ["notes", "vault", "bear"]
    assert loaded.warnings == ()
    config.save(loaded)  # what notewell writes, it reads back
    assert config.load().sources == loaded.sources


@pytest.mark.parametrize("glob", ["**", "*", "*.md", "**/*.md", "/**"])
def test_an_exclude_of_every_note_warns(home, glob, caplog):
    write_config(home, extra=f'exclude = ["{glob}"]')
    with caplog.at_level(logging.WARNING, logger="notewell.config"):
        cfg = config.load()
    [warning] = cfg.warnings
    assert f"exclude {glob!r} in [[sources]] 'notes'" in warning and "every note" in warning
    assert warning in caplog.text
    check, _ = doctor.check_config()
    assert check.status == doctor.WARN and "every note" in check.detail


@pytest.mark.parametrize("glob", ["private/**", "*.tmp.md", "drafts/"])
def test_an_exclude_of_some_notes_does_not_warn(home, glob):
    write_config(home, extra=f'exclude = ["{glob}"]')
    assert config.load().warnings == ()


def test_a_relative_path_is_read_from_the_config_files_folder(home, tmp_path, monkeypatch):
    write_config(home, path="notes")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert config.load().sources[0].path == str(home / "notes")
    write_config(home, path="../shared/notes")
    assert config.load().sources[0].path == str(tmp_path / "shared" / "notes")


def test_doctor_and_the_daemons_start_report_a_config_error_without_a_trace(home):
    write_config(home, extra='exlude = ["private/**"]')
    env = subprocess_env(home)
    for command in (["serve"], ["doctor"]):
        out = subprocess.run([sys.executable, "-m", "notewell.model.fake", *command],
                             env=env, capture_output=True, text=True, timeout=120)
        said = out.stdout + out.stderr
        assert out.returncode != 0, command
        assert "unknown key 'exlude'" in said and "did you mean 'exclude'?" in said, said
        assert "Traceback" not in said


def hit_links(engine: Engine, query: str) -> set[tuple[str, str]]:
    with engine.reading() as view:
        return {(h.url, h.path) for h in view.search(query, mode="bm25").hits}


@pytest.mark.parametrize("kind", ["markdown", "obsidian"])
def test_a_moved_folder_moves_every_link_without_a_rebuild(tmp_path, home, kind):
    old = write_notes(tmp_path / "Old Vault", {
        "kitchen.md": "# Kitchen\n\n## Tap\n\nTurn off the water under the sink.\n",
        "deep/garden.md": "# Garden\n\nWater the tomatoes at dusk.\n"})
    (old / ".obsidian").mkdir()
    emb = RecordingEmbedder()
    engine = Engine(Config(sources=(SourceConfig("notes", kind, str(old)),)), embedder=emb)
    engine.sync()
    before = hit_links(engine, "water")
    assert len(before) == 2 and all("Old" in url or "Old" in path for url, path in before)
    engine.close()
    new = tmp_path / "Moved" / "New Vault"
    new.parent.mkdir()
    shutil.move(old, new)  # a rename: the files keep their dates
    emb.texts.clear()
    engine = Engine(Config(sources=(SourceConfig("notes", kind, str(new)),)), embedder=emb)
    [report] = engine.sync()
    assert (report.updated, report.embedded, emb.texts) == (2, 0, [])
    after = hit_links(engine, "water")
    assert len(after) == 2
    for url, path in after:
        assert path.startswith(str(new) + os.sep)
        assert "Old" not in url and ("New" in url)
    # Every passage of a note, not only the note's own link.
    passages = engine.index.db.execute("SELECT url FROM chunks").fetchall()
    assert passages and all("Old" not in u for (u,) in passages)
    engine.close()


def test_another_url_template_relinks_every_note(tmp_path, home):
    root = write_notes(tmp_path / "notes", {"a.md": "# A\n\nThe alpha note.\n"})
    engine = Engine(Config(sources=(SourceConfig("notes", "markdown", str(root)),)),
                    embedder=RecordingEmbedder())
    engine.sync()
    engine.close()
    template = {"url_template": "x-bbedit://open?url=file://{path}"}
    engine = Engine(Config(sources=(SourceConfig("notes", "markdown", str(root), (),
                                                 template),)),
                    embedder=RecordingEmbedder())
    engine.sync()
    [url] = {u for u, _ in hit_links(engine, "alpha")}
    assert url.startswith("x-bbedit://open?url=file://")
    engine.close()
