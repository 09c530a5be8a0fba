"""Document readers: JSONL, TSV, TREC SGML, folders and .gz, streamed; malformed input names file, line, field."""
from __future__ import annotations

import gzip
import types

import pytest

from pipeline.data.corpus import detect_doc_format, iter_docs
from pipeline.errors import InputError, MissingResourceError

TREC = """<DOC>
<DOCNO> FT911-1 </DOCNO>
<HEADLINE>Markets &amp; more</HEADLINE>
<TEXT>
First   line
second line
</TEXT>
</DOC>
<DOC><DOCNO>2</DOCNO>one-liner</DOC><DOC><DOCNO>3</DOCNO>same line</DOC>
"""

VALID = [
    pytest.param("c.jsonl", '{"id": "d1", "contents": "hello world", "title": "T"}\n\n{"id": 7, "contents": ""}\n', None,
                 [{"id": "d1", "contents": "hello world", "title": "T"}, {"id": "7", "contents": ""}], id="jsonl-extra-fields"),
    pytest.param("cacm.json", '{"id": "CACM-1", "contents": "a\\nb"}\n', None, [{"id": "CACM-1", "contents": "a\nb"}], id="json-lines-in-.json"),
    pytest.param("collection.tsv", "0\tThe presence of\tcommunication\n1\t\n", None,
                 [{"id": "0", "contents": "The presence of\tcommunication"}, {"id": "1", "contents": ""}], id="tsv"),
    pytest.param("docs.trec", TREC, None,
                 [{"id": "FT911-1", "contents": "Markets &amp; more First line second line"},
                  {"id": "2", "contents": "one-liner"}, {"id": "3", "contents": "same line"}], id="trec-sgml"),
    pytest.param("docs.txt", "<DOC>\n<DOCNO>1</DOCNO>\nvaswani style\n</DOC>\n", None,
                 [{"id": "1", "contents": "vaswani style"}], id="trec-sniffed"),
    pytest.param("docs.txt", "a\tb\n", None, [{"id": "a", "contents": "b"}], id="tsv-sniffed"),
    pytest.param("docs.txt", '{"id": "a", "contents": "b"}\n', "jsonl", [{"id": "a", "contents": "b"}], id="format-given"),
]


@pytest.mark.parametrize("name, text, format, docs", VALID)
def test_iter_docs(tmp_path, name, text, format, docs):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert list(iter_docs(path, format)) == docs


def test_gzip_and_folder(tmp_path):
    with gzip.open(tmp_path / "b.jsonl.gz", "wt", encoding="utf-8") as out:
        out.write('{"id": "b1", "contents": "zipped"}\n')
    (tmp_path / "a.tsv").write_text("a1\tfirst\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.trec").write_text("<DOC><DOCNO>c1</DOCNO>nested</DOC>\n")
    (tmp_path / ".hidden").write_text("not a document")
    assert detect_doc_format(tmp_path / "b.jsonl.gz") == "jsonl"
    assert [d["id"] for d in iter_docs(tmp_path)] == ["a1", "b1", "c1"]  # name order, hidden files skipped


def test_tsv_streams_line_by_line(tmp_path):
    """The first document comes out before a malformed line further down is even read."""
    path = tmp_path / "big.tsv"
    path.write_text("1\tfirst\n" + "".join(f"{i}\tdoc {i}\n" for i in range(2, 1000)) + "broken line\n")
    docs = iter_docs(path)
    assert isinstance(docs, types.GeneratorType)
    assert next(docs) == {"id": "1", "contents": "first"}
    with pytest.raises(InputError) as caught:
        list(docs)
    assert (caught.value.line, caught.value.field) == (1000, "columns")


MALFORMED = [
    # name, text, line, field, words in the message
    ("c.jsonl", '{"id": "1", "contents": "a"}\n{"id": "2", "contents": \n', 2, None, "not a JSON object"),
    ("c.jsonl", '"just a string"\n', 1, None, "one JSON object per line"),
    ("c.jsonl", '{"contents": "no id"}\n', 1, "id", "document id"),
    ("c.jsonl", '{"id": "", "contents": "x"}\n', 1, "id", "document id"),
    ("c.jsonl", '{"id": "a b", "contents": "x"}\n', 1, "id", "whitespace"),
    ("c.jsonl", '{"id": "1"}\n', 1, "contents", "contents"),
    ("c.jsonl", '{"id": "1", "contents": ["a"]}\n', 1, "contents", "contents"),
    ("c.tsv", "1\tok\n2\tok\nno tab\n", 3, "columns", "no tab"),
    ("c.tsv", "\tno id\n", 1, "id", "empty document id"),
    ("c.trec", "<DOC>\n<DOCNO>1</DOCNO>ok\n</DOC>\n<DOC>\nno number\n</DOC>\n", 4, "DOCNO", "no <DOCNO>"),
    ("c.trec", "<DOC>\n<DOCNO> </DOCNO>\n</DOC>\n", 1, "DOCNO", "empty document id"),
    ("c.trec", "<DOC>\n<DOCNO>1</DOCNO>\ntext\n", 1, "DOC", "never closed"),
    ("c.trec", "<DOC>\n<DOCNO>1</DOCNO>\n<DOC>\n", 3, "DOC", "not closed"),
    ("c.trec", "<DOC><DOCNO>1</DOCNO></DOC>\nstray\n", 2, None, "outside"),
    ("c.tsv", "", None, None, "empty"),
    ("c.txt", "plain words\n", 1, None, "cannot detect"),
]


@pytest.mark.parametrize("name, text, line, field, words", MALFORMED)
def test_malformed_docs(tmp_path, name, text, line, field, words):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        list(iter_docs(path))
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), line, field)
    assert words in str(error) and str(path) in str(error)


def test_missing_and_empty_inputs(tmp_path):
    with pytest.raises(MissingResourceError, match="no such file"):
        list(iter_docs(tmp_path / "absent.jsonl"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no files"):
        list(iter_docs(tmp_path / "empty"))
    with pytest.raises(ValueError, match="unknown document format"):
        list(iter_docs(tmp_path, "xml"))


def test_vaswani_trec_file(shared_data):
    docs = iter_docs(shared_data / "vaswani/tests/fixtures/vaswani_npl/corpus/doc-text.trec")
    first = next(docs)
    assert first == {"id": "1", "contents": "compact memories have flexible capacities a digital data storage system with "
                                            "capacity up to bits and random and or sequential access is described"}
    assert sum(1 for _ in docs) + 1 == 11429
