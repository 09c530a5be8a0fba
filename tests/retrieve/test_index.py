"""Indexing: TSV/JSONL/TREC inputs, metadata beside the index, atomic replacement, bad input."""
from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.data.corpus import iter_docs
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError, InputError
from pipeline.stages.bm25 import BM25
from pipeline.retrieve.index import build_index, open_index
from pipeline.retrieve.index_checks import JSON_STRING_LIMIT
from support import irpipe

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


# -- the documents Anserini is given, and the index it makes of them (pipeline/retrieve/index_checks.py) ----------

def _corpus(path, documents):
    """A JSONL corpus of (id, contents), written as UTF-8 (a character past U+FFFF is 4 bytes, not a JSON escape)."""
    with open(path, "w", encoding="utf-8") as out:
        out.writelines(json.dumps({"id": d, "contents": t}, ensure_ascii=False) + "\n" for d, t in documents)
    return path


@pytest.mark.parametrize("text, length", [("x" * (JSON_STRING_LIMIT + 1), "20,000,001"),
                                          ("\U0001F600" * (JSON_STRING_LIMIT // 2) + "x", "20,000,001")],
                         ids=["ascii", "emoji-counted-twice"])
def test_a_document_past_the_json_limit_is_refused_before_indexing(tmp_path, capsys, text, length):
    """One character past Anserini's JSON reader limit (Java counts an emoji as two: 10,000,000 of them and an "x"
    are 10,000,001 Python characters). Before: exit 0, irpipe-index.json recording 3 documents, and an index of 0
    (Anserini skipped the whole part file: 'Total 0 documents indexed')."""
    corpus = _corpus(tmp_path / "docs.jsonl", [("d1", "small one"), ("big", text), ("d3", "small three")])
    code, _, err = irpipe(capsys, "index", "--input", corpus, "--output", tmp_path / "idx", "--threads", "1")
    assert code == 2 and "Traceback" not in err, err[-2000:]
    assert f"irpipe index: error: {corpus}:2 [contents]: document 'big' is {length} characters long (UTF-16 " in err
    assert "accepts at most 20,000,000" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]  # no index, no scratch


@pytest.mark.slow
def test_a_document_at_the_json_limit_is_indexed_whole(tmp_path):
    """20,000,000 characters, the most Anserini's JSON reader takes: indexed to its last word (a search for it
    finds the document), its stored text whole, the other documents of its part file indexed too."""
    text = ("filler words " * (JSON_STRING_LIMIT // 13))[:JSON_STRING_LIMIT - len(" needle")] + " needle"
    assert len(text) == JSON_STRING_LIMIT
    meta = build_index(iter([{"id": "d1", "contents": "small one"}, {"id": "big", "contents": text},
                             {"id": "d3", "contents": "small three"}]), tmp_path / "idx", "t")
    assert meta["documents"] == 3
    run = BM25(tmp_path / "idx", hits=3)(Topics({"n": "needle", "s": "small"}))
    assert [d for d, _ in run["n"]] == ["big"] and sorted(d for d, _ in run["s"]) == ["d1", "d3"]
    assert len(open_index(str(tmp_path / "idx")).doc_text("big")) == JSON_STRING_LIMIT


def test_an_index_lacking_a_document_is_refused_naming_it(tmp_path, capsys):
    """A document Anserini skips while exiting 0, for a reason irpipe does not check beforehand: an id longer than
    Lucene's term limit (32,766 bytes). Before: exit 0, irpipe-index.json recording 3 documents, the index 1 (and
    Anserini's log 'Total 2 documents indexed')."""
    long_id = "x" * 40_000
    corpus = _corpus(tmp_path / "docs.jsonl", [("d1", "small one"), (long_id, "short"), ("d3", "small three")])
    code, _, err = irpipe(capsys, "index", "--input", corpus, "--output", tmp_path / "idx", "--threads", "1")
    assert code == 2 and "Traceback" not in err, err
    assert (f"irpipe index: error: {corpus}:2: document {'x' * 80!r}... (40,000 characters) (5 characters long) is "
            "the first missing from the index: Anserini indexed 1 of the 3 documents it was given and exited 0, so no "
            "index is kept; Anserini said: Document contains at least one immense term in field=\"id\"") in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]


def test_documents_with_no_text_are_said_and_not_counted(tmp_path, capsys):
    """Anserini leaves out a document whose contents Java's trim() empties (spaces, tabs, control characters; not a
    no-break space); the index records the documents it holds. Before: `documents` counted them (Cranfield: 1,400
    recorded, 1,398 indexed)."""
    corpus = _corpus(tmp_path / "docs.jsonl", [("d1", "small one"), ("e1", ""), ("e2", " \t\x01"),
                                               ("nbsp", "\u00a0"), ("d3", "small three")])
    code, out, err = irpipe(capsys, "index", "--input", corpus, "--output", tmp_path / "idx", "--threads", "1")
    assert code == 0, err
    meta = json.loads(out)
    assert (meta["documents"], meta["empty_documents"]) == (3, 2)
    assert "2 document(s) with no text (only spaces or control characters) not indexed" in err and "'e1'" in err
