"""Lucene through Pyserini: indexes, BM25 search, keyword dictionaries and extraction (the JVM starts on first use)."""
