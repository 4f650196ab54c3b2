"""The index: one SQLite file (notes, chunks, FTS5, sqlite-vec) and the daemon's copies.

Owns every line of SQL in notewell: the schema and its numbered migrations
(``schema``), the ``Index`` with its writes and reads (``database``), index files on disk
and their generations (``store``), FTS5's words and their frequencies (``terms``), and the
in-memory copies that answer a resident process's searches (``keywords``,
``vector_cache``, with ``topk``). May import ``notes``, ``memory`` and ``wire.paths``;
never ``search``, ``ingest``, ``serve`` or anything above them.
"""
