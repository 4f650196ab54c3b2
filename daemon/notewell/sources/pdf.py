"""The text of PDF files, page by page, for the notes that link them and for loose PDFs.

pypdf reads it (pure Python, maintained, no system library; imported only when a PDF is
read). A PDF that cannot be read (encrypted with a password, damaged, over the size or
page limits) gives one ``PdfProblem`` naming it and what to do; the caller turns that into
one warning per file version and carries on. Text is kept per file version (path, mtime,
size), so an unchanged PDF is never read twice by one process.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from typing import BinaryIO

log = logging.getLogger(__name__)
# pypdf logs every oddity of a damaged file; notewell says once what it could not read.
logging.getLogger("pypdf").setLevel(logging.ERROR)

MAX_PDF_BYTES = 50 * 1024 * 1024
MAX_PDF_PAGES = 1000
_KEPT = 256  # file versions whose text is kept


class PdfProblem(Exception):
    """One PDF could not be read; the message names it and says why."""


def read_pages(path: str, max_bytes: int = MAX_PDF_BYTES,
               file: BinaryIO | None = None) -> tuple[str, ...]:
    """Each page's text (blank pages as empty strings), read from ``file`` when given
    (already opened: ``path`` only names it). Raises ``PdfProblem``."""
    try:
        size = os.fstat(file.fileno()).st_size if file is not None else os.path.getsize(path)
    except OSError as e:
        raise PdfProblem(f"{path}: {e.strerror}; skipped") from None
    if size > max_bytes:
        raise PdfProblem(f"{path}: {size / 1e6:.1f} MB is over the {max_bytes / 1e6:g} MB "
                         "limit for a PDF (the source's pdf_max_mb); skipped")
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError:
        raise PdfProblem(f"{path}: pypdf is not installed, so PDFs are not read "
                         "(pip install pypdf)") from None
    try:
        reader = PdfReader(file if file is not None else path, strict=False)
        if reader.is_encrypted:
            # Many PDFs are "encrypted" with an empty password only to set permissions.
            try:
                opened = reader.decrypt("")
            except Exception:  # pypdf needs an extra library for some ciphers
                opened = 0
            if not opened:
                raise PdfProblem(f"{path}: encrypted with a password; skipped")
        if len(reader.pages) > MAX_PDF_PAGES:
            raise PdfProblem(f"{path}: {len(reader.pages)} pages is over the "
                             f"{MAX_PDF_PAGES}-page limit for a PDF; skipped")
        return tuple(_clean(page.extract_text() or "") for page in reader.pages)
    except PdfProblem:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError,
            OSError, RecursionError) as e:
        raise PdfProblem(f"{path}: not a readable PDF ({type(e).__name__}); skipped") from None


def _clean(text: str) -> str:
    # Surrogates and NULs from odd fonts would break the index's UTF-8.
    return text.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8")


class PdfTexts:
    """Pages of PDF file versions, read once each (and a problem reported once each)."""

    def __init__(self, max_bytes: int = MAX_PDF_BYTES) -> None:
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._pages: OrderedDict[tuple, tuple[str, ...] | PdfProblem] = OrderedDict()
        self.reads = 0  # files actually read: tests and benchmarks check incrementality

    def pages(self, path: str, st: os.stat_result, file: BinaryIO | None = None
              ) -> tuple[str, ...]:
        """The pages of ``path`` as it is now (``st``), read from ``file`` when given (the
        file opened, inside its folder); raises ``PdfProblem``."""
        key = (path, st.st_mtime_ns, st.st_size)
        with self._lock:
            found = self._pages.get(key)
            if found is not None:
                self._pages.move_to_end(key)
        if found is None:
            with self._lock:  # counted from several threads (sync, handlers)
                self.reads += 1
            try:
                found = read_pages(path, self.max_bytes, file)
            except PdfProblem as e:
                found = e
                log.warning("%s", e)  # once per file version: it is kept below
            with self._lock:
                self._pages[key] = found
                while len(self._pages) > _KEPT:
                    self._pages.popitem(last=False)
        if isinstance(found, PdfProblem):
            raise found
        return found
