"""Turning text into vectors: the embedder interface, the shipped model and its files.

Owns ``embedding`` (the ``Embedder`` interface and the ONNX MiniLM embedder),
``model_file`` (the int8 rewrite of the shipped model and the record of which file runs).
May import ``memory`` and ``wire.paths``; nothing else of notewell.
"""
