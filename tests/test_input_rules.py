"""Issue 44 (part A): one id rule for every reader, exact field counts, qrels comments, measures checked before
evaluation. Each case of the issue is here, through the readers and the command line (docs/robustness.md,
"Bad input" and "What survives what"); the property-based fuzzing of the readers is tests/test_fuzz_readers.py.

The readers and commands are reached through their public names only, so the same tests run against an older
checkout (PYTHONPATH) to show what they caught there.
"""
from __future__ import annotations

import json

import pytest

from pipeline.errors import InputError
from support import irpipe

# characters an id may not hold: C0 and C1 controls, DEL, line and paragraph separators, invisible format characters
# (zero-width space, bidi override, byte order mark), a lone surrogate; each with its U+ code in the message
REFUSED = [("\x00", "U+0000 (NUL"), ("\x01", "U+0001 (SOH"), ("\x08", "U+0008 (BS"), ("\x1b", "U+001B (ESC"),
           ("\x7f", "U+007F (DEL"), ("\x85", "U+0085"), ("\u2028", "U+2028"), ("\u2029", "U+2029"),
           ("\u200b", "U+200B"), ("\u202e", "U+202E"), ("\ufeff", "U+FEFF"), ("\xa0", "U+00A0")]


def _read(kind: str, path):
    from pipeline.data.corpus import iter_docs
    from pipeline.data.qrels import read_qrels
    from pipeline.data.runs import read_run
    from pipeline.data.topics import read_topics

    return {"topics": read_topics, "qrels": read_qrels, "run": read_run, "corpus": lambda p: list(iter_docs(p))}[kind](path)


# (reader, file name, a good first line, a line whose id is {}, the line and field the error names)
FILES = [
    ("topics", "t.tsv", "q0\tfirst query", "{}\tsecond query", "qid"),
    ("topics", "t.jsonl", '{"qid": "q0", "query": "a"}', '{{"qid": {}, "query": "b"}}', "qid"),
    ("topics", "queries.jsonl", '{"_id": "q0", "text": "a"}', '{{"_id": {}, "text": "b"}}', "_id"),
    ("topics", "t.trec", "<top><num> q0 <title> a </top>", "<top><num> {} <title> b </top>", "num"),
    ("topics", "t.txt", "<DOC><DOCNO> q0 </DOCNO> a </DOC>", "<DOC><DOCNO> {} </DOCNO> b </DOC>", "DOCNO"),
    ("qrels", "q.txt", "q0 0 d0 1", "q1 0 {} 1", "docid"),
    ("qrels", "q.txt", "q0 0 d0 1", "{} 0 d0 1", "qid"),
    ("qrels", "test.tsv", "query-id\tcorpus-id\tscore", "q1\t{}\t1", "corpus-id"),
    ("run", "r.trec", "q0 Q0 d0 1 2.0 t", "q0 Q0 {} 2 1.0 t", "docid"),
    ("run", "r.trec", "q0 Q0 d0 1 2.0 t", "{} Q0 d1 1 1.0 t", "qid"),
    ("run", "r.trec", "q0 Q0 d0 1 2.0 t", "q1 Q0 d1 1 1.0 {}", "tag"),
    ("run", "r.tsv", "q0\td0\t1", "q0\t{}\t2", "docid"),
    ("corpus", "c.jsonl", '{"id": "d0", "contents": "a"}', '{{"id": {}, "contents": "b"}}', "id"),
    ("corpus", "corpus.jsonl", '{"_id": "d0", "text": "a"}', '{{"_id": {}, "text": "b"}}', "_id"),
    ("corpus", "c.tsv", "d0\ta", "{}\tb", "id"),
    ("corpus", "c.trec", "<DOC><DOCNO>d0</DOCNO> a </DOC>", "<DOC><DOCNO>{}</DOCNO> b </DOC>", "DOCNO"),
]


@pytest.mark.parametrize("char, code", REFUSED, ids=[code for _, code in REFUSED])
@pytest.mark.parametrize("kind, name, good, bad, field", FILES, ids=[f"{f[1]}-{f[4]}" for f in FILES])
def test_every_reader_refuses_an_id_that_is_not_printable(tmp_path, kind, name, good, bad, field, char, code):
    """The issue's NUL, SOH, ESC, DEL and backspace, and the other characters of the rule, in every id of every
    format: exit 2's InputError naming the file, line 2 and the field -- the character by its code point."""
    ident = f"x{char}y"
    text = bad.format(json.dumps(ident) if name.endswith(".jsonl") else ident)
    (tmp_path / name).write_text(f"{good}\n{text}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        _read(kind, tmp_path / name)
    error = caught.value
    assert (error.line, error.field) == (2, field), str(error)
    assert code in str(error) and repr(ident) in str(error)
    assert str(error).isprintable()  # the message shows the id escaped: no control character reaches the terminal


def test_an_accepted_id_is_any_printable_text_without_spaces(tmp_path):
    """Letters of any script, digits, punctuation, emoji: ids as they are (MS MARCO's, CORD-19's, Chinese ones)."""
    from pipeline.data.runs import read_run

    ids = ["CACM-1938", "msmarco_passage_00_0", "中文#3", "é/ü:42", "😀", "a\"'`<>&", "#not-a-comment"]
    (tmp_path / "r.trec").write_text("".join(f"q Q0 {d} {i + 1} {10 - i} t\n" for i, d in enumerate(ids)))
    assert [d for d, _ in read_run(tmp_path / "r.trec")["q"]] == ids


def test_a_lone_surrogate_in_a_json_line_is_refused(tmp_path):
    """`\\ud800` alone is no character: nothing holding it can be written as UTF-8 (a run file, an index record)."""
    from pipeline.data.corpus import iter_docs

    (tmp_path / "c.jsonl").write_text('{"id": "d0", "contents": "ok \\ud83d\\ude00"}\n'
                                      '{"id": "d1", "contents": "half \\ud800 a pair"}\n')
    with pytest.raises(InputError, match=r"c.jsonl:2: holds a lone surrogate U\+D800"):
        list(iter_docs(tmp_path / "c.jsonl"))


# -- the issue's command lines ------------------------------------------------------------------------------------

def _eval_refused(tmp_path, capsys, qrels: str, run: str, measure: str) -> str:
    """`irpipe eval run.trec --qrels qrels.txt -m MEASURE` of these files: exit 2, no output, no traceback; stderr."""
    (tmp_path / "qrels.txt").write_text(qrels)
    (tmp_path / "run.trec").write_text(run)
    code, out, err = irpipe(capsys, "eval", tmp_path / "run.trec", "--qrels", tmp_path / "qrels.txt", "-m", measure)
    assert code == 2 and out == "" and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("qrels, run, measure, message", [
    # was: "queries: 2" beside three per-query rows, P@10 0.0333 where 0.05 is right (`q1` and `q1<ESC>` were two
    # queries in pytrec_eval, the ESC one unjudged)
    ("q1 0 d1 1\nq2 0 d2 1\n", "q1 Q0 d1 1 3.0 t\nq1\x1b Q0 d2 1 2.0 t\nq2 Q0 d3 1 1.0 t\n", "P@10",
     ":2 [qid]: query id 'q1\\x1b' contains U+001B (ESC, a control character)"),
    # was: `CACM-1938\0` and `CACM-1938` for one query passed the duplicate check, trec_eval's C code read both as
    # `CACM-1938` (AP 0.0000, clean 0.1467) and printed a stray line on stderr
    ("q1 0 CACM-1938 1\nq1 0 CACM-0001 1\n", "q1 Q0 CACM-1938\x00 1 3.0 t\nq1 Q0 CACM-1938 2 2.0 t\n", "AP",
     ":1 [docid]: document id 'CACM-1938\\x00' contains U+0000 (NUL"),
], ids=["query id with ESC", "docid with NUL"])
def test_eval_refuses_an_id_with_a_control_character(tmp_path, capsys, qrels, run, measure, message):
    assert f"{tmp_path / 'run.trec'}{message}" in _eval_refused(tmp_path, capsys, qrels, run, measure)


def test_index_refuses_a_corpus_id_with_a_nul(tmp_path, capsys):
    """Was: indexed, then `search` ended in a traceback (`non-hexadecimal number found in fromhex()`)."""
    (tmp_path / "docs.jsonl").write_text('{"id": "d1", "contents": "one"}\n{"id": "d2\\u0000", "contents": "two"}\n')
    code, out, err = irpipe(capsys, "index", "--input", tmp_path / "docs.jsonl", "--output", tmp_path / "idx")
    assert code == 2 and "Traceback" not in err, err
    assert f"{tmp_path / 'docs.jsonl'}:2 [id]: document id 'd2\\x00' contains U+0000 (NUL" in err
    assert not (tmp_path / "idx").exists()


def test_python_runs_topics_and_qrels_follow_the_same_rule(tmp_path):
    """A Run or Topics built in Python, and qrels or a run handed to evaluation as mappings, by the same rule."""
    from pipeline.data.runs import Run
    from pipeline.data.topics import Topics

    with pytest.raises(InputError, match=r"Run \[docid\]: document id 'd\\x00' contains U\+0000"):
        Run({"q1": [("d\x00", 1.0)]})
    with pytest.raises(InputError, match=r"Run \[qid\]: query id 'q\\x7f' contains U\+007F \(DEL"):
        Run.from_scores({"q\x7f": {"d": 1.0}})
    with pytest.raises(InputError, match=r"Topics \[qid\]: query id 'q\\x08' contains U\+0008 \(BS"):
        Topics({"q\x08": "text"})
    from pipeline.evaluation import evaluate

    with pytest.raises(InputError, match=r"qrels \[docid\]: document id 'd\\x1b' contains U\+001B .* \(query 'q'\)"):
        evaluate({"q": {"d": 1.0}}, {"q": {"d\x1b": 1}}, ["AP"])
    with pytest.raises(InputError, match=r"run \[qid\]: query id 'q\\x00'"):
        evaluate({"q\x00": {"d": 1.0}, "q": {"d": 1.0}}, {"q": {"d": 1}}, ["AP"])


# -- exact field counts -------------------------------------------------------------------------------------------

def test_a_topics_line_with_a_third_field_is_refused(tmp_path):
    """Was: `q1<TAB>query<TAB>extra` searched as the query "query extra" (`search` and `run`, exit 0); Anserini's
    TSV topic reader takes the second field alone."""
    from pipeline.data.topics import read_topics

    (tmp_path / "t.tsv").write_text("q0\tfine\nq1\tquery\textra\n")
    with pytest.raises(InputError) as caught:
        read_topics(tmp_path / "t.tsv")
    assert str(caught.value) == (f"{tmp_path / 't.tsv'}:2 [columns]: expected 2 tab-separated fields (qid, query), "
                                 "found 3 fields")


@pytest.mark.parametrize("name, text, line, field, words", [
    ("run.trec", "q1 Q0 d1 1 1.0 t extra\n", 1, "columns", "(qid Q0 docid rank score tag)"),
    ("run.trec", "q1 Q0 d1 1 1.0\n", 1, "columns", "(qid Q0 docid rank score tag)"),
    ("run.tsv", "q1\td1\t1\n", None, None, None),
    ("qrels.txt", "q1 0 d1 1 extra\n", 1, "columns", "4 columns (qid iter docid relevance"),
    ("test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\n", 2, "columns", "3 columns (query-id corpus-id score"),
])
def test_runs_and_qrels_have_exactly_their_columns(tmp_path, name, text, line, field, words):
    """A TREC run has 6 columns, an MS MARCO run 3, TREC qrels 4, BEIR qrels 3 (after their header). trec_eval
    ignores what follows a run's tag; irpipe refuses it: a seventh field is most often a docid or tag with a space,
    which trec_eval reads shifted, silently."""
    kind = "run" if name.startswith("run") else "qrels"
    (tmp_path / name).write_text(text)
    if line is None:
        assert _read(kind, tmp_path / name)
        return
    with pytest.raises(InputError) as caught:
        _read(kind, tmp_path / name)
    assert (caught.value.line, caught.value.field) == (line, field) and words in str(caught.value)


def test_extra_fields_that_real_formats_have_are_kept(tmp_path):
    """What real formats carry beyond their fields is read, not refused: BEIR's metadata and any other JSON key
    (a field of the query or document), TREC topics' <desc> and <narr>, a TSV corpus's later tabs (MS MARCO's
    msmarco-docs.tsv: id, url, title, body, all of it the text)."""
    from pipeline.data.corpus import iter_docs
    from pipeline.data.topics import read_topics

    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x", "metadata": {"url": "u"}}\n')
    assert list(iter_docs(tmp_path / "corpus.jsonl")) == [{"id": "d1", "contents": "T x", "title": "T",
                                                          "metadata": {"url": "u"}}]
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "a", "metadata": {"kind": "k"}}\n')
    assert read_topics(tmp_path / "queries.jsonl").extra == {"q1": {"metadata": {"kind": "k"}}}
    (tmp_path / "docs.tsv").write_text("D1\thttp://u\tTitle\tBody\n")
    assert list(iter_docs(tmp_path / "docs.tsv")) == [{"id": "D1", "contents": "http://u\tTitle\tBody"}]


def test_an_answer_selection_id_line_has_one_field_or_four(tmp_path):
    from pipeline.data.sets.local import load_dataset_folder

    for name, text in (("a.toks", "q\n"), ("b.toks", "a\n"), ("sim.txt", "1\n"), ("id.txt", "1 0 t9\n")):
        (tmp_path / name).write_text(text)
    (tmp_path / "dataset.yaml").write_text("kind: answer-selection\n")
    with pytest.raises(InputError) as caught:
        load_dataset_folder(tmp_path).topics()
    assert "id.txt:1 [columns]: expected 1 field (qid: WikiQA, TrecQA train) or 4" in str(caught.value)


# -- qrels comments, as trec_eval 10.0 --------------------------------------------------------------------------

@pytest.mark.parametrize("comment", ["# 0 D01 1", "# judged by assessors", "#", "#q1 0 d2 1"])
def test_a_qrels_line_starting_with_hash_is_a_comment(tmp_path, comment):
    """Was: `# 0 D01 1` a judged query "#" (as trec_eval 9.0.8 reads it), `# judged by assessors` refused as
    "relevance 'assessors' is not an integer". trec_eval 10.0 skips a line whose first character is `#`."""
    from pipeline.data.qrels import read_qrels

    (tmp_path / "q.txt").write_text(f"{comment}\nq1 0 d1 1\n{comment}\nq2 0 d2 0\n")
    assert read_qrels(tmp_path / "q.txt") == {"q1": {"d1": 1}, "q2": {"d2": 0}}
    (tmp_path / "beir.tsv").write_text(f"{comment}\nquery-id\tcorpus-id\tscore\n{comment}\nq1\td1\t2\n")
    assert read_qrels(tmp_path / "beir.tsv") == {"q1": {"d1": 2}}


def test_a_run_line_starting_with_hash_is_a_comment(tmp_path):
    """trec_eval 10.0 skips it in runs too (after blanks); 9.0.8 reads a query "#"."""
    from pipeline.data.runs import read_run

    (tmp_path / "r.trec").write_text("# made by hand\nq1 Q0 d1 1 2.0 t\n  # Q0 d2 2 1.0 t\n")
    assert read_run(tmp_path / "r.trec").ranking == {"q1": [("d1", 2.0)]}


def test_numbers_are_what_python_and_trec_eval_both_read(tmp_path):
    """`1_0` is 10 to Python, 1 to trec_eval's atof/atoi; `١` (Arabic-Indic one) 1 to Python, 0 to C: refused."""
    from pipeline.data.qrels import read_qrels
    from pipeline.data.runs import read_run

    for line, field in (("q1 Q0 d1 1 1_0 t", "score"), ("q1 Q0 d1 1 \u0661 t", "score"), ("q1 Q0 d1 1_0 1 t", "rank")):
        (tmp_path / "r.trec").write_text(line + "\n")
        with pytest.raises(InputError) as caught:
            read_run(tmp_path / "r.trec")
        assert caught.value.field == field, caught.value
    for relevance in ("1_0", "\u0661", "9" * 19):
        (tmp_path / "q.txt").write_text(f"q1 0 d1 {relevance}\n")
        with pytest.raises(InputError, match=r"q.txt:1 \[relevance\]"):
            read_qrels(tmp_path / "q.txt")
    (tmp_path / "r.trec").write_text("q1 Q0 d1 1 -1.5e-3 t\nq1 Q0 d2 +2 .5 t\n")
    assert read_run(tmp_path / "r.trec")["q1"] == [("d2", 0.5), ("d1", -0.0015)]


# -- measures checked before evaluation --------------------------------------------------------------------------

@pytest.mark.parametrize("measure, words", [
    ("P@0", "cutoff 0"), ("nDCG@0", "cutoff 0"), ("ndcg_cut.0", "cutoff 0"), ("RR@0", "cutoff 0"),
    ("AP(rel=0)", "relevance level 0"), ("success.0", "cutoff 0"), ("Judged@0", "cutoff 0"),
    ("NumRet(rel=0)", "relevance level 0"), ("P@9223372036854775807", "cutoff 9223372036854775807"),
    ("AP(rel=2147483648)", "relevance level 2147483648"),
])
def test_a_measure_with_a_zero_cutoff_or_level_is_refused(tmp_path, capsys, measure, words):
    """Was: P@0, nDCG@0, ndcg_cut.0 aborted inside the evaluator's C code (exit 134), AP(rel=0) a TypeError
    traceback, RR@0 printed 0.0000."""
    err = _eval_refused(tmp_path, capsys, "q1 0 d1 1\n", "q1 Q0 d1 1 1.0 t\n", measure)
    assert f"measure {measure!r}" in err and words in err, err


# -- what the fuzzing found (tests/test_fuzz_readers.py, eval/benchmarks/fuzz-readers.json) ------------------------

def test_err_on_query_ids_that_are_not_numbers_is_refused(tmp_path, capsys):
    """ERR's one ir-measures provider, gdeval.pl, reads numeric query ids only: it was a CalledProcessError
    traceback (and perl's "format error" on stderr)."""
    err = _eval_refused(tmp_path, capsys, "q1 0 d1 1\n", "q1 Q0 d1 1 1.0 t\n", "ERR@10")
    assert "measure ERR@10: its one ir-measures provider (gdeval.pl) reads numeric query ids only" in err


@pytest.mark.parametrize("name, text, words", [
    ("x.yaml", "dataset: tiny\npipeline: bm25()\nmeasures: [A\x1fP]\n", "x.yaml:3: invalid YAML: U+001F is a character"),
    ("spec", "bm25()\x00 >> overlap()", "unexpected character '\\x00'\n  bm25()\\x00 >> overlap()\n        ^"),
    ("dataset.yaml", "name: x\nfiles:\n  topics\x1b: t.tsv\n", "dataset.yaml:3: invalid YAML: U+001B"),
])
def test_a_message_never_carries_a_control_character(tmp_path, name, text, words):
    """A message quoting the input escapes what is not printable (PyYAML's own message had the raw character and a
    second line; a spec's caret line echoed the NUL); the caret stays under the character at fault."""
    from pipeline.errors import IrpipeError
    from pipeline.experiment import Experiment
    from pipeline.data.sets.local import load_dataset_folder
    from pipeline.spec import parse

    with pytest.raises(IrpipeError) as caught:
        if name == "spec":
            parse(text)
        else:
            (tmp_path / name).write_text(text)
            Experiment.load(tmp_path / name) if name == "x.yaml" else load_dataset_folder(tmp_path)
    message = str(caught.value)
    assert words in message and all(line.isprintable() for line in message.split("\n")), message


def test_a_store_never_holds_an_id_that_is_not_printable(tmp_path):
    """A store's id list (shard-N.ids, docid<TAB>offset<TAB>rows) is written and read by the same rule."""
    import numpy as np

    from pipeline.errors import ConfigError
    from pipeline.rerank import store

    manifest = {"format": 2, "model": "m", "model_digest": "x", "dtype": "fp16", "dims": None, "row_bytes": None,
                "count": 0, "rows": 0, "shards": []}
    with pytest.raises(ConfigError, match=r"document id 'b\\x1b' contains U\+001B \(ESC.*cannot be stored"):
        store.save_shard(tmp_path, manifest, "shard-00000", ["a", "b\x1b"], np.zeros((2, 4), np.float32), [1, 1])
    assert not list(tmp_path.glob("shard-*"))


@pytest.mark.parametrize("name, text, line, field", [
    ("qrels.txt", "q1 0\x1f4 d1 1\n", 1, "iter"),             # C reads 4 fields, Python's split 5
    ("run.trec", "q1 Q\x1c0 d1 1 1.0 t\n", 1, "Q0"),
    ("test.tsv", "query-\x1fid\tcorpus-id\tscore\nq1\td1\t1\n", 1, "columns"),  # no header: a line of 3 columns
])
def test_every_field_of_a_line_is_printable(tmp_path, name, text, line, field):
    """Found by fuzzing: a control character in a column irpipe does not keep (iter, Q0, a BEIR header) made a line
    C and Python split differently (Python also splits at U+001C-U+001F); now such a line is refused."""
    kind = "run" if name.startswith("run") else "qrels"
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as caught:
        _read(kind, tmp_path / name)
    assert (caught.value.line, caught.value.field) == (line, field), str(caught.value)


@pytest.mark.parametrize("spec, field", [
    ("files: [topics.tsv]\n", "files"),          # found by fuzzing: TypeError: 'list' object is not a mapping
    ("files: {topics: t.tsv}\nname: [a]\n", "name"),
    ("files: {topics: t.tsv}\nrel_level: 0\n", "rel_level"),
])
def test_a_dataset_yaml_value_of_the_wrong_kind_is_refused(tmp_path, spec, field):
    from pipeline.data.sets.local import load_dataset_folder

    (tmp_path / "t.tsv").write_text("q1\tquery\n")
    (tmp_path / "dataset.yaml").write_text(spec)
    with pytest.raises(InputError) as caught:
        load_dataset_folder(tmp_path)
    assert caught.value.field == field and "dataset.yaml" in str(caught.value), caught.value


def test_experiment_files_found_by_fuzzing(tmp_path):
    """`tolerance: null` was float(None), a TypeError traceback: `null` is the default, as elsewhere; a YAML escape
    naming no character (`"\\U30005266"`) or a date that is none (2024-13-45) was PyYAML's ValueError traceback;
    `fusion(bm)`, a word where a pipeline goes, an AttributeError traceback."""
    from pipeline.errors import IrpipeError
    from pipeline.experiment import Experiment

    base = "dataset: tiny\nmeasures: [AP]\n"
    (tmp_path / "x.yaml").write_text(base + "pipeline: bm25()\ntolerance: null\noutput_format: null\n")
    assert Experiment.load(tmp_path / "x.yaml").tolerance == 1e-4
    for extra, words in (('description: "\\U30005266"\n', "invalid YAML: a value it cannot read"),
                         ("description: 2024-13-45\n", "invalid YAML: a value it cannot read"),
                         ("pipeline: fusion(bm), bm25(rm3=true)\n", "fusion: 'bm' is not a pipeline")):
        (tmp_path / "x.yaml").write_text(base + extra + ("pipeline: bm25()\n" if "pipeline" not in extra else ""))
        with pytest.raises(IrpipeError) as caught:
            Experiment.load(tmp_path / "x.yaml")
        assert words in str(caught.value) and "x.yaml" in str(caught.value), caught.value
