"""A deterministic stand-in for the model, for tests and benchmarks; never chosen by
notewell itself.

``FakeEmbedder`` hashes word stems into a small vector, so texts sharing words land close
together and ranking tests behave sensibly without loading a model (synonyms do not:
that is what the real model is for). In-process code passes it where an embedder is
taken (``Engine(config, embedder=FakeEmbedder())``, ``doctor.run(embedder=...)``).

The one test-only entry point, for a daemon or command in a subprocess::

    python -m notewell.model.fake [--delay SECONDS] [--record FILE] serve --poll 0.5

runs ``notewell`` with this embedder wired in; ``--delay`` makes each text cost that many
seconds, as a model would, for tests that stop or kill a process mid-sync; ``--record``
appends the sha256 of every text embedded to FILE, one a line (several processes may
share it: each line is one ``write`` to a file opened for appending).
"""

from __future__ import annotations

import hashlib
import re
import sys
import time

import numpy as np

from notewell.model.embedding import normalise


class FakeEmbedder:
    """Hashed bag of word stems, L2-normalised."""

    id = "fake-hash"

    def __init__(self, dim: int = 64, delay: float = 0.0, record: str | None = None) -> None:
        self.dim = dim
        self.delay = delay  # seconds per text, to stand in for a model's cost
        self.record = record
        self.calls: list[int] = []

    def fingerprint(self) -> str:
        return f"{self.id}:{self.dim}"

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        if self.record:
            with open(self.record, "a", encoding="utf-8") as f:
                for text in texts:
                    f.write(hashlib.sha256(text.encode()).hexdigest() + "\n")
                    f.flush()
        if self.delay:
            time.sleep(self.delay * len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word[:5].encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % self.dim] += 1.0
            if not out[row].any():
                out[row, 0] = 1.0
        return normalise(out)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    delay, record = 0.0, None
    if args[:1] == ["--delay"] and len(args) > 1:
        delay, args = float(args[1]), args[2:]
    if args[:1] == ["--record"] and len(args) > 1:
        record, args = args[1], args[2:]
    from notewell import cli

    return cli.main(args, embedder=lambda: FakeEmbedder(delay=delay, record=record))


if __name__ == "__main__":
    sys.exit(main())
