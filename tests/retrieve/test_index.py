"""Indexing: TSV/JSONL/TREC inputs, metadata beside the index, atomic replacement, bad input."""
from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.data.corpus import iter_docs
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError, InputError
from pipeline.stages.bm25 import BM25
from pipeline.retrieve.index import build_index

DOCS = [("d1", "lucene is a search library"), ("d2", "pyserini wraps anserini for python"),
        ("d3", "bm25 ranks documents by term frequency and inverse document frequency")]


@pytest.fixture
def tsv_corpus(tmp_path):
    path = tmp_path / "collection.tsv"
    path.write_text("".join(f"{d}\t{t}\n" for d, t in DOCS))
    return path


def test_tsv_index_records_metadata_and_finds_planted_doc(tsv_corpus, tmp_path):
    index = tmp_path / "idx"
    assert main(["-q", "index", "--input", str(tsv_corpus), "--output", str(index), "--threads", "1"]) == 0
    meta = json.loads((index / "irpipe-index.json").read_text())
    assert meta["documents"] == 3 and meta["store_docvectors"] and meta["source"].endswith("collection.tsv")
    run = BM25(index, hits=3)(Topics({"q": "inverse document frequency"}))
    assert run["q"][0][0] == "d3"


@pytest.mark.slow
def test_existing_index_needs_overwrite(tsv_corpus, tmp_path):
    index = tmp_path / "idx"
    build_index(iter_docs(tsv_corpus), index, "t")
    with pytest.raises(ConfigError, match="--overwrite"):
        build_index(iter_docs(tsv_corpus), index, "t")
    build_index(iter_docs(tsv_corpus), index, "t", overwrite=True)


def test_malformed_corpus_leaves_no_index(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("d1\tfine\nno tab on this line\n")
    with pytest.raises(InputError) as error:
        build_index(iter_docs(bad), tmp_path / "idx", "bad")
    assert error.value.line == 2
    assert not (tmp_path / "idx").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".irpipe-index-")]


@pytest.mark.slow
def test_chinese_index_returns_planted_document(tmp_path):
    docs = [{"id": "z1", "contents": "信用卡额度怎么提高"}, {"id": "z2", "contents": "今天天气很好"},
            {"id": "z3", "contents": "如何申请车险理赔"}]
    index = tmp_path / "zh"
    build_index(iter(docs), index, "zh", language="zh")
    run = BM25(index, hits=3)(Topics({"q": "车险理赔流程"}))
    assert run["q"][0][0] == "z3"
