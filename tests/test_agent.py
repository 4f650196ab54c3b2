"""The auto-start agent: the LaunchAgent plist and the systemd unit as written, and the
launchctl / systemctl calls, made against stand-ins that record their arguments."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, subprocess_env
from launcher_helpers import install_stand_ins
from notewell.ops import login_agent as agent

LAUNCHCTL_PRINT = """gui/501/com.notewell.daemon = {
\tactive count = 1
\tpath = /Users/you/Library/LaunchAgents/com.notewell.daemon.plist
\tstate = running
\tprogram = /v/bin/notewell
\tenvironment = {
\t\tstate = not-this-one
\t}
\tpid = 4242
\tlast exit code = (never exited)
}
"""


def test_program_is_this_installations_notewell_serve():
    prog = agent.program()
    assert os.path.isabs(prog[0]) and os.path.exists(prog[0])
    assert prog[-1] == "serve"
    assert prog == [str(Path(sys.executable).parent / "notewell"), "serve"] or \
        prog == [os.path.abspath(sys.executable), "-m", "notewell", "serve"]


def test_launchd_plist_keys_types_and_absolute_paths(user_home: Path, monkeypatch):
    monkeypatch.setenv("NOTEWELL_HOME", "~/nw-home")
    prog = agent.program()
    data = agent.Launchd(user_home=str(user_home), uid=501).render(
        prog, agent.environment(prog))
    plist = plistlib.loads(data)
    assert plist["Label"] == "com.notewell.daemon"
    assert plist["ProgramArguments"] == prog
    assert all(isinstance(a, str) for a in plist["ProgramArguments"])
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert isinstance(plist["ThrottleInterval"], int) and 1 <= plist["ThrottleInterval"] <= 30
    assert plist["ProcessType"] == "Interactive"
    logs = user_home / "Library" / "Logs" / "notewell"
    assert plist["StandardErrorPath"] == str(logs / "daemon.log")
    assert plist["StandardOutPath"] == str(logs / "daemon.out.log")
    env = plist["EnvironmentVariables"]
    assert env["NOTEWELL_HOME"] == str(user_home / "nw-home")  # expanded, absolute
    assert env["PATH"].split(":")[0] == os.path.dirname(prog[0])
    for key in ("ProgramArguments", "StandardErrorPath", "StandardOutPath"):
        values = plist[key] if isinstance(plist[key], list) else [plist[key]]
        assert os.path.isabs(values[0])


def test_no_notewell_home_means_none_in_the_environment(monkeypatch):
    monkeypatch.delenv("NOTEWELL_HOME", raising=False)
    assert "NOTEWELL_HOME" not in agent.environment(agent.program())


def test_launchctl_calls_for_install_status_restart_stop_uninstall(home: Path,
                                                                   user_home: Path,
                                                                   tmp_path: Path,
                                                                   monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    uid = os.getuid()
    target = f"gui/{uid}/com.notewell.daemon"
    plist_path = user_home / "Library" / "LaunchAgents" / "com.notewell.daemon.plist"
    stand.rules({"launchctl": [{"prefix": ["print"], "rc": 113,
                                "stderr": "Could not find service"}]})
    assert "installed" in agent.install("darwin")
    assert stand.args("launchctl") == [["print", target], ["enable", target],
                                       ["bootstrap", f"gui/{uid}", str(plist_path)]]
    assert plistlib.loads(plist_path.read_bytes())["Label"] == "com.notewell.daemon"
    assert (user_home / "Library" / "Logs" / "notewell").is_dir()

    # Installing again while loaded: bootout first, then bootstrap the new plist.
    stand.clear()
    stand.rules({"launchctl": [{"prefix": ["print"], "stdout": LAUNCHCTL_PRINT}]})
    agent.install("darwin")
    assert [a[0] for a in stand.args("launchctl")] == ["print", "bootout", "enable",
                                                       "bootstrap"]

    st = agent.status("darwin")
    assert (st.installed, st.loaded, st.running, st.pid) == (True, True, True, 4242)
    assert st.manager == "launchd" and "running (pid 4242)" in st.describe()

    stand.clear()
    agent.restart("darwin")
    agent.stop("darwin")
    agent.start("darwin")
    assert stand.args("launchctl") == [["kickstart", "-k", target],
                                       ["kill", "SIGTERM", target],
                                       ["print", target], ["kickstart", target]]
    stand.clear()
    assert "removed" in agent.uninstall("darwin")
    assert stand.args("launchctl") == [["bootout", target]]
    assert not plist_path.exists()


def test_bootstrap_failure_is_an_error_that_says_what_to_check(home: Path, user_home: Path,
                                                               tmp_path: Path, monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    monkeypatch.setattr(agent, "BOOTSTRAP_RETRY_DELAYS", (0.0,))
    stand.rules({"launchctl": [{"prefix": ["print"], "rc": 113},
                               {"prefix": ["bootstrap"], "rc": 5,
                                "stderr": "Bootstrap failed: 5: Input/output error"}]})
    with pytest.raises(agent.AgentError, match=r"Input/output error.*plutil -lint"):
        agent.install("darwin")
    assert [a[0] for a in stand.args("launchctl")].count("bootstrap") == 2  # retried once


def test_status_when_not_loaded(user_home: Path, tmp_path: Path, monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    stand.rules({"launchctl": [{"prefix": ["print"], "rc": 113}]})
    st = agent.status("darwin")
    assert not st.installed and not st.loaded and not st.running
    assert "not installed" in st.describe()


def test_missing_launchctl_is_a_clear_error(user_home: Path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(agent.AgentError, match=r"launchctl.*not on PATH"):
        agent.restart("darwin")


def test_systemctl_calls_and_unit(home: Path, user_home: Path, tmp_path: Path,
                                  monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    unit = user_home / ".config" / "systemd" / "user" / "notewell.service"
    agent.install("linux")
    assert unit.exists()
    assert stand.args("systemctl") == [["--user", "daemon-reload"],
                                       ["--user", "enable", "--now", "notewell.service"],
                                       ["--user", "restart", "notewell.service"]]
    stand.rules({"systemctl": [{"prefix": ["--user", "show"], "stdout":
                                "LoadState=loaded\nActiveState=active\nSubState=running\n"
                                "MainPID=777\nUnitFileState=enabled\n"}]})
    st = agent.status("linux")
    assert (st.loaded, st.running, st.pid) == (True, True, 777)
    stand.clear()
    agent.uninstall("linux")
    assert stand.args("systemctl")[0] == ["--user", "disable", "--now", "notewell.service"]
    assert not unit.exists()


def test_systemd_unit_quotes_paths_and_escapes_specifiers():
    text = agent.systemd_unit(["/opt/my apps/bin/notewell", "serve"],
                              {"PATH": "/x", "NOTEWELL_HOME": "/home/a 100%/$n"})
    assert 'ExecStart="/opt/my apps/bin/notewell" "serve"' in text
    assert 'Environment="NOTEWELL_HOME=/home/a 100%%/$$n"' in text
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("NOTEWELL_HOME", str(tmp_path / "home with space"))
    prog = agent.program()
    good = tmp_path / "notewell.service"
    good.write_text(agent.systemd_unit(prog, agent.environment(prog)))
    out = subprocess.run(["systemd-analyze", "verify", str(good)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "notewell.service:" not in out.stderr, out.stderr
    # The check has teeth: a bad setting is reported against the file.
    bad = tmp_path / "bad" / "notewell.service"
    bad.parent.mkdir()
    bad.write_text(good.read_text().replace("Restart=on-failure", "Restart=sometimes"))
    out = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True,
                         text=True, timeout=60)
    assert "notewell.service:" in out.stderr


def test_start_without_an_agent_spawns_a_detached_daemon(home: Path, user_home: Path,
                                                         tmp_path: Path, monkeypatch):
    install_stand_ins(tmp_path, monkeypatch)
    spawned = []
    message = agent.start("linux", spawn=lambda cmd, **kw: spawned.append((cmd, kw)))
    (cmd, kw), = spawned
    assert cmd == agent.program() and kw["start_new_session"] is True
    assert kw["env"]["NOTEWELL_HOME"] == str(home)
    assert "notewell agent install" in message


def test_checked_in_examples_match_the_generator():
    for name, data in agent.examples().items():
        assert (REPO / "launchd" / name).read_bytes() == data, \
            "run: python -m notewell.ops.login_agent launchd"
    plist = plistlib.loads((REPO / "launchd" / "com.notewell.daemon.plist").read_bytes())
    assert plist["Label"] == "com.notewell.daemon"


def test_cli_agent_status_and_unsupported_platform(home: Path, user_home: Path,
                                                   tmp_path: Path, monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    env = subprocess_env(home, **stand.env(), HOME=str(user_home))
    out = subprocess.run([sys.executable, "-m", "notewell", "agent", "status"],
                         capture_output=True, text=True, env=env, timeout=60)
    if sys.platform.startswith("linux"):
        assert out.returncode == 1 and "not installed" in out.stdout
        assert stand.args("systemctl")[0][:2] == ["--user", "show"]
    with pytest.raises(agent.AgentError, match="notewell serve"):
        agent.manager("win32")


@pytest.mark.parametrize("platform", ["darwin", "linux"])
def test_the_installed_program_is_read_back_for_doctor(user_home: Path, tmp_path: Path,
                                                       monkeypatch, platform: str):
    """``doctor`` compares what the installed agent runs with this installation: after an
    upgrade to another place the agent would keep running the old one."""
    from notewell.ops import doctor

    install_stand_ins(tmp_path, monkeypatch)
    assert agent.installed_program(platform) is None
    odd = ["/opt/my apps 100%/$bin/notewell", "serve"]
    mgr = agent.manager(platform)
    mgr.install(odd, agent.environment(odd))
    assert agent.installed_program(platform) == odd
    check = doctor.check_agent(platform, subprocess.run)  # the stand-ins are on PATH
    assert check.status == "FAIL" and "not this installation" in check.detail
    assert "notewell agent install" in check.fix
    agent.install(platform)
    assert agent.installed_program(platform) == agent.program()


def test_install_enables_the_job_before_bootstrapping_it(home: Path, user_home: Path,
                                                         tmp_path: Path, monkeypatch):
    # Switched off in Login Items, the job is disabled and a bare bootstrap fails.
    stand = install_stand_ins(tmp_path, monkeypatch)
    target = f"gui/{os.getuid()}/com.notewell.daemon"
    stand.rules({"launchctl": [{"prefix": ["print"], "rc": 113}]})
    agent.install("darwin", stop_running=lambda: None)
    calls = stand.args("launchctl")
    assert ["enable", target] in calls
    assert calls.index(["enable", target]) < [c[0] for c in calls].index("bootstrap")


def hold_the_lock() -> int:
    from notewell.serve.transport import acquire_lock
    from notewell.wire import paths

    paths.ensure_private_dir(paths.runtime_dir())
    return acquire_lock(paths.lock_path())


def test_install_stops_a_daemon_started_by_hand_and_waits_for_it(
        home: Path, user_home: Path, tmp_path: Path, monkeypatch):
    from notewell.ops import running

    stand = install_stand_ins(tmp_path, monkeypatch)
    stand.rules({"launchctl": [{"prefix": ["print"], "rc": 113}]})
    lock = hold_the_lock()  # a daemon of this home, started by hand (not by launchd)
    asked: list[tuple[dict, list]] = []

    def ask(request: dict, timeout: float) -> dict:
        asked.append((request, stand.args("launchctl")))
        os.close(lock)  # it stops: its lock goes with it
        return {"ok": True, "result": {"stopping": True}}

    message = agent.install("darwin", stop_running=lambda: running.stop(ask=ask))
    (request, launchctl_then), = asked
    assert request["op"] == "stop"
    assert launchctl_then == []  # asked before launchd was told anything
    assert [c[0] for c in stand.args("launchctl")] == ["print", "enable", "bootstrap"]
    assert f"pid {os.getpid()}" in message
    assert running.holder() is None


def test_a_daemon_that_refuses_to_stop_gets_sigterm_and_install_says_when_it_stays(
        home: Path, user_home: Path, tmp_path: Path, monkeypatch):
    from notewell.ops import running

    stand = install_stand_ins(tmp_path, monkeypatch)
    lock = hold_the_lock()
    killed: list[tuple[int, int]] = []
    refuse = {"ok": False, "error": {"code": "version_mismatch", "message": "old"}}
    try:
        with pytest.raises(agent.AgentError, match=r"did not stop.*kill"):
            agent.install("darwin", stop_running=lambda: running.stop(
                ask=lambda r, timeout: refuse, kill=lambda *a: killed.append(a),
                timeout=0.2))
        assert killed == [(os.getpid(), 15)]  # SIGTERM to the lock's pid
        assert stand.args("launchctl") == []  # nothing installed over a running daemon
    finally:
        os.close(lock)
    # The timed-out wait's thread takes the freed lock for a moment (and lets it go): no
    # daemon runs once it has.
    deadline = time.monotonic() + 10
    while running.holder() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running.stop(ask=lambda r, timeout: pytest.fail("nobody to ask")) is None


def test_start_of_an_agent_switched_off_says_where_to_switch_it_on(
        home: Path, user_home: Path, tmp_path: Path, monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    stand.rules({"launchctl": [{"prefix": ["print"], "rc": 113}]})
    agent.install("darwin", stop_running=lambda: None)
    stand.clear()
    stand.rules({"launchctl": [{"prefix": ["print"], "rc": 113},
                               {"prefix": ["bootstrap"], "rc": 5,
                                "stderr": "Bootstrap failed: 5: Input/output error"}]})
    with pytest.raises(agent.AgentError, match=r"Input/output error.*Login Items"):
        agent.start("darwin")
    # Starting never enables it: an agent switched off stays off unless installed again.
    assert "enable" not in [c[0] for c in stand.args("launchctl")]
