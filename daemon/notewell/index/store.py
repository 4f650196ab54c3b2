"""Index files on disk: which one is current, building a new one beside it, and recovery.

The index directory holds generations ``index-<n>.sqlite``; the highest complete one is
current. A rebuild writes ``building-<n>.sqlite`` and renames it into place only when it
is finished and closed (so no WAL file is left behind to confuse the next reader); readers
notice the new generation and reopen. A file that is not a usable database is moved aside
as ``*.corrupt-<time>`` (never deleted) and a fresh generation starts.

Every file of a build is made and removed here (``Build``): ``begin_build`` names the
building file and moves an earlier unpublished try aside as ``building-<n>.sqlite.unfinished``
(the new build takes its vectors in, then ``drop_earlier``), ``publish`` makes it current,
``discard`` deletes all of it (with ``-wal`` and ``-shm``) after a failure, so a full disk
gets its room back at once. A build stopped on purpose stays, closed, for the next try.
``clean_leftovers`` removes at start what a crash left: builds that were open (their
``-wal``/``-shm`` beside them), stale build numbers, ``.unfinished`` files, and WAL files
of generations that are gone; only while nobody holds the writer lock (``writer``), so
never a file a live process is writing.

When a rebuild replaces an index built with another model, that model's vectors are kept
in ``vectors-<key>.sqlite`` beside the generations (an index file holding vectors only;
the ``KEEP_MODELS`` most recent models), so switching back to it re-embeds nothing.

May import ``index.database``, ``index.schema``, ``index.writer`` and ``wire.paths``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import time
from dataclasses import dataclass

from notewell.index import writer
from notewell.index.database import Index
from notewell.index.schema import BuildSettings, IndexCorrupt, describe
from notewell.wire import paths

log = logging.getLogger(__name__)
_GEN = re.compile(r"^index-(\d+)\.sqlite$")
_GEN_WAL = re.compile(r"^(index-\d+\.sqlite)-(wal|shm)$")
_BUILD = re.compile(r"^(building-\d+\.sqlite)(-wal|-shm|\.unfinished)?$")
WAL_FILES = ("-wal", "-shm")
UNFINISHED = ".unfinished"
KEEP_MODELS = 3  # models whose vectors are kept after a switch away from them


def generations(directory: str | None = None) -> list[tuple[int, str]]:
    directory = directory or paths.index_dir()
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), os.path.join(directory, n)) for n in names
             if (m := _GEN.match(n))]
    return sorted(found)


def current_path(directory: str | None = None) -> str:
    """The current generation, or the path the first one will have."""
    directory = directory or paths.index_dir()
    gens = generations(directory)
    return gens[-1][1] if gens else os.path.join(directory, "index-1.sqlite")


def open_current(settings: BuildSettings, directory: str | None = None,
                 other_chunker_ok: bool = False) -> Index:
    """Open the current index; a corrupt file is moved aside and replaced.
    ``other_chunker_ok``: a file cut by another chunker opens (``Index.other_chunker``)."""
    directory = directory or paths.index_dir()
    paths.ensure_private_dir(directory)
    path = current_path(directory)
    try:
        index = Index(path, settings, other_chunker_ok=other_chunker_ok)
        problems = index.integrity_check(quick=True)
        if problems:
            index.close()
            detail = next((p for p in problems if not p.startswith("***")), problems[0])
            raise IndexCorrupt(f"{path}: integrity check failed: {detail}")
        return index
    except IndexCorrupt as e:
        moved = quarantine(path)
        log.error("%s; moved it aside to %s and starting a fresh index",
                  str(e).splitlines()[0], moved)
        fresh = Index(next_path(directory), settings)
        fresh.recovered_from = moved
        return fresh


def quarantine(path: str) -> str:
    """Move a damaged index (and its WAL files) aside, keeping them for inspection."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = f"{path}.corrupt-{stamp}"
    n = 1
    while os.path.exists(target):  # never overwrite an earlier damaged copy
        n += 1
        target = f"{path}.corrupt-{stamp}-{n}"
    for suffix in ("", *WAL_FILES):
        with contextlib.suppress(FileNotFoundError):
            os.replace(path + suffix, target + suffix)
    return target


def next_path(directory: str) -> str:
    gens = generations(directory)
    n = gens[-1][0] + 1 if gens else 1
    return os.path.join(directory, f"index-{n}.sqlite")


def building_path(directory: str | None = None) -> str:
    directory = directory or paths.index_dir()
    final = next_path(directory)
    return os.path.join(directory, "building-" + os.path.basename(final)[len("index-"):])


def publish(building: str) -> str:
    """Make a finished, closed build the current generation."""
    directory = os.path.dirname(building)
    final = next_path(directory)
    for suffix in WAL_FILES:
        if os.path.exists(building + suffix):
            raise RuntimeError(f"{building} is still open; close it before publishing")
    os.replace(building, final)
    return final


@dataclass(frozen=True)
class Build:
    """A generation being built: ``path`` (``building-<n>.sqlite``) and ``earlier``, where
    an earlier try that was not published waits for its vectors to be taken in."""

    path: str
    earlier: str


def begin_build(directory: str) -> Build:
    """Name the next build; an earlier unpublished one at that name is moved to
    ``earlier`` (closed, so only its main file counts: stale WAL files go)."""
    building = building_path(directory)
    earlier = building + UNFINISHED
    if os.path.exists(building):
        os.replace(building, earlier)
    remove_file(building)  # its stale WAL files (the file itself is moved)
    return Build(building, earlier)


def drop_earlier(build: Build) -> None:
    """The earlier try's vectors are in the new build: its file goes."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(build.earlier)


def discard(build: Build) -> None:
    """Delete every file of a failed build (closed first by the caller)."""
    remove_file(build.path)
    drop_earlier(build)


def clean_leftovers(directory: str | None = None) -> list[str]:
    """Remove what a crash left in the index directory (see the module's text); the
    names removed. Nothing when another process holds the writer lock."""
    directory = directory or paths.index_dir()
    if not os.path.isdir(directory):
        return []
    removed = []
    with writer.try_hold(directory) as free:
        if not free:
            return []
        names = set(os.listdir(directory))
        reusable = os.path.basename(building_path(directory))
        for name in sorted(names):
            build, wal = _BUILD.match(name), _GEN_WAL.match(name)
            if build:
                was_open = any(build.group(1) + s in names for s in WAL_FILES)
                if build.group(2) is None and build.group(1) == reusable and not was_open:
                    continue  # stopped on purpose: the next build takes its vectors in
            elif wal is None or wal.group(1) in names:
                continue  # not ours, or the WAL of a generation that is there
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(directory, name))
                removed.append(name)
    if removed:
        log.info("removed what an interrupted build left in %s: %s", directory,
                 ", ".join(sorted(removed)))
    return removed


def remove_old(directory: str | None = None, keep: str | None = None) -> list[str]:
    """Delete generations older than the current one (or ``keep``)."""
    directory = directory or paths.index_dir()
    gens = generations(directory)
    keep = keep or (gens[-1][1] if gens else None)
    removed = []
    for _, path in gens:
        if path == keep:
            break
        remove_file(path)
        removed.append(path)
    return removed


def remove_file(path: str) -> None:
    """Delete one index file with its WAL files (a retired generation, once closed)."""
    for suffix in ("", *WAL_FILES):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


def kept_vectors_path(directory: str, embedder: str) -> str:
    """Where the vectors of the model with fingerprint ``embedder`` are kept."""
    key = hashlib.sha256(embedder.encode()).hexdigest()[:16]
    return os.path.join(directory, f"vectors-{key}.sqlite")


def keep_vectors(path: str, directory: str, new_embedder: str) -> str | None:
    """Before a rebuild with the model ``new_embedder``: if the index at ``path`` was
    built with another model, copy its vectors into that model's kept file; the file, or
    None (same model, no index, or an unreadable one: nothing to keep)."""
    try:
        meta = describe(path).meta if os.path.exists(path) else {}
    except Exception:  # a damaged index has nothing to give
        return None
    old = meta.get("embedder")
    if not old or old == new_embedder or not meta.get("dim", "").isdigit():
        return None
    kept = kept_vectors_path(directory, old)
    index = Index(kept, BuildSettings(old, int(meta["dim"]), meta.get("chunker", "")))
    try:
        index.import_vectors(path)
        index.checkpoint()
    finally:
        index.close()
    log.info("kept the vectors of %s in %s", old, kept)
    _forget_oldest(directory)
    return kept


def _forget_oldest(directory: str) -> None:
    kept = sorted((os.path.getmtime(os.path.join(directory, n)), n)
                  for n in os.listdir(directory)
                  if n.startswith("vectors-") and n.endswith(".sqlite"))
    for _, name in kept[:-KEEP_MODELS]:
        remove_file(os.path.join(directory, name))


def forget_vectors(directory: str, embedder: str) -> None:
    """Delete the kept vectors of ``embedder`` (after a rebuild took them in)."""
    remove_file(kept_vectors_path(directory, embedder))
