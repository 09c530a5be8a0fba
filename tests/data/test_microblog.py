"""TREC Microblog (HCAN's tweet search): QL candidates with their scores, the authors' split, bad input."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipeline.data.sets.base import DataFile
from pipeline.data.sets.microblog import COLUMNS, MicroblogDataset
from pipeline.errors import InputError
from support import needs_shared_data

GOOD = {"queries": ["water shortages", "water shortages", "tony mendez"],
        "tweets": ["water has become a theme", "water shortage @url", "water has become a theme"],
        "labels": ["1", "0", "1"], "urls": ["", "http://x.org/a", ""],
        "ids": ["111 Q0 5 1 9.5 lucene4lm", "111 Q0 7 2 9.5 lucene4lm", "170 Q0 5 1 3.25 lucene4lm"]}


def local(tmp_path: Path, monkeypatch, columns: dict, **spec) -> MicroblogDataset:
    """A one-year dataset over files written to a private mirror (checksums of what was written)."""
    monkeypatch.setenv("IRPIPE_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    files = {}
    for key in COLUMNS:
        data = ("\n".join(columns[key]) + "\n").encode()
        rel = f"mb/{key}.txt"
        (tmp_path / "mirror" / "mb").mkdir(parents=True, exist_ok=True)
        (tmp_path / "mirror" / rel).write_bytes(data)
        files[f"y/{key}"] = (DataFile(rel, "x/y", "0" * 40, rel, hashlib.sha256(data).hexdigest(), len(data)), None)
    return MicroblogDataset("mb", {"years": ["y"], **spec}, files)


def test_run_keeps_ql_scores_and_a_tweet_of_two_queries(tmp_path, monkeypatch):
    dataset = local(tmp_path, monkeypatch, GOOD)
    run = dataset.run()
    assert run.ranking == {"111": [("5", 9.5), ("7", 9.5)], "170": [("5", 3.25)]}  # ties: tweet id ascending
    assert dataset.qrels() == {"111": {"5": 1, "7": 0}, "170": {"5": 1}}
    assert [doc["url"] for doc in dataset.docs()] == ["", "http://x.org/a"]
    assert run.doc_fields == {"5": {"url": ""}, "7": {"url": "http://x.org/a"}}


def test_tweet_urls_reach_training_and_dev_pairs(tmp_path, monkeypatch):
    from pipeline.training.examples import DevSet, examples_from

    dataset = local(tmp_path, monkeypatch, GOOD)
    examples = examples_from(dataset)
    assert {(p.qid, p.docid, p.doc_fields["url"]) for p in examples.pointwise()} == {
        ("111", "5", ""), ("111", "7", "http://x.org/a"), ("170", "5", "")}
    assert examples.doc_fields == {"5": {"url": ""}, "7": {"url": "http://x.org/a"}}
    dev = DevSet.of(dataset)
    assert dev.run.doc_fields == examples.doc_fields


def test_holdout_splits_queries_by_number(tmp_path, monkeypatch):
    assert list(local(tmp_path, monkeypatch, GOOD, holdout="only", holdout_every=10).topics()) == ["170"]
    assert list(local(tmp_path, monkeypatch, GOOD, holdout="exclude", holdout_every=10).topics()) == ["111"]


@pytest.mark.parametrize("key, line, value, words", [
    ("labels", 2, "2", "label '2' is not 0 or 1"),
    ("ids", 3, "170 Q0 5 1 high lucene4lm", "score 'high' is not a number"),
    ("ids", 1, "111 5 1 9.5", "expected `qid Q0 tweetid rank score tag`"),
    ("tweets", 3, "another text", "tweet '5' has two different texts"),
    ("queries", 2, "water", "changes text"),
])
def test_bad_lines_name_file_and_line(tmp_path, monkeypatch, key, line, value, words):
    columns = {k: list(v) for k, v in GOOD.items()}
    columns[key][line - 1] = value
    with pytest.raises(InputError, match=words) as error:
        local(tmp_path, monkeypatch, columns).run()
    assert error.value.line == line and str(error.value.path).endswith(f"{key}.txt")


def test_unequal_line_counts_are_an_error(tmp_path, monkeypatch):
    columns = {k: list(v) for k, v in GOOD.items()} | {"urls": ["", ""]}
    with pytest.raises(InputError, match="should all be equal"):
        local(tmp_path, monkeypatch, columns).run()


@pytest.mark.slow
@needs_shared_data
def test_authors_split_and_ql_matches_the_paper(shared_data):
    from pipeline.data.registry import get_dataset
    from pipeline.evaluation import evaluate

    for test_year, others in (("2013", ("2011", "2012", "2014")), ("2014", ("2011", "2012", "2013"))):
        train, dev = (set(get_dataset(f"microblog/{s}-{test_year}").topics()) for s in ("train", "dev"))
        years = set().union(*(get_dataset(f"microblog/{y}").topics() for y in others))
        assert not train & dev and train | dev == years and not years & set(get_dataset(f"microblog/{test_year}").topics())
        assert all(int(q) % 7 == 0 for q in dev)
    for year, p30 in (("2013", 0.4450), ("2014", 0.6182)):  # HCAN paper, Table 3, QL
        dataset = get_dataset(f"microblog/{year}")
        assert evaluate(dataset.run(), dataset.qrels(), ["P@30"])["P@30"] == pytest.approx(p30, abs=1e-4)
