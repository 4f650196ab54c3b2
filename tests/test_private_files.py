"""What only this user may read (issue 36.7): the home and the log folder are 0700 and the
daemon's log 0600 (with ``debug_log`` it holds queries), made so when created and narrowed
at the daemon's start when an older notewell (or launchd's umask) left them wider; and
``agent stop`` stops the daemon the way ``agent start`` started it, with or without a
systemd user bus."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from helpers import start_daemon
from launcher_helpers import install_stand_ins
from notewell import config
from notewell.ops import login_agent as agent
from notewell.ops import running
from notewell.serve.transport import acquire_lock
from notewell.wire import paths

NO_BUS = {"systemctl": [{"prefix": ["--user"], "rc": 1,
                         "stderr": "Failed to connect to bus: No medium found\n"}]}


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_new_home_and_its_log_are_made_private(tmp_path: Path, user_home: Path,
                                                   monkeypatch):
    home = tmp_path / "new" / "home"
    monkeypatch.setenv("NOTEWELL_HOME", str(home))
    install_stand_ins(tmp_path, monkeypatch)
    old = os.umask(0o022)  # what a terminal or launchd usually leaves
    try:
        config.save(config.Config(()))
        agent.start("linux", spawn=lambda cmd, **kw: None)
    finally:
        os.umask(old)
    assert mode(home) == 0o700
    assert mode(paths.log_dir()) == 0o700
    assert mode(os.path.join(paths.log_dir(), "daemon.log")) == 0o600


def test_the_daemon_narrows_a_home_and_log_left_wide(home: Path, notes_config):
    logs = Path(paths.log_dir())
    logs.mkdir()
    (logs / "daemon.log").write_text("old lines\n")
    for path, wide in ((home, 0o755), (logs, 0o755), (logs / "daemon.log", 0o644)):
        path.chmod(wide)
    d = start_daemon(home)
    try:
        assert (mode(home), mode(logs), mode(logs / "daemon.log")) == (0o700, 0o700, 0o600)
        assert "narrowed" in d.log.read_text()
    finally:
        d.stop()


def test_agent_stop_without_a_user_bus_stops_the_daemon_agent_start_spawned(
        home: Path, user_home: Path, tmp_path: Path, monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    stand.rules(NO_BUS)  # a container, ssh or su session: no systemd --user
    agent.start("linux", spawn=lambda cmd, **kw: None)  # no unit: spawned detached
    paths.ensure_private_dir(paths.runtime_dir())
    lock = acquire_lock(paths.lock_path())  # the spawned daemon, serving
    asked = []

    def ask(request: dict, timeout: float) -> dict:
        asked.append(request["op"])
        os.close(lock)  # it stops: its lock goes with it
        return {"ok": True, "result": {"stopping": True}}

    message = agent.stop("linux", stop_running=lambda: running.stop(ask=ask))
    assert asked == ["stop"] and running.holder() is None
    assert message == f"stopped the daemon serving {home} (pid {os.getpid()})"
    assert stand.args("systemctl") == []  # start used none; neither does stop
    assert agent.stop("linux") == f"no notewell daemon is serving {home}"


def test_agent_stop_with_the_unit_installed_goes_through_systemctl(
        home: Path, user_home: Path, tmp_path: Path, monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    agent.install("linux")
    stand.clear()
    assert agent.stop("linux", stop_running=lambda: 1 / 0) == "stopped notewell.service"
    assert stand.args("systemctl") == [["--user", "stop", "notewell.service"]]
