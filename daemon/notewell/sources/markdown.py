"""Plain Markdown folders: every ``.md``/``.markdown`` file below ``path``, and the PDFs
they link or embed (``![[file.pdf]]``, ``[x](file.pdf)``) as passages of the note; with
``pdfs = "all"`` every other PDF in the folder is a note of its own (``pdfs = "none"``:
no PDFs). A note's fingerprint covers the PDFs it links, so a changed PDF re-indexes its
note and an unchanged one is never read again (``sources.pdf``).

Reads notes' Markdown with what every Markdown source shares (``sources.markdown_text``:
the first heading, inline ``#tags``, wikilinks as their visible text) and their YAML
frontmatter (``sources.frontmatter``). Excluded folders are pruned while walking, so a
``private/**`` folder is never listed, let alone read.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
import unicodedata
import urllib.parse

from notewell.config import SourceConfig, glob_to_regex
from notewell.notes import Attachment, Note, NoteStub, nfc, nfc_note
from notewell.sources import folder
from notewell.sources.base import Listing, SourceError, SourceWarning
from notewell.sources.frontmatter import (
    meta_created,
    meta_list,
    meta_title,
    split_frontmatter,
)
from notewell.sources.markdown_text import (
    collect_tags,
    decode_note,
    first_heading,
    render_links,
)
from notewell.sources.pdf import MAX_PDF_BYTES, PdfProblem, PdfTexts

MAX_NOTE_BYTES = 8 * 1024 * 1024
# Every pattern that reads a note's text runs in linear time (issue 36: 8 KB of "[[" took
# 6 s): no repeated run in it may cross the character that starts a match ("[" of "[[",
# "]" of "]("), so a start that fails costs at most the text up to the next start. What a
# regex cannot say that way is a scan with ``str.find`` (comments, fences, headings).
# ![[file.pdf]], [[file.pdf|label]], [[file.pdf#page=2]] and ![x](file.pdf), [x](<a b.pdf>);
# an Obsidian file name holds no [ ] # | (the app refuses them).
_WIKI_PDF = re.compile(r"\[\[([^\[\]|#\n]+?\.pdf)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]",
                       re.I)
_MD_PDF = re.compile(r"\]\(\s*(?:<([^<>\n]+?\.pdf)>|([^)\s\]#]+?\.pdf))(?:#[^)\s\]]*)?"
                     r"(?:\s+[\"'][^)\]]*)?\)", re.I)


class MarkdownSource:
    kind = "markdown"
    skip_dirs: frozenset[str] = frozenset({".git", ".hg", ".svn", "node_modules", ".trash"})

    def __init__(self, config: SourceConfig) -> None:
        self.config = config
        self.root = config.path or ""
        self._exclude = [glob_to_regex(g) for g in config.exclude]
        # Both checked when config.toml is read (``config.parse``): a wrong value is an
        # error there, naming the source.
        self.pdf_mode = config.options.get("pdfs", "linked")
        self.pdfs = PdfTexts(int(config.options.get("pdf_max_mb", MAX_PDF_BYTES / 1e6) * 1e6))
        # Where the notes are and how they open, in every fingerprint: a folder moved (its
        # files' dates kept) and its ``path`` edited, or another ``url_template``, has every
        # note read again, and the sync moves its links and path (no vector is made).
        place = f"{self.root}\0{config.options.get('url_template') or ''}"
        self._place = hashlib.sha1(place.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        # Which PDFs each note links (note rel -> PDF rels), as last read: the cheap scan
        # then covers them in the note's fingerprint without reading the note. Written by
        # ``load`` (the sync's thread, handler threads reading a note), read by ``scan``
        # (the sync's and the watcher's threads): every access holds ``_lock``.
        self._links: dict[str, tuple[str, ...]] = {}
        # Lower-case file name -> rel, from the last scan: replaced whole, under ``_lock``.
        self._pdf_names: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.config.name

    # -- scanning ---------------------------------------------------------------------------

    def scan(self) -> Listing:
        self._check_root()
        found = folder.walk(self.root, self.skip_dirs, self._excluded, self.pdf_mode != "none")
        if "" in found.unreadable:
            raise folder.unreadable_error(self.name, self.root, {"": found.unreadable[""]})
        names: dict[str, str] = {}
        for rel in sorted(found.pdfs, key=lambda r: (r.count("/"), r)):  # nearest the top wins
            names.setdefault(rel.rsplit("/", 1)[-1].lower(), rel)
        with self._lock:
            self._pdf_names = names
            links = dict(self._links)
        stubs = [NoteStub(self._note_id(rel), self._fingerprint(rel, st, links.get(rel)))
                 for rel, st in found.notes]
        offloaded = list(found.offloaded)
        if self.pdf_mode == "all":
            # The notes read by earlier syncs say which PDFs they link.
            linked = {p for pdfs in links.values() for p in pdfs}
            stubs += [NoteStub(self._note_id(rel), _pdf_fingerprint(rel, st))
                      for rel, st in found.pdfs.items() if rel not in linked]
            offloaded += [rel for rel in found.offloaded_pdfs if rel not in linked]
        unreadable = [self._note_id(rel) + end for rel in found.unreadable for end in ("", "/")]
        error = (folder.unreadable_error(self.name, self.root, found.unreadable)
                 if found.unreadable else None)
        return Listing(stubs, unreadable, [self._note_id(rel) for rel in offloaded], error,
                       links_out=found.links_out)

    def _check_root(self) -> None:
        try:
            st = os.stat(self.root)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as e:  # there, but not for us (macOS privacy controls, permissions)
            raise folder.unreadable_error(self.name, self.root, {"": e}) from None
        if st is None or not stat.S_ISDIR(st.st_mode):
            raise SourceError(
                f"{self.root} is not a folder: fix 'path' for source {self.name!r} in config.toml"
            )

    def _fingerprint(self, rel: str, st: os.stat_result,
                     links: tuple[str, ...] | None) -> str:
        base = f"{_READ}:{st.st_mtime_ns}:{st.st_size}@{self._place}"
        if not links:
            return base
        seen: list[tuple] = []
        for pdf in links:
            try:
                pst = os.stat(os.path.join(self.root, pdf))
                # Downloaded from iCloud, a PDF is read: the note's fingerprint changes.
                seen.append((pdf, pst.st_mtime_ns, pst.st_size)
                            + (("dataless",) if folder.is_dataless(pst) else ()))
            except OSError:
                seen.append((pdf, None, None))
        digest = hashlib.sha1(repr(seen).encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return f"{base}|pdf:{digest}"

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
        if rel.lower().endswith(".pdf"):
            return self._load_pdf(note_id, rel)
        path = os.path.join(self.root, rel)
        try:
            # Opened where it resolves inside the root only (a link out: ``LinkOut``),
            # then judged by what was opened: a FIFO would block the sync forever.
            with open(folder.open_inside(self.root, rel), "rb") as f:
                st = os.fstat(f.fileno())
                if stat.S_ISDIR(st.st_mode):
                    return None
                if not stat.S_ISREG(st.st_mode):
                    raise SourceWarning(f"{path}: not a regular file; skipped")
                if st.st_size > MAX_NOTE_BYTES:
                    raise SourceWarning(
                        f"{path}: {st.st_size // 1_000_000} MB is over the "
                        f"{MAX_NOTE_BYTES // 1_000_000} MB limit for one note; skipped"
                    )
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
        text = nfc(decode_note(raw, path))  # before tags are read: "#fête" typed in NFD
        meta, body = split_frontmatter(text)
        title = self.title(meta, body, rel)
        links, attachments, warnings = self._linked_pdfs(rel, body)
        return nfc_note(Note(
            note_id=note_id,
            source=self.name,
            kind=self.kind,
            title=title,
            text=render_links(body),
            url=self.note_url(rel, path),
            path=path,
            tags=tuple(collect_tags(meta, body)),
            # The path in the folder names the note too (a Dendron vault's
            # ``dendron.topic.pod.cli.md`` is titled "CLI"): searched with the title, and
            # read with it into the title vector (``path_alias``: the last alias).
            aliases=(*meta_list(meta, "aliases", "alias"), rel.rsplit(".", 1)[0]),
            created=meta_created(meta),
            modified=st.st_mtime,
            fingerprint=self._fingerprint(rel, st, links),
            attachments=attachments,
            warnings=warnings,
            body_line=text.count("\n", 0, len(text) - len(body)) + 1,
        ))

    # -- PDFs ---------------------------------------------------------------------------------

    def _linked_pdfs(self, rel: str, body: str) -> tuple[
            tuple[str, ...], tuple[Attachment, ...], tuple[str, ...]]:
        """The PDFs the note links or embeds, read (each once per version; not one iCloud
        keeps online only), and one warning per PDF not read; remembers the links for
        the scan."""
        if self.pdf_mode == "none":
            return (), (), ()
        found = []
        for m in _WIKI_PDF.finditer(body):
            found.append(self._resolve_pdf(rel, m.group(1), wiki=True))
        for m in _MD_PDF.finditer(body):
            found.append(self._resolve_pdf(rel, m.group(1) or m.group(2), wiki=False))
        links = tuple(dict.fromkeys(p for p in found if p))
        with self._lock:
            if links:
                self._links[rel] = links
            else:
                self._links.pop(rel, None)
        attachments, warnings = [], []
        for pdf in links:
            path = os.path.join(self.root, pdf)
            try:
                if folder.is_dataless(os.stat(path)):  # reading would download it
                    warnings.append(f"{path}: in iCloud, not downloaded; its text is "
                                    "indexed once it is")
                    continue
                pages = self._pdf_pages(pdf)
            except SourceWarning as e:  # a link out of the root since the scan
                warnings.append(str(e))
                continue
            except (PdfProblem, OSError) as e:
                warnings.append(str(e) if isinstance(e, PdfProblem) else f"{path}: {e}")
                continue
            if any(p.strip() for p in pages):
                attachments.append(Attachment(pdf.rsplit("/", 1)[-1], pages,
                                              "file://" + urllib.parse.quote(path)))
        return links, tuple(attachments), tuple(warnings)

    def _resolve_pdf(self, rel: str, target: str, wiki: bool) -> str | None:
        """A link's PDF as a path relative to the root, or None: not a file here, outside
        the folder, or excluded."""
        target = urllib.parse.unquote(target.strip())
        if "://" in target or target.startswith("mailto:"):
            return None
        here = os.path.dirname(rel)
        candidates = ([target.lstrip("/")] if target.startswith("/")
                      else [os.path.join(here, target), target])
        for cand in candidates:
            norm = os.path.normpath(cand).replace(os.sep, "/")
            if norm.startswith("../") or norm == ".." or os.path.isabs(norm):
                continue
            full = os.path.join(self.root, norm)
            if (os.path.isfile(full) and not self._pdf_excluded(norm)
                    and folder.is_inside(os.path.realpath(self.root), full)):
                return norm
        if wiki:  # Obsidian finds [[file.pdf]] anywhere in the vault by its name
            with self._lock:
                named = self._pdf_names.get(target.rsplit("/", 1)[-1].lower())
            if named and not self._pdf_excluded(named):
                return named
        return None

    def _pdf_excluded(self, rel: str) -> bool:
        parts = rel.split("/")
        if any(p in self.skip_dirs for p in parts[:-1]):
            return True
        return self._excluded(rel) or any(self._excluded(p + "/") for p in _parents(rel))

    def _load_pdf(self, note_id: str, rel: str) -> Note | None:
        """A PDF no note links, as a note of its own (``pdfs = "all"``)."""
        if self.pdf_mode != "all" or self._pdf_excluded(rel):
            return None
        with self._lock:
            linked = any(rel in links for links in self._links.values())
        if linked:
            return None  # a passage of the note that links it
        path = os.path.join(self.root, rel)
        try:
            pages, st = self._pdf_pages(rel, with_stat=True)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise SourceWarning(f"{path}: {e.strerror}; skipped") from None
        except PdfProblem as e:
            raise SourceWarning(str(e)) from None
        url = "file://" + urllib.parse.quote(path)
        name = rel.rsplit("/", 1)[-1]
        # A scan without a text layer is found by its name only.
        attachments = (Attachment(name, pages, url),) if any(p.strip() for p in pages) else ()
        return nfc_note(Note(note_id=note_id, source=self.name, kind=self.kind,
                             title=_stem(rel), text="", url=url, path=path,
                             modified=st.st_mtime, fingerprint=_pdf_fingerprint(rel, st),
                             attachments=attachments))

    def _pdf_pages(self, rel: str, with_stat: bool = False):
        """A PDF's pages, read from what ``open_inside`` opened (raises ``LinkOut``,
        ``OSError``, ``PdfProblem``); with its stat when ``with_stat``."""
        with open(folder.open_inside(self.root, rel), "rb") as f:
            st = os.fstat(f.fileno())
            pages = self.pdfs.pages(os.path.join(self.root, rel), st, f)
        return (pages, st) if with_stat else pages

    def title(self, meta: dict, body: str, rel: str) -> str:
        """Frontmatter ``title``, else the note's leading H1, else the file name."""
        return meta_title(meta) or first_heading(body) or _stem(rel)

    def note_url(self, rel: str, path: str) -> str:
        template = self.config.options.get("url_template")
        if template:
            return _templated(str(template), rel, path, 1)
        return "file://" + urllib.parse.quote(path)

    def passage_url(self, note: Note, anchor: str | None, line: int | None = None) -> str:
        """The note's link; at the passage's ``line`` where ``url_template`` has ``{line}``."""
        template = self.config.options.get("url_template")
        if not line or not template or "{line}" not in str(template) or not note.path:
            return note.url
        return _templated(str(template), self._rel(note.note_id), note.path, line)

    def new_note_url(self, title: str, tags: tuple[str, ...] = ()) -> str | None:
        """The link that asks the editor named by the ``new_note_url`` option to create a
        note (``{title}``, ``{tags}``: comma-separated, ``{path}``: the folder; each
        URL-encoded), or None without one: notewell never writes a note itself."""
        template = self.config.options.get("new_note_url")
        if not template or not title.strip():
            return None
        return (str(template).replace("{title}", urllib.parse.quote(title.strip(), safe=""))
                .replace("{tags}", urllib.parse.quote(",".join(tags), safe=""))
                .replace("{path}", urllib.parse.quote(self.root)))

    def change_token(self) -> str | None:
        return None

    def watch_paths(self) -> list[str]:
        return [self.root]


# How notes are read; part of every fingerprint, so that a notewell which reads a note into
# more than before reads every file again once (2: its path as an alias, linked PDFs,
# frontmatter dates; 3: text in NFC). Only notes whose passages changed are embedded again:
# for those changes, none but the notes that link PDFs, and the notes not in NFC.
_READ = 3


def _templated(template: str, rel: str, path: str, line: int) -> str:
    """A ``url_template`` filled: ``{path}`` and ``{rel}`` URL-encoded, ``{line}`` 1-based."""
    return (template.replace("{path}", urllib.parse.quote(path))
            .replace("{rel}", urllib.parse.quote(rel)).replace("{line}", str(line)))


def _pdf_fingerprint(rel: str, st: os.stat_result) -> str:
    # A name not in NFC (typed in Finder) is read once more, to index its title in NFC;
    # no other PDF is read again.
    nfd = "" if unicodedata.is_normalized("NFC", rel) else ":nfc"
    return f"{st.st_mtime_ns}:{st.st_size}{nfd}"


def _stem(rel: str) -> str:
    name = rel.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0]


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def path_alias(note: Note) -> str | None:
    """A Markdown or Obsidian note's path in its folder, extension dropped (the alias
    ``load`` adds last); None for a note of another source, or a loose PDF."""
    if note.kind not in (MarkdownSource.kind, "obsidian") or not note.aliases:
        return None
    return note.aliases[-1]
