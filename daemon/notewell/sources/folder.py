"""Listing a folder tree of notes: the note files and PDFs below a root, excluded folders
pruned (never listed), and what could not be seen, which must not pass for deleted:

- a folder that cannot be listed (macOS privacy controls refusing ``~/Documents``,
  ``~/Desktop`` or iCloud Drive to a binary without the grant, a share that refuses
  access, a volume gone from under its mount point): ``Walk.unreadable``. The sync keeps
  the notes indexed under it and the source reports it, naming the folder and the fix;
- a file a cloud drive keeps online only ("dataless": ``SF_DATALESS`` in ``st_flags`` on
  macOS; on older macOS a ``.Name.md.icloud`` placeholder in its place): reading it would
  download it, so it is never opened, only stat'ed; ``Walk.offloaded`` (a dataless folder:
  everything under it). The sync keeps its indexed rows and counts it;
- a symlink that resolves outside the root (``shadow.md -> /etc/shadow``, a folder link
  to ``~/.ssh``): ``Walk.links_out``, never listed below nor read. Links that stay inside
  the root are followed. ``open_inside`` opens a note by the same rule at read time, so a
  link swapped after the scan is refused too.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from notewell.sources.base import DENIED, FolderUnreadable, LinkOut, is_denied

NOTE_EXTENSIONS = (".md", ".markdown")
SF_DATALESS = 0x40000000  # <sys/stat.h>: the file's data is not on this Mac
_PLACEHOLDER = ".icloud"  # ".Name.md.icloud" stands for "Name.md" while it is in iCloud


def is_dataless(st: os.stat_result) -> bool:
    """Whether a cloud drive keeps the file (or folder) online only. ``st_flags`` exists
    on macOS and the BSDs only; elsewhere nothing is dataless."""
    return bool(getattr(st, "st_flags", 0) & SF_DATALESS)


@dataclass
class Walk:
    notes: list[tuple[str, os.stat_result]] = field(default_factory=list)  # (rel, stat)
    pdfs: dict[str, os.stat_result] = field(default_factory=dict)  # only when asked for
    unreadable: dict[str, OSError] = field(default_factory=dict)  # rel ("" root) -> error
    # Offloaded notes (rel) and folders (rel + "/"), and offloaded PDFs, not read.
    offloaded: list[str] = field(default_factory=list)
    offloaded_pdfs: list[str] = field(default_factory=list)
    # Links resolving outside the root (rel; a folder's + "/"), skipped.
    links_out: list[str] = field(default_factory=list)


def walk(root: str, skip_dirs: frozenset[str], excluded: Callable[[str], bool],
         pdfs: bool) -> Walk:
    """Every note file (and PDF, when ``pdfs``) below ``root`` that is not excluded, with
    what could not be listed and what is offloaded. ``excluded`` takes a relative path,
    with a trailing "/" for a folder."""
    out = Walk()
    real_root = os.path.realpath(root)
    seen_dirs: set[tuple[int, int]] = set()
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        full = os.path.join(root, rel_dir)
        try:
            st = os.stat(full)
            # A symlink loop would otherwise walk forever.
            if (st.st_dev, st.st_ino) in seen_dirs:
                continue
            seen_dirs.add((st.st_dev, st.st_ino))
            entries = sorted(os.scandir(full), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            if not rel_dir:
                out.unreadable[""] = FileNotFoundError(errno.ENOENT, "No such file or directory")
            continue  # removed since its parent was listed: its notes are gone
        except OSError as e:
            out.unreadable[rel_dir] = e
            continue
        names = {e.name for e in entries}
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_dir():
                    if entry.name in skip_dirs or excluded(rel + "/"):
                        continue
                    if _links_out(real_root, entry.path):
                        out.links_out.append(rel + "/")
                        continue
                    if is_dataless(entry.stat()):
                        out.offloaded.append(rel + "/")  # listing it would fetch it
                    else:
                        stack.append(rel)
                    continue
                name = entry.name.lower()
                is_note = name.endswith(NOTE_EXTENSIONS)
                if is_note or (pdfs and name.endswith(".pdf") and entry.is_file()):
                    if excluded(rel):
                        continue
                    if _links_out(real_root, entry.path):
                        out.links_out.append(rel)
                        continue
                    st = entry.stat()
                    if is_dataless(st):
                        (out.offloaded if is_note else out.offloaded_pdfs).append(rel)
                    elif is_note:
                        out.notes.append((rel, st))
                    else:
                        out.pdfs[rel] = st
                elif entry.name.startswith(".") and name.endswith(_PLACEHOLDER):
                    real = entry.name[1:-len(_PLACEHOLDER)]
                    real_rel = f"{rel_dir}/{real}" if rel_dir else real
                    if real in names or excluded(real_rel):
                        continue  # downloaded meanwhile: the file itself is listed
                    if real.lower().endswith(NOTE_EXTENSIONS):
                        out.offloaded.append(real_rel)
                    elif pdfs and real.lower().endswith(".pdf"):
                        out.offloaded_pdfs.append(real_rel)
            except FileNotFoundError:
                continue
            except OSError as e:
                if e.errno == errno.ELOOP:
                    continue  # a symlink loop (a-link.md -> b-link.md -> a-link.md): no note
                # Neither listed nor known to be gone: kept like a folder that cannot be read.
                out.unreadable[rel] = e
    return out


def _links_out(real_root: str, path: str) -> bool:
    # Only a link can lead out: every folder walked into was checked before.
    return os.path.islink(path) and not is_inside(real_root, path)


def is_inside(real_root: str, path: str) -> bool:
    """Whether ``path``, every link in it resolved, is ``real_root`` (a realpath) or below."""
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


_O_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_O_FILE = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
# How opening a link with O_NOFOLLOW fails: ELOOP (Linux, macOS), EMLINK (FreeBSD), and
# ENOTDIR for a link to a folder opened as a folder (Linux).
_A_LINK = (errno.ELOOP, errno.EMLINK, errno.ENOTDIR)


def open_inside(root: str, rel: str) -> int:
    """A read-only descriptor of ``root/rel``, opened only where it resolves inside
    ``root``: raises ``LinkOut`` for a link out, ``OSError`` as ``os.open`` does.

    The path is opened one folder at a time from the root, each step refusing a link
    (``O_NOFOLLOW``); where a step meets one, the path's links are resolved, checked to
    stay inside, and the resolved path opened the same way. So a link swapped in after
    any check fails to open instead of leading out. ``O_NONBLOCK``: the file may be a
    FIFO (the caller ``fstat``s what it got)."""
    real_root = os.path.realpath(root)
    if os.open not in os.supports_dir_fd:  # pragma: no cover - macOS and Linux have it
        return os.open(_resolved(root, rel, real_root), _O_FILE)
    parts = rel.split("/")
    if not any(p in ("", os.curdir, os.pardir) for p in parts):  # else: resolve first
        try:
            return _open_steps(real_root, parts)
        except OSError as e:
            if e.errno not in _A_LINK:
                raise
    inner = os.path.relpath(_resolved(root, rel, real_root), real_root)
    return _open_steps(real_root, [] if inner == os.curdir else inner.split(os.sep))


def _resolved(root: str, rel: str, real_root: str) -> str:
    path = os.path.join(root, rel)
    real = os.path.realpath(path)
    if not (real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)):
        raise LinkOut(path, real)
    return real


def _open_steps(real_root: str, parts: list[str]) -> int:
    fd = os.open(real_root, _O_DIR)
    try:
        for part in parts[:-1]:
            step = os.open(part, _O_DIR, dir_fd=fd)
            os.close(fd)
            fd = step
        return os.open(parts[-1], _O_FILE, dir_fd=fd) if parts else os.dup(fd)
    finally:
        os.close(fd)


def unreadable_error(source: str, root: str, unreadable: dict[str, OSError],
                     platform: str = sys.platform) -> FolderUnreadable:
    """What to tell the user about folders that cannot be listed: which, why, that their
    notes stay indexed as they were, and what to do."""
    shown = [f"{os.path.join(root, rel) if rel else root} "
             f"({e.strerror or type(e).__name__})" for rel, e in sorted(unreadable.items())]
    more = f" and {len(shown) - 3} more" if len(shown) > 3 else ""
    denied = any(is_denied(e) for e in unreadable.values())
    # Denied starts as every refusal does, so `doctor` shows it among the daemon's refusals.
    what = (f"{DENIED + ' ' if denied else ''}source {source!r}: cannot list "
            f"{', '.join(shown[:3])}{more}; the notes indexed from "
            f"{'it' if len(shown) == 1 else 'them'} are kept as they were. ")
    if denied and platform == "darwin":
        fix = ("Allow notewell to read it: System Settings > Privacy & Security > Files and "
               "Folders (or Full Disk Access); `notewell doctor` names the binary to allow")
    elif denied:
        fix = "Make it readable by the user notewell runs as"
    else:
        fix = "Check that its disk or network share is connected; the next sync tries again"
    return FolderUnreadable(what + fix, denied)
