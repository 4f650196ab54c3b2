"""Starting the daemon at login and keeping it up: a launchd LaunchAgent on macOS, a
systemd user service on Linux, behind one interface (install, uninstall, status, start,
stop, restart).

macOS: ``~/Library/LaunchAgents/com.notewell.daemon.plist`` runs this installation's
``notewell serve`` at login (RunAtLoad), again after a crash or failed exit but not after
a clean stop (KeepAlive/SuccessfulExit false, at most every ThrottleInterval seconds),
as an Interactive process (every request is a keystroke waiting; see README), logging to
``~/Library/Logs/notewell/``. It is managed with ``launchctl enable|bootstrap|bootout|
print|kickstart`` in the ``gui/$UID`` domain. A second daemon that finds the lock held
exits 0 (``serve.daemon.run``), which neither KeepAlive/SuccessfulExit nor
Restart=on-failure restarts.

Linux: ``~/.config/systemd/user/notewell.service`` (Restart=on-failure), managed with
``systemctl --user``; logs go to the journal.

No socket activation (README, "Launchers"): the daemon binds its socket before it loads
the model, and a client should fail fast with "not running" rather than wait on a socket
nobody serves during a restart throttle.
"""

from __future__ import annotations

import os
import plistlib
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from notewell.ops import running
from notewell.wire import paths

LABEL = "com.notewell.daemon"
SERVICE = "notewell.service"
THROTTLE_SECONDS = 5
BOOTSTRAP_RETRY_DELAYS = (0.3, 0.7, 1.5)
SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"

Runner = Callable[..., subprocess.CompletedProcess]


class AgentError(Exception):
    """The service manager refused or is missing; the message says what to do."""


@dataclass(frozen=True)
class AgentStatus:
    manager: str  # "launchd" | "systemd"
    unit_path: str
    installed: bool  # the plist / unit file exists
    loaded: bool  # the service manager knows the job
    running: bool
    pid: int | None = None
    detail: str = ""
    logs: str = ""  # where the daemon's output goes under this manager

    def describe(self) -> str:
        if not self.installed and not self.loaded:
            return f"not installed ({self.unit_path} missing)"
        state = "running" + (f" (pid {self.pid})" if self.pid else "") if self.running \
            else ("loaded, not running" if self.loaded else "installed, not loaded")
        return f"{state} · {self.manager} · {self.unit_path}" + (
            f" · {self.detail}" if self.detail else "")


# -- what runs ------------------------------------------------------------------------------


def program(python: str | None = None) -> list[str]:
    """The daemon's command line: the venv's ``notewell`` script beside the interpreter,
    else ``python -m notewell``; always absolute."""
    python = os.path.abspath(python or sys.executable)
    script = os.path.join(os.path.dirname(python), "notewell")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return [script, "serve"]
    return [python, "-m", "notewell", "serve"]


def record_command() -> None:
    """Write this installation's ``notewell`` command (``paths.command_record``) for
    launchers that cannot have it filled in when they are built (Raycast). Best effort."""
    import contextlib
    import json

    with contextlib.suppress(OSError):
        paths.write_atomic(paths.command_record(),
                           (json.dumps(program()[:-1]) + "\n").encode())


def environment(prog: list[str], home: str | None = None) -> dict[str, str]:
    env = {"PATH": f"{os.path.dirname(prog[0])}:{SYSTEM_PATH}"}
    home = home if home is not None else os.environ.get("NOTEWELL_HOME")
    if home:
        env["NOTEWELL_HOME"] = os.path.abspath(os.path.expanduser(home))
    return env


def launchd_plist(prog: list[str], env: dict[str, str], log_dir: str) -> dict:
    return {
        "Label": LABEL,
        "ProgramArguments": list(prog),
        "RunAtLoad": True,
        # Restart after a crash or an error exit, not after a clean stop (exit 0).
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": THROTTLE_SECONDS,
        # Interactive: no background throttling of CPU or I/O; someone is waiting for each
        # answer. Adaptive would need XPC to tell launchd when work is interactive.
        "ProcessType": "Interactive",
        "EnvironmentVariables": dict(env),
        "StandardOutPath": os.path.join(log_dir, "daemon.out.log"),
        "StandardErrorPath": os.path.join(log_dir, "daemon.log"),
    }


def systemd_unit(prog: list[str], env: dict[str, str]) -> str:
    lines = [
        "# notewell's daemon, written by `notewell agent install` (edits are overwritten).",
        "[Unit]",
        "Description=notewell daemon: semantic search over your notes",
        "StartLimitIntervalSec=120",
        "StartLimitBurst=10",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(_systemd_quote(a) for a in prog),
        "Restart=on-failure",
        f"RestartSec={THROTTLE_SECONDS}",
    ]
    lines += [f"Environment={_systemd_quote(f'{k}={v}')}" for k, v in sorted(env.items())]
    lines += ["", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def _systemd_quote(s: str) -> str:
    escaped = s.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{escaped}"'


# -- service managers -----------------------------------------------------------------------


class Launchd:
    manager = "launchd"

    def __init__(self, run: Runner = subprocess.run, user_home: str | None = None,
                 uid: int | None = None) -> None:
        self.run = run
        self.user_home = user_home or os.path.expanduser("~")
        self.uid = os.getuid() if uid is None else uid

    @property
    def unit_path(self) -> str:
        return os.path.join(self.user_home, "Library", "LaunchAgents", f"{LABEL}.plist")

    @property
    def domain(self) -> str:
        return f"gui/{self.uid}"

    @property
    def target(self) -> str:
        return f"{self.domain}/{LABEL}"

    def render(self, prog: list[str], env: dict[str, str]) -> bytes:
        return plistlib.dumps(launchd_plist(prog, env, self.log_dir()), sort_keys=True)

    def log_dir(self) -> str:
        return os.path.join(self.user_home, "Library", "Logs", "notewell")

    def install(self, prog: list[str], env: dict[str, str]) -> str:
        paths.ensure_private_dir(self.log_dir())  # launchd writes daemon.log there
        paths.write_atomic(self.unit_path, self.render(prog, env))
        if self._launchctl("print", self.target, check=False).returncode == 0:
            self._launchctl("bootout", self.target, check=False)
        # Switched off in Login Items, the job is disabled and bootstrap fails: installing
        # is asking for it, so enable it (a no-op when it is enabled).
        self._launchctl("enable", self.target, check=False)
        # bootout finishes asynchronously; bootstrap can fail (EIO) until it has.
        for delay in (*BOOTSTRAP_RETRY_DELAYS, None):
            result = self._launchctl("bootstrap", self.domain, self.unit_path, check=False)
            if result.returncode == 0 or delay is None:
                break
            time.sleep(delay)
        if result.returncode != 0:
            raise AgentError(f"launchctl bootstrap {self.domain} {self.unit_path} failed: "
                             f"{_err(result)}; check the plist with `plutil -lint` and "
                             "System Settings > General > Login Items")
        return f"installed {self.unit_path} and started {LABEL}"

    def uninstall(self) -> str:
        self._launchctl("bootout", self.target, check=False)
        removed = _remove(self.unit_path)
        return f"stopped {LABEL}" + (f" and removed {self.unit_path}" if removed else "")

    def status(self) -> AgentStatus:
        installed = os.path.exists(self.unit_path)
        result = self._launchctl("print", self.target, check=False)
        logs = self.log_dir()
        if result.returncode != 0:
            return AgentStatus(self.manager, self.unit_path, installed, False, False, logs=logs)
        fields = _launchctl_fields(result.stdout)
        pid = int(fields["pid"]) if fields.get("pid", "").isdigit() else None
        detail = (f"last exit code {fields['last exit code']}"
                  if fields.get("last exit code") not in (None, "(never exited)") else "")
        return AgentStatus(self.manager, self.unit_path, installed, True,
                           fields.get("state") == "running", pid, detail, logs)

    def start(self) -> str:
        if self._launchctl("print", self.target, check=False).returncode != 0:
            if not os.path.exists(self.unit_path):
                raise AgentError("the agent is not installed: run `notewell agent install`")
            result = self._launchctl("bootstrap", self.domain, self.unit_path, check=False)
            if result.returncode != 0:  # not enabled here: switching it off was the user's
                raise AgentError(f"launchctl bootstrap failed: {_err(result)}; if notewell "
                                 "is switched off in System Settings > General > Login "
                                 "Items, switch it on, or run `notewell agent install`")
        self._launchctl("kickstart", self.target)
        return f"started {LABEL}"

    def stop(self) -> str:
        # A clean SIGTERM exit is a successful one, so KeepAlive leaves it stopped.
        self._launchctl("kill", "SIGTERM", self.target)
        return f"stopped {LABEL} (it starts again at login, or `notewell agent start`)"

    def restart(self) -> str:
        self._launchctl("kickstart", "-k", self.target)
        return f"restarted {LABEL}"

    def _launchctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return _call(self.run, ["launchctl", *args], check)


class Systemd:
    manager = "systemd"

    def __init__(self, run: Runner = subprocess.run, config_home: str | None = None) -> None:
        self.run = run
        self.config_home = config_home or os.environ.get("XDG_CONFIG_HOME") or \
            os.path.join(os.path.expanduser("~"), ".config")

    @property
    def unit_path(self) -> str:
        return os.path.join(self.config_home, "systemd", "user", SERVICE)

    def render(self, prog: list[str], env: dict[str, str]) -> bytes:
        return systemd_unit(prog, env).encode()

    def install(self, prog: list[str], env: dict[str, str]) -> str:
        paths.write_atomic(self.unit_path, self.render(prog, env))
        self._systemctl("daemon-reload")
        self._systemctl("enable", "--now", SERVICE)
        # enable --now leaves an already running daemon on its old unit: restart it.
        self._systemctl("restart", SERVICE)
        return f"installed {self.unit_path} and started {SERVICE}"

    def uninstall(self) -> str:
        self._systemctl("disable", "--now", SERVICE, check=False)
        removed = _remove(self.unit_path)
        self._systemctl("daemon-reload", check=False)
        return f"stopped {SERVICE}" + (f" and removed {self.unit_path}" if removed else "")

    def status(self) -> AgentStatus:
        installed = os.path.exists(self.unit_path)
        result = self._systemctl("show", SERVICE, "--property=LoadState,ActiveState,"
                                 "SubState,MainPID,UnitFileState", check=False)
        fields = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
        loaded = result.returncode == 0 and fields.get("LoadState") == "loaded"
        running = fields.get("ActiveState") == "active"
        pid = int(fields["MainPID"]) if fields.get("MainPID", "0").isdigit() and \
            fields.get("MainPID", "0") != "0" else None
        detail = " ".join(f"{k}={fields[k]}" for k in ("SubState", "UnitFileState")
                          if fields.get(k))
        return AgentStatus(self.manager, self.unit_path, installed, loaded, running, pid,
                           detail, f"journalctl --user -u {SERVICE}")

    def start(self) -> str:
        if not os.path.exists(self.unit_path):
            raise AgentError("the agent is not installed: run `notewell agent install`")
        self._systemctl("start", SERVICE)
        return f"started {SERVICE}"

    def stop(self) -> str:
        self._systemctl("stop", SERVICE)
        return f"stopped {SERVICE}"

    def restart(self) -> str:
        self._systemctl("restart", SERVICE)
        return f"restarted {SERVICE}"

    def _systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return _call(self.run, ["systemctl", "--user", *args], check)


def manager(platform: str | None = None, run: Runner = subprocess.run) -> Launchd | Systemd:
    """The service manager for ``platform`` (default: this machine's)."""
    platform = platform or sys.platform
    if platform == "darwin":
        return Launchd(run)
    if platform.startswith("linux"):
        return Systemd(run)
    raise AgentError(f"no auto-start support for {platform}; run `notewell serve` yourself")


# -- the commands ---------------------------------------------------------------------------


def install(platform: str | None = None, run: Runner = subprocess.run,
            python: str | None = None,
            stop_running: Callable[[], int | None] = running.stop) -> str:
    """Write the unit and start the agent's daemon. A daemon already serving this home
    (started by hand, by a launcher, or by the agent before) is stopped first, and waited
    for: the agent's daemon would otherwise find the lock held and exit."""
    record_command()
    prog = program(python)
    mgr = manager(platform, run)
    pid = _stop(stop_running)
    done = mgr.install(prog, environment(prog))
    return done + (f" (stopped the daemon that was running, pid {pid})" if pid else "")


def uninstall(platform: str | None = None, run: Runner = subprocess.run) -> str:
    return manager(platform, run).uninstall()


def status(platform: str | None = None, run: Runner = subprocess.run) -> AgentStatus:
    return manager(platform, run).status()


def restart(platform: str | None = None, run: Runner = subprocess.run) -> str:
    return manager(platform, run).restart()


def stop(platform: str | None = None, run: Runner = subprocess.run,
         stop_running: Callable[[], int | None] = running.stop) -> str:
    """Stop the daemon the way ``start`` started it: through the agent when it is
    installed, else the daemon serving this home, found by its lock (``start`` spawned it
    detached, or it runs in a terminal), with no service manager involved: on Linux
    without a systemd user bus, ``systemctl --user`` could not stop it."""
    mgr = manager(platform, run)
    if os.path.exists(mgr.unit_path):
        return mgr.stop()
    pid = _stop(stop_running)
    if pid is None:
        return f"no notewell daemon is serving {paths.home()}"
    return f"stopped the daemon serving {paths.home()} (pid {pid or '?'})"


def _stop(stop_running: Callable[[], int | None]) -> int | None:
    """``stop_running()``, a daemon that would not stop an ``AgentError``."""
    try:
        return stop_running()
    except running.StillRunning as e:
        raise AgentError(str(e)) from None


def start(platform: str | None = None, run: Runner = subprocess.run,
          spawn: Callable[..., object] = subprocess.Popen) -> str:
    """Start the daemon: through the agent when it is installed, else as a detached
    ``notewell serve`` logging to the log directory (what Alfred's "start" item does)."""
    mgr = manager(platform, run)
    if os.path.exists(mgr.unit_path):
        return mgr.start()
    prog = program()
    log_dir = paths.ensure_private_dir(paths.log_dir())
    log_path = os.path.join(log_dir, "daemon.log")
    # 0600: with ``debug_log`` the log holds queries.
    with open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log:
        proc = spawn(prog, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                     start_new_session=True, env=dict(os.environ))
    started = (f"started `{' '.join(prog)}` in the background (log: {log_path}); "
               "`notewell agent install` starts it at login")
    if not hasattr(proc, "poll"):  # a stand-in spawn gives no process to watch
        return started
    now = running.wait_started(proc)
    if now["state"] == "exited":
        raise AgentError(f"`{' '.join(prog)}` exited at once (code {now['code']}): "
                         f"{_last_line(log_path)}; see {log_path}")
    if now["state"] == "error":
        raise AgentError(f"the daemon is running but could not start: {now.get('problem')}")
    return started


def _last_line(path: str) -> str:
    """The log's last line (what a daemon that exited said last), or a note that it is
    empty (a full disk may have kept it from writing anything)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 4096))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        lines = []
    return lines[-1] if lines else "it wrote nothing to its log"


def installed_program(platform: str | None = None) -> list[str] | None:
    """The command line the installed plist / unit runs (None if none is installed or it
    cannot be read): ``doctor`` compares it with this installation's ``program()``, since
    an agent installed from an older or another notewell keeps running that one."""
    mgr = manager(platform)
    try:
        with open(mgr.unit_path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if isinstance(mgr, Launchd):
        try:
            args = plistlib.loads(data).get("ProgramArguments")
        except Exception:
            return None
        return [str(a) for a in args] if isinstance(args, list) else None
    import shlex

    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("ExecStart="):
            try:  # _systemd_quote's escapes, read back
                words = shlex.split(line[len("ExecStart="):])
            except ValueError:
                return None
            return [w.replace("%%", "%").replace("$$", "$") for w in words]
    return None


# -- helpers --------------------------------------------------------------------------------


def _call(run: Runner, cmd: list[str], check: bool) -> subprocess.CompletedProcess:
    try:
        result = run(cmd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise AgentError(f"`{cmd[0]}` is not on PATH; notewell's agent needs it") from None
    if check and result.returncode != 0:
        raise AgentError(f"`{' '.join(cmd)}` failed: {_err(result)}")
    return result


def _err(result: subprocess.CompletedProcess) -> str:
    text = (result.stderr or result.stdout or "").strip()
    return text.splitlines()[-1] if text else f"exit code {result.returncode}"


def _launchctl_fields(text: str) -> dict[str, str]:
    """Top-level ``key = value`` lines of ``launchctl print`` (nested blocks skipped)."""
    fields: dict[str, str] = {}
    depth = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith("{"):
            depth += 1
            continue
        if stripped == "}":
            depth -= 1
            continue
        if depth == 1 and " = " in stripped:
            key, value = stripped.split(" = ", 1)
            fields.setdefault(key.strip(), value.strip())
    return fields


def _remove(path: str) -> bool:
    try:
        os.remove(path)
        return True
    except FileNotFoundError:
        return False


# -- the examples checked in under launchd/ ---------------------------------------------------

PLACEHOLDER_PROGRAM = ["/path/to/notewell/.venv/bin/notewell", "serve"]


def examples() -> dict[str, bytes]:
    """The units as ``notewell agent install`` writes them, with placeholder paths; kept in
    ``launchd/`` for review (a test checks they match)."""
    env = environment(PLACEHOLDER_PROGRAM, home="")
    return {
        f"{LABEL}.plist": Launchd(user_home="/Users/you", uid=501).render(
            PLACEHOLDER_PROGRAM, env),
        SERVICE: Systemd(config_home="/home/you/.config").render(PLACEHOLDER_PROGRAM, env),
    }


if __name__ == "__main__":  # python -m notewell.ops.login_agent DIR: refresh the examples
    for name, data in examples().items():
        paths.write_atomic(os.path.join(sys.argv[1], name), data)
