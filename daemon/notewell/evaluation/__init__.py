"""Measuring retrieval: metrics, golden sets and BEIR datasets, rankers side by side.

Owns what ``notewell eval`` reports. May import everything below ``engine``
(``index``, ``ingest``, ``search``, ``sources``, ``model``) and ``engine`` itself.
"""
