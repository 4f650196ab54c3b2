"""Ranking: from what the user typed to a list of notes, each once, with its passage.

Owns ``query`` (filters and words in the typed text) and ``searcher`` (retrieval,
fusion, grouping, near-duplicates and snippets). Reads the index only through the
``Index`` read methods (no SQL here). May import ``notes``, ``index``, ``wire.protocol``
and the ``model.embedding.Embedder`` interface.
"""
