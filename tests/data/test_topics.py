"""Topic readers: every format with tiny inline files, every malformed case naming file, line and field."""
from __future__ import annotations

import gzip
import os

import pytest

from pipeline.data.topics import Topics
from pipeline.data.topics import detect_topic_format, read_topics, write_topics
from pipeline.errors import InputError

ROBUST = """<top>
<num> Number: 301
<title> International Organized Crime

<desc> Description:
Identify organizations that participate in international criminal activity.

<narr> Narrative:
A relevant document must as a minimum identify the organization.
</top>

<top>
<num> Number: 302
<title>
Poliomyelitis and Post-Polio
<desc> Description:
Is the disease still a problem?
<narr> Narrative:
Relevant documents report on cases.
</top>
"""

VALID = [
    pytest.param("t.tsv", "1\thello world\n2\t  second   query \n", None,
                 {"1": "hello world", "2": "second   query"}, {}, id="tsv"),
    pytest.param("t.txt", "\n101\tcrlf line\r\n\n102\tnext\r\n", None, {"101": "crlf line", "102": "next"}, {}, id="tsv-sniffed-crlf-blank-lines"),
    pytest.param("robust.txt", ROBUST, None,
                 {"301": "International Organized Crime", "302": "Poliomyelitis and Post-Polio"},
                 {"301": {"description": "Identify organizations that participate in international criminal activity.",
                          "narrative": "A relevant document must as a minimum identify the organization."},
                  "302": {"description": "Is the disease still a problem?", "narrative": "Relevant documents report on cases."}},
                 id="trec-robust"),
    pytest.param("vaswani.trec", "<top>\n<num>1</num><title>\nMEASUREMENT OF\nDIELECTRIC CONSTANT\n</title>\n</top>\n"
                                 "<top>\n<num>2</num><title>\nWAVEGUIDES\n</title>\n</top>\n", None,
                 {"1": "MEASUREMENT OF DIELECTRIC CONSTANT", "2": "WAVEGUIDES"}, {}, id="trec-closed-tags"),
    pytest.param("fire.txt", "<top lang='en'><num>176</num><title>Topic: one line</title></top>\n", "trec",
                 {"176": "one line"}, {}, id="trec-fire-one-line"),
    pytest.param("topics.cacm.txt", "<DOC>\n<DOCNO> 1 </DOCNO>\n\n\n What articles exist\nwhich deal with TSS?\n\n \n</DOC>\n"
                                    "<DOC>\n<DOCNO> 2 </DOCNO>\n\n Prieve, B.\nPooch, U.\n\n</DOC>\n", None,
                 {"1": "What articles exist which deal with TSS?", "2": "Prieve, B. Pooch, U."}, {}, id="cacm"),
    pytest.param("t.jsonl", '{"qid": "q1", "query": " a b ", "keywords": ["x"]}\n{"qid": 7, "query": "c"}\n', None,
                 {"q1": "a b", "7": "c"}, {"q1": {"keywords": ["x"]}}, id="jsonl-extra-fields-int-qid"),
]


@pytest.mark.parametrize("name, text, format, queries, extra", VALID)
def test_read_topics(tmp_path, name, text, format, queries, extra):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    topics = read_topics(path, format)
    assert topics.queries == queries
    assert list(topics) == list(queries)  # file order
    assert topics.extra == extra


def test_read_topics_gzip(tmp_path):
    path = tmp_path / "t.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write("1\tzipped\n")
    assert detect_topic_format(path) == "tsv"
    assert read_topics(path).queries == {"1": "zipped"}


@pytest.mark.parametrize("name, text, expected", [
    ("a.tsv", "1\tx\n", "tsv"),
    ("a.jsonl", '{"qid": "1", "query": "x"}\n', "jsonl"),
    ("a.txt", '\n{"qid": "1", "query": "x"}\n', "jsonl"),
    ("a.txt", "<top>\n", "trec"),
    ("a.txt", "<DOC>\n", "cacm"),
    ("a.txt", "1\tx\n", "tsv"),
])
def test_detect_topic_format(tmp_path, name, text, expected):
    (tmp_path / name).write_text(text)
    assert detect_topic_format(tmp_path / name) == expected


MALFORMED = [
    # name, text, format, line, field, words in the message
    ("t.tsv", "1\tok\n2 no tab here\n", None, 2, "columns", "no tab"),
    ("t.tsv", "1\ta\tb\n", "tsv", 1, "columns", "expected 2 tab-separated fields (qid, query), found 3"),
    ("t.tsv", "1\tok\n2\t   \n", None, 2, "query", "no text"),
    ("t.tsv", "1\ta\n2\tb\n\n1\tc\n", None, 4, "qid", "appears twice"),
    ("t.tsv", "\tno id\n", None, 1, "qid", "empty query id"),
    ("t.tsv", "a b\ttext\n", None, 1, "qid", "whitespace"),
    ("t.tsv", "", None, None, None, "empty"),
    ("t.tsv", "\n  \n", None, None, None, "empty"),
    ("t.trec", "<top>\n<title> no number\n</top>\n", "trec", 1, "num", "no <num>"),
    ("t.trec", "<top>\n<num> Number: 5\n<desc> only a description\n</top>\n", "trec", 1, "title", "no <title>"),
    ("t.trec", "\n<top><num>5</num><title> </title></top>\n", "trec", 2, "title", "no text"),
    ("t.trec", "<top>\n<num>1\n<title>a\n</top>\n<top>\n<num>1\n<title>b\n</top>\n", "trec", 5, "num", "appears twice"),
    ("t.trec", "<top>\n<num>1\n<title>a\n", "trec", 1, "top", "never closed"),
    ("t.trec", "<top>\n<num>1\n<title>a\n<top>\n", "trec", 4, "top", "not closed"),
    ("t.trec", "junk\n<top><num>1<title>a</top>\n", "trec", 1, None, "outside"),
    ("t.txt", "<DOC>\n just text\n</DOC>\n", "cacm", 1, "DOCNO", "no <DOCNO>"),
    ("t.txt", "<DOC>\n<DOCNO> 3 </DOCNO>\n\n</DOC>\n", "cacm", 1, "text", "no text"),
    ("t.jsonl", '{"qid": "1", "query": "a"}\n{oops\n', None, 2, None, "not a JSON object"),
    ("t.jsonl", '["1", "a"]\n', None, 1, None, "one JSON object per line"),
    ("t.jsonl", '{"query": "a"}\n', None, 1, "qid", "qid"),
    ("t.jsonl", '{"qid": "1", "text": "a"}\n', None, 1, "query", "query"),
    ("t.txt", "just words\n", None, 1, None, "cannot detect"),
]


@pytest.mark.parametrize("name, text, format, line, field, words", MALFORMED)
def test_malformed_topics(tmp_path, name, text, format, line, field, words):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_topics(path, format)
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), line, field)
    assert words in str(error) and str(path) in str(error)


def test_unknown_format_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError, match="unknown topic format"):
        read_topics(tmp_path / "x", "xml")


def test_write_topics_round_trip(tmp_path):
    topics = Topics({"b": "second query", "a": "first", "10": "中文 查询"})
    path = write_topics(topics, tmp_path / "sub" / "out.tsv")
    assert path.read_text(encoding="utf-8") == "b\tsecond query\na\tfirst\n10\t中文 查询\n"
    assert read_topics(path).queries == topics.queries
    assert os.listdir(path.parent) == ["out.tsv"]  # no temporary file left behind


@pytest.mark.parametrize("queries", [{"1": "a\tb"}, {"1": "a\nb"}])
def test_write_topics_refuses_what_tsv_cannot_hold(tmp_path, queries):
    with pytest.raises(ValueError):
        write_topics(Topics(queries), tmp_path / "out.tsv")
    assert not (tmp_path / "out.tsv").exists()


@pytest.mark.parametrize("queries", [{"a b": "x"}, {"": "x"}, {"q\x1b": "x"}])
def test_topics_refuse_what_is_not_an_id(queries):
    """Ids with whitespace or control characters cannot even be made into Topics (the id rule, pipeline/data/ids.py)."""
    with pytest.raises(InputError, match=r"Topics \[qid\]"):
        Topics(queries)
