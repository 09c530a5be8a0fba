"""Run files: round trips, deterministic order, validation with file/line/field, atomic writes."""
from __future__ import annotations

import pytest

from pipeline.data.files import atomic_write
from pipeline.data.runs import Run, read_run, write_run
from pipeline.errors import ConfigError, InputError


def test_trec_round_trip_and_order(tmp_path):
    run = Run.from_scores({"q1": {"d2": 1.5, "d1": 1.5, "d3": 9.0}, "q2": {"x": 0.25}}, tag="mine")
    path = tmp_path / "run.trec"
    run.write(path)
    assert path.read_text().splitlines() == [
        "q1 Q0 d3 1 9.000000 mine",
        "q1 Q0 d1 2 1.500000 mine",  # ties: docid ascending
        "q1 Q0 d2 3 1.500000 mine",
        "q2 Q0 x 1 0.250000 mine",
    ]
    again = read_run(path)
    assert again.ranking == run.ranking and again.tag == "mine"


def test_msmarco_format_keeps_order(tmp_path):
    run = Run.from_scores({"7": {"a": 3.0, "b": 2.0, "c": 1.0}})
    path = tmp_path / "run.tsv"
    write_run(run, path, format="msmarco")
    assert path.read_text() == "7\ta\t1\n7\tb\t2\n7\tc\t3\n"
    assert [d for d, _ in read_run(path)["7"]] == ["a", "b", "c"]


def test_cut_keeps_texts_of_kept_hits():
    run = Run.from_scores({"q": {"a": 3, "b": 2, "c": 1}}, texts={"a": "A", "b": "B", "c": "C"},
                          doc_fields={"a": {"url": "x.org"}, "c": {"url": "y.org"}})
    cut = run.cut(2)
    assert [d for d, _ in cut["q"]] == ["a", "b"] and cut.texts == {"a": "A", "b": "B"}
    assert cut.doc_fields == {"a": {"url": "x.org"}}


def test_doc_fields_join_the_fingerprint_only_when_there_are_some():
    plain = Run.from_scores({"q": {"a": 1.0}}, texts={"a": "A"})
    assert plain.fingerprint() == Run({"q": [("a", 1.0)]}, {"a": "A"}, "other tag").fingerprint()
    with_url = Run.from_scores({"q": {"a": 1.0}}, texts={"a": "A"}, doc_fields={"a": {"url": "x.org"}})
    other_url = Run.from_scores({"q": {"a": 1.0}}, texts={"a": "A"}, doc_fields={"a": {"url": "y.org"}})
    assert len({plain.fingerprint(), with_url.fingerprint(), other_url.fingerprint()}) == 3


@pytest.mark.parametrize("content, line, field", [
    ("q1 Q0 d1 1 1.0 tag\nq1 Q0 d2 2 1.0\n", 2, "columns"),
    ("q1 Q0 d1 1 high tag\n", 1, "score"),
    ("q1 Q0 d1 1 nan tag\n", 1, "score"),
    ("q1 Q0 d1 one 1.0 tag\n", 1, "rank"),
    ("q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n", 2, "docid"),
    ("q1\td1\tfirst\n", 1, "rank"),
])
def test_malformed_runs_name_file_line_field(tmp_path, content, line, field):
    path = tmp_path / "bad.trec"
    path.write_text(content)
    with pytest.raises(InputError) as error:
        read_run(path)
    assert (error.value.line, error.value.field) == (line, field)
    assert f"{path}:{line}" in str(error.value)


def test_empty_run_file_is_an_error(tmp_path):
    path = tmp_path / "empty.trec"
    path.write_text("\n")
    with pytest.raises(InputError, match="empty"):
        read_run(path)


def test_interrupted_write_leaves_previous_file_intact(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("previous content\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(path) as out:
            out.write("q1 Q0 d1 1 1.0 t\n")
            raise KeyboardInterrupt
    assert path.read_text() == "previous content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.trec"]  # no temp file left behind


def test_failing_run_write_leaves_no_file(tmp_path):
    path = tmp_path / "new.trec"
    with pytest.raises(ConfigError, match="tag='has space'; expected one word"):
        Run.from_scores({"q": {"d": 1.0}}).write(path, tag="has space")
    assert not path.exists()


def test_written_run_gets_the_mode_a_plain_open_gives(tmp_path):
    """atomic_write's scratch file is mkstemp's 0600; the renamed output must be readable like any new file."""
    plain = tmp_path / "plain.txt"
    plain.write_text("x\n")
    path = tmp_path / "run.trec"
    Run.from_scores({"q": {"d": 1.0}}).write(path)
    assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
