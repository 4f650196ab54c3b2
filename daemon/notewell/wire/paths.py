"""Where notewell keeps its files: one function per path, one environment override.

Everything lives under ``NOTEWELL_HOME`` (config, index, logs); the socket lives in a
0700 runtime directory. Imported by the per-keystroke client, which runs without ``os``
(importing it costs 1.2 ms, a sixth of the interpreter's start; bench/keystroke.py): the
path functions use the built-in ``posix`` module and string joins, and only the
daemon-side helpers import ``os``.
"""

import posix
import sys

APP = "notewell"
# macOS limits sun_path to 104 bytes including the NUL; Linux to 108.
MAX_SOCKET_PATH = 103


def _env(name: str) -> str | None:
    value = posix.environ.get(name.encode())  # bytes on POSIX, as os.environb
    return value.decode("utf-8", "surrogateescape") if value else None


def _join(*parts: str) -> str:
    out = parts[0]
    for part in parts[1:]:
        out = part if part.startswith("/") else (out.rstrip("/") + "/" + part if out
                                                 else part)
    return out


def _user_home() -> str:
    found = _env("HOME")
    if found:
        return found
    import pwd

    return pwd.getpwuid(posix.getuid()).pw_dir


def _absolute(path: str) -> str:
    """``os.path.abspath(os.path.expanduser(path))`` without ``os``."""
    if path == "~" or path.startswith("~/"):
        path = _user_home() + path[1:]
    elif path.startswith("~"):
        import os

        path = os.path.expanduser(path)  # ~user: rare enough to pay for os
    if not path.startswith("/"):
        path = _join(posix.getcwd(), path)
    parts: list[str] = []
    for part in path.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part and part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def home() -> str:
    """The notewell home directory: ``$NOTEWELL_HOME`` or the platform's per-user data dir."""
    env = _env("NOTEWELL_HOME")
    if env:
        return _absolute(env)
    user = _user_home()
    if sys.platform == "darwin":
        return _join(user, "Library", "Application Support", APP)
    data = _env("XDG_DATA_HOME") or _join(user, ".local", "share")
    return _join(data, APP)


def config_path() -> str:
    return _join(home(), "config.toml")


def index_dir() -> str:
    """Index generations live here; see ``notewell.index.store`` for how one becomes current."""
    return _join(home(), "index")


def model_dir() -> str:
    """Model files derived from the shipped one (``notewell.model.rewrite``);
    ``$NOTEWELL_MODEL_DIR`` lets several homes (tests, benchmarks) share one."""
    env = _env("NOTEWELL_MODEL_DIR")
    return _absolute(env) if env else _join(home(), "models")


def cache_dir() -> str:
    """What the daemon can make again at any time, under the home (never beside the notes);
    created 0700 (``ensure_private_dir``) by what writes there."""
    return _join(home(), "cache")


def preview_dir() -> str:
    """Alfred's Quick Look previews of hits (``launcher.quicklook``), a bounded number."""
    return _join(cache_dir(), "previews")


def log_dir() -> str:
    if sys.platform == "darwin" and not _env("NOTEWELL_HOME"):
        return _join(_user_home(), "Library", "Logs", APP)
    return _join(home(), "logs")


def runtime_dir() -> str:
    """The 0700 directory that holds the socket and the daemon's lock file."""
    if _env("NOTEWELL_HOME") or sys.platform == "darwin":
        candidate = _join(home(), "run")
    else:
        xdg = _env("XDG_RUNTIME_DIR")
        candidate = _join(xdg, APP) if xdg else _join(home(), "run")
    if len(_join(candidate, "notewell.sock").encode()) <= MAX_SOCKET_PATH:
        return candidate
    # A home too deep for sun_path: a short per-user, per-home directory under /tmp.
    import hashlib

    digest = hashlib.sha256(home().encode()).hexdigest()[:12]
    return _join("/tmp", f"{APP}-{posix.getuid()}", digest)


def socket_path() -> str:
    return _join(runtime_dir(), "notewell.sock")


def lock_path() -> str:
    return _join(runtime_dir(), "daemon.lock")


def command_record() -> str:
    """The command line of the ``notewell`` that last served or installed this home, as a
    JSON list (``ops.agent.record_command``): the Raycast extension runs it to start the
    daemon when its preference is empty."""
    return _join(home(), "notewell-command")


def socket_record() -> str:
    """The path of the socket the daemon of this home listens on, written by the daemon
    (``record_socket``) for the zsh client: it cannot work out the short /tmp path of a
    deep home (a SHA-256) without Python."""
    return _join(home(), "notewell-socket")


def record_socket() -> None:
    """Write ``socket_path()`` to ``socket_record()`` (the daemon, once it listens)."""
    write_atomic(socket_record(), socket_path().encode("utf-8", "surrogateescape"))


def mcp_marker() -> str:
    """Exists once ``notewell mcp install`` added notewell to an agent's client: the
    daemon then loads the MCP SDK in the background at start, not on the first session."""
    return _join(home(), "mcp-configured")


def client_record() -> str:
    """The zsh client of the installation whose daemon last started in this home, written
    by the daemon (``record_client``): the Alfred workflow's own copy of the client hands
    each keystroke to it, so the client matches the running daemon's version after an
    upgrade of notewell without the workflow being rebuilt."""
    return _join(home(), "notewell-client")


def record_client(path: str | None) -> None:
    """Write ``path`` (the daemon's own zsh client) to ``client_record()``; ``None`` (the
    installation lacks it) removes the record, so the workflow's copy answers by itself."""
    if path is None:
        import contextlib
        import os

        with contextlib.suppress(FileNotFoundError):
            os.remove(client_record())
        return
    write_atomic(client_record(), path.encode("utf-8", "surrogateescape"))


def restart_marker() -> str:
    """Exists while a daemon restarts itself after an upgrade (between its old socket and
    its new one), so a client waits instead of saying "not running"."""
    return _join(runtime_dir(), "restarting")


def write_atomic(path: str, data: bytes) -> None:
    """Write ``path`` (and its folder) so a reader sees the old file or the new one whole."""
    import os

    os.makedirs(os.path.dirname(path), exist_ok=True)
    # A temporary name of this writer's own: two processes writing the same file (a
    # daemon and a command building the model rewrite at once) never share one.
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def ensure_private_dir(path: str) -> str:
    """Create ``path`` (and parents) as 0700, never wider, and check nobody else owns it."""
    import os

    old = os.umask(0o077)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    finally:
        os.umask(old)
    st = os.stat(path)
    if st.st_uid != os.getuid():
        raise PermissionError(f"{path} is owned by uid {st.st_uid}, not you; remove it and retry")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path
