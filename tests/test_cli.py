"""The notewell command: every subcommand documented, and the wiring of the main ones."""

from __future__ import annotations

import argparse
import json
import os
import subprocess

import pytest
from helpers import REPO, notewell_command, subprocess_env, write_notes
from notewell.cli.parser import build_parser
from notewell.model.fake import FakeEmbedder


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_subcommand_has_a_handler_help_and_a_readme_entry():
    readme = (REPO / "README.md").read_text()
    from notewell.cli import manage, reads  # noqa: F401  (importing them registers commands)
    from notewell.cli.common import COMMANDS

    subs = subcommands()
    assert set(subs) == set(COMMANDS)
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in action._choices_actions}
    for name, sub in subs.items():
        assert helps.get(name), f"`notewell {name}` has no help line"
        assert sub.description, f"`notewell {name}` has no description"
        assert f"notewell {name}" in readme, f"README does not document `notewell {name}`"


def run(home, *args, **env):
    return subprocess.run(notewell_command(*args), capture_output=True,
                          text=True, env=subprocess_env(home, **env),
                          timeout=60)


def test_index_search_status_without_a_daemon(home, notes_config):
    out = run(home, "index")
    assert out.returncode == 0, out.stderr
    assert "4 added" in out.stdout
    out = run(home, "search", "banana", "--json")
    hits = json.loads(out.stdout)
    for key in ("note_id", "title", "source", "url", "path", "tags", "heading_path", "snippet",
                "score"):
        assert key in hits[0]
    status = json.loads(run(home, "status", "--json").stdout)
    assert status["notes"] == 4 and status["index_version"] >= 1
    assert status["sources"][0]["name"] == "notes" and status["sources"][0]["last_sync"]


def test_a_rebuild_that_cannot_read_a_source_leaves_the_live_index(home, notes_dir, tmp_path):
    """Nothing is lost: the notes of a source that cannot be read now stay searchable."""
    from notewell import config
    from notewell.index import store
    from notewell.wire import paths

    other = tmp_path / "other"
    other.mkdir()
    (other / "tea.md").write_text("# Tea\n\nSteeping green tea leaves.\n")
    config.save(config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes_dir)),
                                       config.SourceConfig("other", "markdown", str(other)))))
    assert run(home, "index").returncode == 0
    live = store.current_path(paths.index_dir())
    other.rename(tmp_path / "away")
    out = run(home, "index", "--rebuild")
    assert out.returncode == 1 and "the live index is unchanged" in out.stderr
    assert store.current_path(paths.index_dir()) == live
    hits = json.loads(run(home, "search", "green tea", "--json").stdout)
    assert hits[0]["note_id"] == "other:tea.md"


def test_index_without_sources_says_what_to_do(home):
    out = run(home, "index")
    assert out.returncode == 1 and "[[sources]]" in out.stderr


def test_bad_config_is_a_clear_error(home):
    (home / "config.toml").write_text("[[sources]]\nname = 'x'\ntype = 'evernote'\n")
    out = run(home, "status")
    assert out.returncode == 1 and "type" in out.stderr and "Traceback" not in out.stderr


def test_search_through_the_daemon(daemon):
    out = run(daemon.home, "search", "lisbon", "--limit", "1")
    assert out.returncode == 0 and "Lisbon weekend" in out.stdout


@pytest.mark.parametrize("args", [["--help"], ["search", "--help"], ["index", "--help"]])
def test_help_exits_zero(home, args):
    assert run(home, *args).returncode == 0


def test_a_closed_pipe_ends_quietly(home, notes_config):
    """`notewell search git | head -1`: no BrokenPipeError traceback once the reader left."""
    assert run(home, "index").returncode == 0
    read, write = os.pipe()
    os.close(read)  # the reader has gone before anything is written
    try:
        out = subprocess.run(notewell_command("search", "banana"), stdout=write,
                             stderr=subprocess.PIPE, text=True, env=subprocess_env(home),
                             timeout=60)
    finally:
        os.close(write)
    assert out.stderr == "" and out.returncode == 141


class InterruptedEmbedder(FakeEmbedder):
    """Ctrl-C arriving once more than ``after`` texts were embedded."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def embed_batch(self, texts):
        if sum(self.calls) + len(texts) > self.after:
            raise KeyboardInterrupt
        return super().embed_batch(texts)


def test_ctrl_c_during_index_says_what_was_kept_and_how_to_go_on(home, tmp_path, capsys):
    from notewell import cli, config
    from notewell.engine import Engine

    notes = write_notes(tmp_path / "many", {f"n{i:02}.md": f"# Note {i}\n\nabout topic{i}\n"
                                            for i in range(40)})
    config.save(config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes)),)))
    # The first batch (sync.NOTES_PER_BATCH = 32 notes: a passage and a title each) is
    # written whole before Ctrl-C arrives in the second.
    assert cli.main(["index", "--quiet"], embedder=lambda: InterruptedEmbedder(70)) == 130
    err = capsys.readouterr().err
    assert "interrupted: the notes indexed so far are kept" in err
    assert "run `notewell index` again" in err
    engine = Engine(config.load(), embedder=FakeEmbedder())
    with engine.reading() as view:
        kept = view.status()["notes"]
    engine.close()
    assert 0 < kept < 40  # what was written before Ctrl-C stays, consistent
    assert cli.main(["index", "--quiet"], embedder=FakeEmbedder) == 0
    engine = Engine(config.load(), embedder=FakeEmbedder())
    with engine.reading() as view:
        assert view.status()["notes"] == 40 and not engine.index.consistency_problems()
    engine.close()


def test_similar_to_an_unknown_note_is_an_error(home, notes_config):
    assert run(home, "index").returncode == 0
    out = run(home, "similar", "notes:nope.md")
    assert out.returncode == 1 and "no note with id 'notes:nope.md'" in out.stderr
    known = run(home, "similar", "notes:kitchen/banana-bread.md", "--json")
    assert known.returncode == 0 and json.loads(known.stdout)
