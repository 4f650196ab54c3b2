"""Text that is no note, as notes are read: a selection or a file handed to "related
notes" (``ReadView.related``), checked (blank, binary), read (a PDF's pages, a Markdown
file without its frontmatter) and turned into one vector the way a note's mean passage
vector is made. May import ``notes``, ``ingest.chunking``, ``model``, ``sources`` and
``wire.requests``.
"""

from __future__ import annotations

import os

import numpy as np

from notewell.ingest.chunking import ChunkSettings, chunk_note
from notewell.model.embedding import Embedder
from notewell.notes import nfc
from notewell.sources import SourceWarning
from notewell.wire import requests
from notewell.wire.requests import ArgumentError

RELATED_FILE_TYPES = (".md", ".markdown", ".txt", ".pdf")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be read for related notes (blank; binary: NUL bytes, or mostly
    control characters and undecodable bytes), else None."""
    if not text.strip():
        return "is empty: select some text, or a Markdown, text or PDF file"
    head = text[:4000]
    odd = sum(1 for c in head if (c < " " and c not in "\t\n\r\f") or c == "\ufffd")
    if "\x00" in head or odd > len(head) // 10:
        return ("looks like binary data, not text: select some text, or a Markdown, text "
                "or PDF file")
    return None


def text_vector(embedder: Embedder, chunker: ChunkSettings, text: str, title: str = ""
                ) -> np.ndarray:
    """A text's vector as a note's mean passage vector is made: cut into passages as a
    note is (``chunk_note``), each embedded as a passage (a model with prefixes reads it
    with the passage prefix, as the notes it is compared with were), their mean at unit
    length. A text longer than the model's window counts whole, not only its start
    (measured against reading its first window alone: bench/README.md, "Related notes
for any text")."""
    chunks = chunk_note(title, text, chunker)
    vectors = embedder.embed_batch([c.embed_text(title) for c in chunks])
    mean = vectors.mean(axis=0)
    return (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)


def read_file_text(path: str, ext: str) -> tuple[str, str]:
    """(title, text) of a file outside the configured sources: a PDF's pages, a Markdown
    or text file without its frontmatter. Raises ``ArgumentError``."""
    from notewell.sources.frontmatter import split_frontmatter
    from notewell.sources.markdown_text import decode_note
    from notewell.sources.pdf import PdfProblem, read_pages

    title = os.path.splitext(os.path.basename(path))[0]
    if ext == ".pdf":
        try:
            pages = read_pages(path, requests.MAX_RELATED_FILE_BYTES)
        except PdfProblem as e:
            raise ArgumentError("path", str(e).removesuffix("; skipped")) from None
        return title, "\n\n".join(pages)
    try:
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as f:
            raw = f.read(requests.MAX_RELATED_FILE_BYTES + 1)
        text = nfc(decode_note(raw, path))
    except OSError as e:
        raise ArgumentError("path", f"{path[:300]}: {e.strerror}") from None
    except SourceWarning as e:
        raise ArgumentError("path", str(e).removesuffix("; skipped")) from None
    return title, split_frontmatter(text)[1] if ext != ".txt" else text
