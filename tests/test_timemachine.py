"""Time Machine skips the index and model folders: on macOS the daemon marks them with the
exclusion attribute ``tmutil addexclusion`` writes (a stand-in records it here, and one
for libSystem checks the calls), doctor reads it back, and off macOS nothing happens."""

from __future__ import annotations

import os
import plistlib
import threading
from pathlib import Path

from notewell import timemachine
from notewell.config import Config
from notewell.engine import Engine
from notewell.model.fake import FakeEmbedder
from notewell.ops import doctor
from notewell.serve import daemon as daemon_mod
from notewell.wire import paths


class FakeXattrs:
    def __init__(self) -> None:
        self.attrs: dict[tuple[str, str], bytes] = {}
        self.sets: list[tuple[str, str, bytes]] = []

    def get(self, path: str, name: str) -> bytes | None:
        return self.attrs.get((path, name))

    def set(self, path: str, name: str, value: bytes) -> None:
        assert os.path.isdir(path)  # marked once it exists
        self.sets.append((path, name, value))
        self.attrs[(path, name)] = value


def test_darwin_marks_the_index_and_model_folders_once(home: Path, monkeypatch):
    monkeypatch.delenv("NOTEWELL_MODEL_DIR", raising=False)
    xattrs = FakeXattrs()
    marked = timemachine.exclude_caches("darwin", xattrs)
    assert marked == [paths.index_dir(), paths.model_dir()]
    for _, name, value in xattrs.sets:
        assert name == "com.apple.metadata:com_apple_backup_excludeItem"
        assert plistlib.loads(value) == "com.apple.backupd"  # a binary plist string
        assert value.startswith(b"bplist00")
    assert oct(os.stat(paths.index_dir()).st_mode & 0o777) == "0o700"
    # Re-checked through the attribute itself: a second start writes nothing.
    assert timemachine.exclude_caches("darwin", xattrs) == []
    assert len(xattrs.sets) == 2
    # Anything else under the home (config.toml) is left to the backup.
    assert all(p in (paths.index_dir(), paths.model_dir()) for p, _, _ in xattrs.sets)


def test_nothing_happens_off_macos(home: Path, monkeypatch):
    monkeypatch.delenv("NOTEWELL_MODEL_DIR", raising=False)
    xattrs = FakeXattrs()
    assert timemachine.exclude_caches("linux", xattrs) == []
    assert xattrs.sets == [] and not os.path.exists(paths.index_dir())
    assert doctor.check_time_machine("linux", xattrs).status == "skip"


def test_doctor_shows_whether_they_are_excluded(home: Path, monkeypatch):
    monkeypatch.delenv("NOTEWELL_MODEL_DIR", raising=False)
    xattrs = FakeXattrs()
    assert doctor.check_time_machine("darwin", xattrs).status == "skip"  # none yet
    os.makedirs(paths.index_dir())
    check = doctor.check_time_machine("darwin", xattrs)
    assert check.status == "warn" and paths.index_dir() in check.detail
    assert "tmutil addexclusion" in check.fix
    timemachine.exclude_caches("darwin", xattrs)
    check = doctor.check_time_machine("darwin", xattrs)
    assert check.line() == "ok   Time Machine: index and model cache excluded"
    xattrs.attrs[(paths.model_dir(), timemachine.ATTRIBUTE)] = b"junk"  # not the value
    assert doctor.check_time_machine("darwin", xattrs).status == "warn"


class FakeLibSystem:
    """libSystem's getxattr/setxattr as ctypes calls them (errno through ctypes)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.stored: dict[tuple[bytes, bytes], bytes] = {}

    def getxattr(self, path, name, buf, size, position, options):
        import ctypes

        self.calls.append(("getxattr", path, name, size, position, options))
        value = self.stored.get((path, name))
        if value is None:
            ctypes.set_errno(timemachine.ENOATTR)
            return -1
        if buf is not None:
            ctypes.memmove(buf, value, len(value))
        return len(value)

    def setxattr(self, path, name, value, size, position, options):
        self.calls.append(("setxattr", path, name, value, size, position, options))
        self.stored[(path, name)] = value[:size]
        return 0


def test_the_libsystem_binding_calls_set_and_getxattr(tmp_path: Path):
    lib = FakeLibSystem()
    xattrs = timemachine.LibSystemXattrs(lib)
    name = timemachine.ATTRIBUTE
    assert xattrs.get(str(tmp_path), name) is None  # ENOATTR: not set
    xattrs.set(str(tmp_path), name, timemachine.VALUE)
    assert lib.calls[-1] == ("setxattr", os.fsencode(tmp_path), name.encode(),
                             timemachine.VALUE, len(timemachine.VALUE), 0, 0)
    assert xattrs.get(str(tmp_path), name) == timemachine.VALUE
    assert timemachine.is_excluded(str(tmp_path), xattrs)


def test_the_daemon_marks_them_when_it_starts(home: Path, notes_config: Config, monkeypatch):
    called = threading.Event()
    monkeypatch.setattr(daemon_mod, "exclude_caches", lambda: called.set())
    engine = Engine(notes_config, embedder=FakeEmbedder())
    d = daemon_mod.Daemon(notes_config, engine_factory=lambda c: engine, use_events=False)
    d.start()
    try:
        assert called.is_set()
    finally:
        d.request_stop()
        d.shutdown()
