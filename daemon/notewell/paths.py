"""Where notewell keeps its files: one function per path, one environment override.

Everything lives under ``NOTEWELL_HOME`` (config, index, logs); the socket lives in a
0700 runtime directory. Imported by the per-keystroke client, so: ``os`` and ``sys`` only.
"""

from __future__ import annotations

import os
import sys

APP = "notewell"
# macOS limits sun_path to 104 bytes including the NUL; Linux to 108.
MAX_SOCKET_PATH = 103


def home() -> str:
    """The notewell home directory: ``$NOTEWELL_HOME`` or the platform's per-user data dir."""
    env = os.environ.get("NOTEWELL_HOME")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    user = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(user, "Library", "Application Support", APP)
    data = os.environ.get("XDG_DATA_HOME") or os.path.join(user, ".local", "share")
    return os.path.join(data, APP)


def config_path() -> str:
    return os.path.join(home(), "config.toml")


def index_dir() -> str:
    """Index generations live here; see ``notewell.store`` for how one becomes current."""
    return os.path.join(home(), "index")


def log_dir() -> str:
    if sys.platform == "darwin" and not os.environ.get("NOTEWELL_HOME"):
        return os.path.join(os.path.expanduser("~"), "Library", "Logs", APP)
    return os.path.join(home(), "logs")


def runtime_dir() -> str:
    """The 0700 directory that holds the socket and the daemon's lock file."""
    if os.environ.get("NOTEWELL_HOME") or sys.platform == "darwin":
        candidate = os.path.join(home(), "run")
    else:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        candidate = os.path.join(xdg, APP) if xdg else os.path.join(home(), "run")
    if len(os.path.join(candidate, "notewell.sock").encode()) <= MAX_SOCKET_PATH:
        return candidate
    # A home too deep for sun_path: a short per-user, per-home directory under /tmp.
    import hashlib

    digest = hashlib.sha256(home().encode()).hexdigest()[:12]
    return os.path.join("/tmp", f"{APP}-{os.getuid()}", digest)


def socket_path() -> str:
    return os.path.join(runtime_dir(), "notewell.sock")


def lock_path() -> str:
    return os.path.join(runtime_dir(), "daemon.lock")


def last_query_path() -> str:
    """The query the Alfred client was last started for: the actions compare it with the
    query an item was rendered for (the stale-Enter guard, ``launcher.alfred_actions``)."""
    return os.path.join(runtime_dir(), "alfred-query")


def ensure_private_dir(path: str) -> str:
    """Create ``path`` (and parents) as 0700, never wider, and check nobody else owns it."""
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
