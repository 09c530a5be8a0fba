"""irpipe: BM25 through Pyserini, neural rerankers, TREC runs and ir-measures evaluation.

Importing the package is cheap: the JVM starts only when Lucene is first needed (see `pipeline.java`).
"""
__version__ = "0.1.0"

from pipeline.data.runs import Run  # noqa: E402,F401
from pipeline.data.topics import Topics  # noqa: E402,F401
