"""Where notewell keeps its files: one function per path, one environment override.

Everything lives under ``NOTEWELL_HOME`` (config, index, logs); the socket lives in a
0700 runtime directory, which the clients check is this user's alone before they send a
byte (``check_socket``; a deep home's lives under /tmp, where anyone may make a folder).
Imported by the per-keystroke client, which runs without ``os`` (importing it costs 1.2
ms, a sixth of the interpreter's start; bench/keystroke.py): the path functions use the
built-in ``posix`` module and string joins, and only the daemon-side helpers import
``os``.
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
    return _fallback_dir()


# A home too deep for sun_path: a short per-user, per-home directory under /tmp (not
# $TMPDIR: macOS's is itself deep), /tmp/notewell-UID/HASH. Anyone may create names in
# /tmp, so another user can take that name first; the first of these names that this user
# holds, else the first nobody took, is this home's, for the daemon and its clients alike.
SHORT_TMP = "/tmp"
FALLBACK_NAMES = 8  # notewell-UID, notewell-UID-2, ... notewell-UID-8


def fallback_dirs() -> list[str]:
    """Every name the deep home's socket folder may take, in order."""
    import hashlib

    digest = hashlib.sha256(home().encode()).hexdigest()[:12]
    root = _join(SHORT_TMP, f"{APP}-{posix.getuid()}")
    return [_join(root + (f"-{n}" if n > 1 else ""), digest)
            for n in range(1, FALLBACK_NAMES + 1)]


def _fallback_dir() -> str:
    candidates = fallback_dirs()
    free = None
    for folder in candidates:
        held = held_by_another(folder)
        if held is None:
            return folder  # ours already
        if held == "" and free is None:
            free = folder
    # Every name taken: the daemon made one no one can guess (``mkdtemp``, in
    # ``serve.transport.claim_runtime_dir``) and recorded its socket; else the first name,
    # which the clients refuse in words.
    return free or _recorded_dir(candidates[0]) or candidates[0]


def _recorded_dir(first: str) -> str | None:
    """The folder of the socket the daemon recorded, when it is a deep home's made by
    ``mkdtemp`` (``/tmp/notewell-UID-XXXXXXXX/HASH``) and this user's."""
    try:
        fd = posix.open(socket_record(), posix.O_RDONLY)
        try:
            data = posix.read(fd, 4096)
        finally:
            posix.close(fd)
    except OSError:
        return None
    folder = data.decode("utf-8", "surrogateescape").rpartition("/")[0]
    root, _, digest = folder.rpartition("/")
    if (root.startswith(first.rpartition("/")[0] + "-") and "/" not in root[len(SHORT_TMP) + 1:]
            and digest == first.rpartition("/")[2] and held_by_another(folder) is None):
        return folder
    return None


def held_by_another(folder: str) -> str | None:
    """Of a fallback socket folder (``/tmp/notewell-UID[-N]/HASH``): None when this user
    holds it and its parent, "" when either is missing (free to make), else what is wrong
    ("/tmp/notewell-0 is not yours: it is owned by uid 1001"). Modes are not looked at:
    the daemon narrows its own folders, and the clients refuse wide ones
    (``check_socket``)."""
    for path in (folder.rpartition("/")[0], folder):
        try:
            problem = folder_problem(path, modes=False)
        except FileNotFoundError:
            return ""
        except OSError as e:
            return f"{path} cannot be read ({e.strerror})"
        if problem:
            return f"{path} {problem}"
    return None


class NotYours(PermissionError):
    """A socket another user could have made or could answer: the client refuses it,
    sends nothing, and says so (``wire.client``, ``agents.relay``)."""


def folder_problem(path: str, *, modes: bool = True) -> str | None:
    """What stops folder ``path`` from holding notewell's socket ("is not yours: it is
    owned by uid 1001"), or None: it must be a real folder (not a link), this user's, and
    (``modes``) closed to everyone else (0700). ``FileNotFoundError`` when it is missing."""
    st = posix.lstat(path)
    kind = st.st_mode & 0o170000
    if kind == 0o120000:
        return "is not yours: it is a symbolic link"
    if kind != 0o040000:
        return "is not yours: it is not a folder"
    if st.st_uid != posix.getuid():
        return f"is not yours: it is owned by uid {st.st_uid}"
    if modes and st.st_mode & 0o077:
        return f"is open to other users (mode {st.st_mode & 0o777:04o})"
    return None


def socket_chain(sock: str) -> list[str]:
    """The folders that must be this user's alone for socket ``sock`` to be trusted, top
    first: its folder, and for a deep home's (``/tmp/notewell-UID[-N]/HASH``) the folder
    above it too. notewell-query.zsh checks the same."""
    folder = sock.rpartition("/")[0] or "/"
    chain = [folder]
    prefix = _join(SHORT_TMP, APP + "-")
    while folder.startswith(prefix) and "/" in folder[len(prefix):]:
        folder = folder.rpartition("/")[0]
        chain.append(folder)
    return chain[::-1]


def check_socket(sock: str) -> None:
    """Refuse (``NotYours``) a socket in a folder another user made, owns or may enter:
    they could listen there and answer as notewell. ``FileNotFoundError`` when a folder is
    missing (no daemon made it), or the socket is (none listens: "not running")."""
    try:  # noqa: SIM105  (contextlib is not loaded by the client)
        posix.lstat(sock)
    except PermissionError:
        pass  # a folder this user cannot enter: said below
    for folder in socket_chain(sock):
        problem = folder_problem(folder)
        if problem:
            raise NotYours(f"the socket folder {folder} {problem}")


def socket_path() -> str:
    return _join(runtime_dir(), "notewell.sock")


def lock_path() -> str:
    return _join(runtime_dir(), "daemon.lock")


def command_record() -> str:
    """The command line of the ``notewell`` that last served or installed this home, as a
    JSON list (``ops.login_agent.record_command``): the Raycast extension runs it to start the
    daemon when its preference is empty."""
    return _join(home(), "notewell-command")


def socket_record() -> str:
    """The path of the socket the daemon of this home listens on, written by the daemon
    (``record_socket``) for the zsh client: it cannot work out the short /tmp path of a
    deep home (a SHA-256) without Python."""
    return _join(home(), "notewell-socket")


def record_socket(path: str | None = None) -> None:
    """Write ``path`` (default ``socket_path()``) to ``socket_record()`` (the daemon, once
    it listens)."""
    write_atomic(socket_record(), (path or socket_path()).encode("utf-8", "surrogateescape"))


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
    """Write ``path`` (and its folder) so a reader sees the old file or the new one
    whole. A folder made in the home is made 0700, as the home."""
    import os

    folder = os.path.dirname(path)
    top = home()
    if folder == top or folder.startswith(top + "/"):
        ensure_private_dir(folder)
    else:
        os.makedirs(folder, exist_ok=True)
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


def narrow_modes() -> list[str]:
    """Make the home and the log folder 0700 and the daemon's logs 0600 where they are
    wider and this user's (made by an older notewell, or by launchd with its umask): with
    ``debug_log`` the log holds queries. The daemon runs it at start; returns what it
    narrowed."""
    import os

    narrowed = []
    logs = log_dir()
    for path, mode in ((home(), 0o700), (logs, 0o700),
                       (_join(logs, "daemon.log"), 0o600),
                       (_join(logs, "daemon.out.log"), 0o600)):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if st.st_uid == os.getuid() and st.st_mode & 0o777 & ~mode:
            os.chmod(path, mode)
            narrowed.append(path)
    return narrowed
