"""The index: one SQLite file (notes, chunks, FTS5, sqlite-vec) and the daemon's copies.

Owns every line of SQL in notewell: the file's format, migrations and checks
(``schema``), the ``Index`` with its connections and writes (``database``), the stamps
and rows the copies read (``sql``), the one read interface search uses and its SQLite
side, the SQL of each read (``reads``), its in-memory-copy side and the per-request
view that picks a side once (``copy_reads``), the lifecycle of the in-memory copies
(``copies``) and the copies themselves (``keywords``, ``vector_cache``, with ``topk``),
FTS5's words and their frequencies (``terms``), index files on disk and their
generations (``store``), a full disk and a damaged file told apart (``failures``), a
stamp of writes by anyone (``stamp``) and a small shared LRU (``lru``). May import
``notes``, ``memory``, ``clock`` and ``wire.paths``; never ``search``, ``ingest``,
``serve`` or anything above them.
"""
