"""A Markdown source is used from several threads at once (issue 27.2): the sync's and the
watcher's threads scan it, the sync and the handlers (reading a note for an agent) load
from it. What it remembers between calls (which PDFs each note links, PDFs by file name,
an Obsidian vault's excluded files) is owned by the source and guarded, so a scan never
meets a half-written copy. These tests race on purpose: thread switches every
microsecond, many rounds."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from helpers import write_notes
from notewell.config import SourceConfig
from notewell.sources.markdown import MarkdownSource
from pdf_fixture import write_pdf

ROUNDS = 60
N_NOTES = 600


def race(*jobs) -> list[BaseException]:
    """Run each job ROUNDS times on its own thread, all at once; what they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(jobs))

    def run(job):
        start.wait()
        try:
            for i in range(ROUNDS):
                job(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a thread switch every microsecond
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(before)
    return errors


def test_scans_and_loads_on_other_threads_see_whole_link_maps(tmp_path: Path):
    root = tmp_path / "notes"
    # Many PDFs: the map of PDFs by name takes a while to build; boiler.md links one of
    # them by name only, as Obsidian lets it. Many notes link a PDF: the map of links is
    # long to go through.
    for i in range(150):
        write_notes(root, {f"pdfs/p{i:03}.pdf": "%PDF-1.4 not read\n"})
    write_pdf(root / "pdfs/zz-manual.pdf", ["Flue gauge readings."])
    write_pdf(root / "pdfs/p149.pdf", ["A PDF no note links."])
    write_notes(root, {"boiler.md": "# Boiler\n\n![[zz-manual.pdf]]\n"})
    linking = {f"n{i:04}.md": f"# N{i}\n\n[m](pdfs/zz-manual.pdf)\n" for i in range(N_NOTES)}
    write_notes(root, linking)
    src = MarkdownSource(SourceConfig("notes", "markdown", str(root), (), {"pdfs": "all"}))
    list(src.scan())
    for name in linking:  # the source learns which PDFs each note links
        src.load(f"notes:{name}")
    missing: list[int] = []

    def scan(_: int) -> None:
        list(src.scan())

    def load(i: int) -> None:
        # Each load adds or removes one note's links: the map changes size under a scan.
        (root / "n0000.md").write_text(linking["n0000.md"] if i % 2 else "# Plain\n")
        src.load("notes:n0000.md")
        if not src.load("notes:boiler.md").attachments:
            missing.append(i)

    def load_pdf(_: int) -> None:
        src.load("notes:pdfs/p149.pdf")

    assert race(scan, load, load_pdf) == []
    assert missing == []  # the PDF linked by name was always found
