"""Shared fixtures: a private NOTEWELL_HOME per test, a small note folder, embedders,
and a daemon running in a subprocess over a real socket."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import start_daemon, wait_synced, write_notes

# The model rewrite (notewell.model.rewrite) is built once per test session, not once per
# test home.
if "NOTEWELL_MODEL_DIR" not in os.environ:
    os.environ["NOTEWELL_MODEL_DIR"] = tempfile.mkdtemp(prefix="notewell-models-")
    atexit.register(shutil.rmtree, os.environ["NOTEWELL_MODEL_DIR"], True)

from notewell import config
from notewell.model.fake import FakeEmbedder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("NOTEWELL_HOME", str(h))
    return h


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    """A stand-in for the zsh client's Python fallback that says it was called, and with
    what."""
    fake = tmp_path / "fake-python"
    fake.write_text('#!/bin/sh\nprintf "FALLBACK %s|" "$@"\n')
    fake.chmod(0o755)
    return fake


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh $HOME (no XDG overrides), for code that looks in the user's folders."""
    h = tmp_path / "user"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return h


@pytest.fixture
def notes_dir(tmp_path: Path) -> Path:
    return write_notes(tmp_path / "notes")


@pytest.fixture
def notes_config(home: Path, notes_dir: Path) -> config.Config:
    cfg = config.Config(sources=(config.SourceConfig(
        "notes", "markdown", str(notes_dir), ("private/**",)),))
    config.save(cfg)
    return config.load()


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def engine(notes_config, fake_embedder, home):
    """An in-process engine (fake embedder) over the small note folder, synced."""
    from notewell.engine import Engine

    e = Engine(notes_config, embedder=fake_embedder)
    e.sync()
    yield e
    e.close()


@pytest.fixture(scope="session")
def real_embedder():
    from notewell.model.runtime import default_embedder

    return default_embedder()


@pytest.fixture
def daemon(home: Path, notes_config: config.Config):
    """A daemon (fake embedder) over the small note folder, synced and ready."""
    d = start_daemon(home)
    wait_synced(d)
    yield d
    d.stop()



