"""Rows of docs/coming-from.md that no other test file covers: Pyserini's indexer through `irpipe pyserini`."""
from __future__ import annotations

import json
import subprocess
import sys

from pipeline.cli import main
from support import DOCS, TOPICS


def test_irpipe_pyserini_index_lucene_builds_the_index_irpipe_index_builds(tmp_path):
    """`irpipe pyserini index.lucene ...` (Pyserini's indexer on irpipe's JVM) on a JsonCollection folder builds an
    index that `irpipe search` ranks as it ranks the index `irpipe index --input` builds from the same file: the
    same run, line for line."""
    (tmp_path / "docs").mkdir()
    corpus = tmp_path / "docs" / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d, "contents": text}) + "\n" for d, text in DOCS))
    (tmp_path / "topics.tsv").write_text(TOPICS)
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", "pyserini", "index.lucene",
                           "--collection", "JsonCollection", "--input", str(tmp_path / "docs"),
                           "--index", str(tmp_path / "pyserini"), "--generator", "DefaultLuceneDocumentGenerator",
                           "--threads", "1", "--storePositions", "--storeDocvectors", "--storeRaw"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert main(["-q", "index", "--input", str(corpus), "--output", str(tmp_path / "irpipe")]) == 0
    runs = {}
    for name in ("pyserini", "irpipe"):
        assert main(["-q", "search", "--index", str(tmp_path / name), "--topics", str(tmp_path / "topics.tsv"),
                     "--output", str(tmp_path / f"{name}.trec")]) == 0
        runs[name] = (tmp_path / f"{name}.trec").read_text().splitlines()
    assert len(runs["irpipe"]) >= 5
    assert runs["pyserini"] == runs["irpipe"]
