"""Constants and markers shared by test modules (import them from here, not from conftest: there are several)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pipeline.rerank.bert import save_tiny_bert  # noqa: F401 (the tests' tiny BERT, in the package for eval/)

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("IRPIPE_MIRROR") or REPO.parent / "shared" / "data")

if SHARED_DATA.is_dir():
    os.environ.setdefault("IRPIPE_MIRROR", str(SHARED_DATA))

needs_shared_data = pytest.mark.skipif(
    not SHARED_DATA.is_dir(),
    reason=f"dataset mirror not found at {SHARED_DATA} (set IRPIPE_MIRROR to a folder laid out like ../shared/data)",
)


def irpipe(capsys, *argv) -> tuple[int, str, str]:
    """`irpipe -q ARGV...` in-process through the real dispatcher -> (exit code, stdout, stderr) of that call alone."""
    from pipeline import cli

    capsys.readouterr()
    code = cli.main(["-q", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def make_pairs(queries: list[str], docs: list[str]) -> list:
    """Pairs of parallel query and document texts (ids q0.., d0..), as a reranker stage hands them to a model."""
    from pipeline.rerank.pairs import Pair

    return [Pair(f"q{i}", f"d{i}", query, doc) for i, (query, doc) in enumerate(zip(queries, docs))]


# -- a tiny collection of our own, written by the tests that need one ---------------------------------------------
TOPICS = "1\tcolour of the sky\n2\tgreen grass in spring\n3\tcoal mining\n"
QRELS = "1 0 d1 1\n1 0 d4 0\n2 0 d2 1\n3 0 d3 1\n3 0 d5 1\n"
DOCS = [("d1", "the sky is blue on a clear day"), ("d2", "grass is green in spring and summer"),
        ("d3", "coal is black; mining coal is dirty work"), ("d4", "the sky at night is dark"),
        ("d5", "a coal mine in wales"), ("d6", "nothing to see here")]


def write_collection(folder: Path) -> Path:
    """A tiny TREC collection of our own (topics TSV, qrels, JSONL corpus), with a dataset.yaml naming it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "topics.tsv").write_text(TOPICS)
    (folder / "qrels.txt").write_text(QRELS)
    (folder / "docs.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in DOCS))
    (folder / "dataset.yaml").write_text("name: tiny-trec\nfiles:\n  topics: topics.tsv\n  qrels: qrels.txt\n"
                                         "  corpus: docs.jsonl\n")
    return folder
