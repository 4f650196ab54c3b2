"""Plain Markdown folders: every ``.md``/``.markdown`` file below ``path``.

Also holds the Markdown reading shared with Obsidian vaults: YAML frontmatter (``title``,
``tags``/``tag``, ``aliases``/``alias``), inline ``#tags`` outside code, and wikilinks
rendered as their visible text. Excluded folders are pruned while walking, so a
``private/**`` folder is never listed, let alone read.
"""

from __future__ import annotations

import os
import re
import stat
import urllib.parse
from collections.abc import Iterable, Iterator

from notewell.config import SourceConfig
from notewell.notes import Note, NoteStub
from notewell.sources.base import SourceError, SourceWarning

EXTENSIONS = (".md", ".markdown")
MAX_NOTE_BYTES = 8 * 1024 * 1024


class MarkdownSource:
    kind = "markdown"
    skip_dirs: frozenset[str] = frozenset({".git", ".hg", ".svn", "node_modules", ".trash"})

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self.root = config.path or ""
        self._exclude = [glob_to_regex(g) for g in self.excludes()]

    @property
    def name(self) -> str:
        return self.config.name

    def excludes(self) -> list[str]:
        return list(self.config.exclude)

    # -- scanning ---------------------------------------------------------------------------

    def scan(self) -> Iterator[NoteStub]:
        if not os.path.isdir(self.root):
            raise SourceError(
                f"{self.root} is not a folder: fix 'path' for source {self.name!r} in config.toml"
            )
        for rel, st in self._walk():
            yield NoteStub(self._note_id(rel), _fingerprint(st))

    def _walk(self) -> Iterator[tuple[str, os.stat_result]]:
        seen_dirs: set[tuple[int, int]] = set()
        stack = [""]
        while stack:
            rel_dir = stack.pop()
            full = os.path.join(self.root, rel_dir)
            try:
                st = os.stat(full)
                # A symlink loop would otherwise walk forever.
                if (st.st_dev, st.st_ino) in seen_dirs:
                    continue
                seen_dirs.add((st.st_dev, st.st_ino))
                entries = sorted(os.scandir(full), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                try:
                    is_dir = entry.is_dir()
                    if is_dir:
                        if entry.name in self.skip_dirs or self._excluded(rel + "/"):
                            continue
                        stack.append(rel)
                    elif entry.name.lower().endswith(EXTENSIONS) and not self._excluded(rel):
                        yield rel, entry.stat()
                except OSError:
                    continue

    def _excluded(self, rel: str) -> bool:
        return any(rx.match(rel) for rx in self._exclude)

    def _note_id(self, rel: str) -> str:
        return f"{self.name}:{rel}"

    def _rel(self, note_id: str) -> str:
        return note_id.split(":", 1)[1]

    # -- loading ------------------------------------------------------------------------------

    def load(self, note_id: str) -> Note | None:
        rel = self._rel(note_id)
        if self._excluded(rel) or any(self._excluded(p + "/") for p in _parents(rel)):
            return None
        path = os.path.join(self.root, rel)
        try:
            st = os.stat(path)
            if stat.S_ISDIR(st.st_mode):
                return None
            if not stat.S_ISREG(st.st_mode):
                # Reading a FIFO blocks the sync forever; a link to a device never ends.
                raise SourceWarning(f"{path}: not a regular file; skipped")
            if st.st_size > MAX_NOTE_BYTES:
                raise SourceWarning(
                    f"{path}: {st.st_size // 1_000_000} MB is over the "
                    f"{MAX_NOTE_BYTES // 1_000_000} MB limit for one note; skipped"
                )
            # O_NONBLOCK: the file may have been swapped for a FIFO since the stat.
            with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as f:
                raw = f.read(MAX_NOTE_BYTES + 1)
            if len(raw) > MAX_NOTE_BYTES:
                raise SourceWarning(f"{path}: grew over the size limit while read; skipped")
        except FileNotFoundError:
            return None
        except PermissionError:
            raise SourceWarning(f"{path}: permission denied; skipped") from None
        except IsADirectoryError:
            return None
        except OSError as e:
            raise SourceWarning(f"{path}: {e.strerror}; skipped") from None
        text = decode_note(raw, path)
        meta, body = split_frontmatter(text)
        title = self.title(meta, body, rel)
        return Note(
            note_id=note_id,
            source=self.name,
            kind=self.kind,
            title=title,
            text=render_links(body),
            url=self.note_url(rel, path),
            path=path,
            tags=tuple(collect_tags(meta, body)),
            # The path in the folder names the note too (a Dendron vault's
            # ``dendron.topic.pod.cli.md`` is titled "CLI"): searched with the title.
            aliases=(*meta_list(meta, "aliases", "alias"), rel.rsplit(".", 1)[0]),
            created=None,
            modified=st.st_mtime,
            fingerprint=_fingerprint(st),
        )

    def title(self, meta: dict, body: str, rel: str) -> str:
        """Frontmatter ``title``, else the note's leading H1, else the file name."""
        return meta_title(meta) or first_heading(body) or _stem(rel)

    def note_url(self, rel: str, path: str) -> str:
        template = self.config.options.get("url_template")
        quoted = urllib.parse.quote(path)
        if template:
            return str(template).replace("{path}", quoted).replace("{rel}", urllib.parse.quote(rel))
        return "file://" + quoted

    def passage_url(self, note: Note, anchor: str | None) -> str:
        return note.url

    def change_token(self) -> str | None:
        return None

    def watch_paths(self) -> list[str]:
        return [self.root]


# How notes are read; part of every fingerprint, so that a notewell which reads a note into
# more than before (2: its path as an alias) reads every file again once. Only notes whose
# passages changed are embedded again: none, for that change.
_READ = 2


def _fingerprint(st: os.stat_result) -> str:
    return f"{_READ}:{st.st_mtime_ns}:{st.st_size}"


def _stem(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0]


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def glob_to_regex(glob: str) -> re.Pattern[str]:
    """Gitignore-like globs on '/'-separated relative paths: ``*`` stays within a folder,
    ``**`` crosses folders, a trailing ``/`` or ``/**`` means everything below."""
    g = glob.strip().lstrip("/")
    if g.endswith("/"):
        g += "**"
    out, i = [], 0
    while i < len(g):
        if g.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif g.startswith("**", i):
            out.append(".*")
            i += 2
        elif g[i] == "*":
            out.append("[^/]*")
            i += 1
        elif g[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(g[i]))
            i += 1
    # A pattern without '/' matches at any depth, as in .gitignore.
    prefix = "" if "/" in glob.strip().rstrip("/") else "(?:.*/)?"
    return re.compile(prefix + "".join(out) + "$")


def decode_note(raw: bytes, path: str) -> str:
    if b"\x00" in raw[:8192] and not raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SourceWarning(f"{path}: looks binary (NUL bytes), not a text note; skipped")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Old notes saved as Latin-1/Windows-1252 are still worth indexing.
        return raw.decode("cp1252", errors="replace")


_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)


def split_frontmatter(text: str) -> tuple[dict, str]:
    m = _FRONTMATTER.match(text)
    if not m:
        return {}, text
    return parse_yaml_subset(m.group(1)), text[m.end():]


def parse_yaml_subset(block: str) -> dict:
    """Top-level ``key: value`` pairs, inline ``[a, b]`` lists and ``- item`` block lists.

    Frontmatter in the wild is often not valid YAML; notewell reads only a few keys, and
    a line it cannot read is ignored rather than failing the note."""
    result: dict = {}
    key = None
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.match(r"^\s*-\s+(.*)$", line)
        if item and key is not None:
            current = result.get(key)
            if not isinstance(current, list):
                current = [] if current in (None, "") else [current]
            current.append(_scalar(item.group(1)))
            result[key] = current
            continue
        kv = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if not kv:
            continue
        key, value = kv.group(1).lower(), kv.group(2).strip()
        if value.startswith("[") and value.endswith("]"):
            result[key] = [_scalar(v) for v in _split_inline(value[1:-1]) if v.strip()]
        else:
            result[key] = _scalar(value)
    return result


def _split_inline(s: str) -> list[str]:
    parts, current, quote = [], [], None
    for ch in s:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            current.append(ch)
        elif ch == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return re.sub(r"\s+#.*$", "", value)


def meta_title(meta: dict) -> str | None:
    title = meta.get("title")
    return title.strip() if isinstance(title, str) and title.strip() else None


def meta_list(meta: dict, *keys: str) -> list[str]:
    out: list[str] = []
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str):
            value = [v for v in re.split(r"[,\s]+" if key.startswith("tag") else r",", value)]
        if isinstance(value, list):
            out.extend(str(v).strip().lstrip("#") for v in value if str(v).strip())
    return list(dict.fromkeys(out))


_ATX_HEADING = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT_H1 = re.compile(r"^[ \t]{0,3}=+[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
# Lines that may stand above a note's title without being its content.
_PREAMBLE = re.compile(
    r"^\s*(?:<!--.*-->|!\[[^\]]*\]\([^)]*\)|!\[\[[^\]]*\]\]|(?:#[\w][\w/\-]*\s*)+)\s*$")
TITLE_SEARCH_LINES = 12


def first_heading(body: str) -> str | None:
    """The H1 that titles a note: the first heading, if it is a level-1 heading (ATX or
    Setext) standing before any prose, after at most blank lines, comments, images and
    tag lines. A note that opens with prose, or whose first heading is an H2, has none:
    its H1s further down are section headings."""
    lines = body.splitlines()
    for i, line in enumerate(lines[:TITLE_SEARCH_LINES]):
        if not line.strip():
            continue
        if _FENCE.match(line):
            return None
        m = _ATX_HEADING.match(line)
        if m:
            return (m.group(2).strip() or None) if len(m.group(1)) == 1 else None
        if i + 1 < len(lines) and _SETEXT_H1.match(lines[i + 1]) and not _PREAMBLE.match(line):
            return line.strip()
        if _PREAMBLE.match(line):
            continue
        return None
    return None



def iter_fenced(lines: Iterable[str]) -> Iterator[tuple[str, bool]]:
    """Each line with whether it is code: inside a fenced block, or a fence line itself.
    A fence closes only with the same character at least as many times (CommonMark)."""
    fence: str | None = None
    for line in lines:
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
            elif marker.startswith(fence):
                fence = None
            yield line, True
            continue
        yield line, fence is not None


_FENCED = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,}).*?^[ \t]{0,3}\1[ \t]*$", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
# After whitespace, a line start or an opening parenthesis, but not "](" (a link to an
# anchor, ``[see](#setup)``, is no tag).
_TAG = re.compile(r"(?:(?<=\s)|(?<=^)|(?<=[^\]]\())#([\w][\w/\-]*)", re.M)
_HTML_COMMENT = re.compile(r"<!--.*?-->|%%.*?%%", re.S)
_HTML_TAG = re.compile(r"<[A-Za-z/][^<>]*>")  # style="color: #ccc" holds no tags


def inline_tags(body: str) -> list[str]:
    """``#tag`` and ``#nested/tag`` outside code; pure numbers (``#1``) are not tags."""
    text = _INLINE_CODE.sub(" ", _FENCED.sub(" ", body))
    text = _HTML_TAG.sub(" ", _HTML_COMMENT.sub(" ", text))
    tags = []
    for m in _TAG.finditer(text):
        tag = m.group(1).rstrip("/-")
        if tag and not tag.replace("/", "").isdigit():
            tags.append(tag)
    return tags


def _dedupe_tags(tags: list[str]) -> list[str]:
    """Tags are case-insensitive (``#Work`` is ``#work``); the first spelling wins."""
    seen: dict[str, str] = {}
    for t in tags:
        seen.setdefault(t.lower(), t)
    return list(seen.values())


def collect_tags(meta: dict, body: str) -> list[str]:
    return _dedupe_tags(meta_list(meta, "tags", "tag") + inline_tags(body))


_EMBED = re.compile(r"!\[\[[^\]]*\]\]")
_WIKILINK = re.compile(r"\[\[([^\]|#]*)((?:#[^\]|]*)?)(?:\\?\|([^\]]*))?\]\]")
# Dendron writes [[label|target]], the reverse of Obsidian's [[target|label]].
_LINK_TARGET = re.compile(r"^(?:[a-z][\w+.-]*://\S*|[\w.-]+\.[\w.-]+#[\w-]+)$")


def render_links(body: str) -> str:
    """Wikilinks as the text a reader sees; embeds (``![[...]]``) dropped.

    ``[[Note]]`` reads "Note", ``[[Note|shown]]`` reads "shown", ``[[Note#A#B]]`` reads
    "Note > A > B" (as Obsidian shows it), ``[[Note#^block]]`` reads "Note"."""

    def visible(m: re.Match[str]) -> str:
        target, anchor, alias = m.group(1).strip().rstrip("\\"), m.group(2), m.group(3)
        if alias and alias.strip() and not (_LINK_TARGET.match(alias.strip()) and target):
            return alias.strip()
        headings = [h.strip() for h in anchor.split("#") if h.strip()
                    and not h.strip().startswith("^")]
        return " > ".join(p for p in (target, *headings) if p)

    return _WIKILINK.sub(visible, _EMBED.sub("", body))
