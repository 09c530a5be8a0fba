"""A BEIR folder as `--dataset DIR` (test split) or `DIR:SPLIT`, with no conversion: the split's judged queries,
title + text as contents, BEIR's qrels with their header (also as `--qrels` alone), through index, search, eval,
run, train and rerank; a malformed line or a missing split is exit 2 naming file, line and field."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pipeline.data.corpus import iter_docs
from pipeline.data.qrels import read_qrels
from pipeline.data.registry import get_dataset
from pipeline.data.runs import read_run
from pipeline.data.topics import read_topics
from pipeline.errors import ConfigError, InputError, MissingResourceError
from support import irpipe, write_collection

BEIR = Path(__file__).resolve().parent.parent / "fixtures" / "beir-tiny"


def test_a_beir_folder_is_its_test_split_and_dir_colon_split_another():
    test, dev = get_dataset(str(BEIR)), get_dataset(f"{BEIR}:dev")
    assert (test.name, dev.name) == ("beir-tiny:test", "beir-tiny:dev")
    assert test.info()["family"] == "beir" and set(test.provides) == {"topics", "qrels", "docs"}
    # as BEIR's loader keeps them: the queries the split judges, in queries.jsonl's order
    assert dict(test.topics().items()) == {"q1": "colour of the sky", "q3": "colliery", "q6": "night sky"}
    assert test.qrels() == {"q1": {"d1": 1}, "q3": {"d5": 1}, "q6": {"d4": 2, "d1": 0}}
    assert list(dev.topics()) == ["q2", "q4"] and list(get_dataset(f"{BEIR}:train").topics()) == ["q5", "q7", "q8"]
    docs = list(test.docs())
    assert docs[4] == {"id": "d5", "contents": "Welsh colliery a coal mine in wales", "title": "Welsh colliery"}
    assert docs[5] == {"id": "d6", "contents": "nothing to see here", "title": ""}  # no title: the text alone
    assert test.index_key == dev.index_key  # one corpus, indexed once for every split


def test_beir_files_read_on_their_own():
    """`--qrels qrels/test.tsv`, `--topics queries.jsonl`, `--corpus corpus.jsonl` given alone."""
    assert read_qrels(BEIR / "qrels" / "test.tsv") == get_dataset(str(BEIR)).qrels()
    assert len(read_topics(BEIR / "queries.jsonl")) == 8
    assert next(iter(iter_docs(BEIR / "corpus.jsonl")))["contents"] == "Sky the sky is blue on a clear day"


def test_a_missing_split_names_the_file_and_the_splits_there(capsys):
    with pytest.raises(MissingResourceError, match=r"qrels/validation\.tsv \(splits here: dev, test, train"):
        get_dataset(f"{BEIR}:validation")
    code, _, err = irpipe(capsys, "search", "--dataset", f"{BEIR}:validation", "--output", "x.trec")
    assert code == 2 and "BEIR split 'validation'" in err


@pytest.mark.parametrize("name, text, line, field, message", [
    ("corpus.jsonl", '{"_id": "d1", "title": "A", "text": "a"}\n{"_id": "d2", "title": "B"}\n', 2, "text",
     'missing "text"'),
    ("corpus.jsonl", '{"_id": "", "title": "A", "text": "a"}\n', 1, "_id", "empty document id"),
    ("corpus.jsonl", '{"_id": "d1", "title": 3, "text": "a"}\n', 1, "title", "not a string"),
    ("queries.jsonl", '{"_id": "q1", "text": "sky"}\n{"_id": "q3"}\n', 2, "text", 'missing "text"'),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq3\td5\n", 3, "columns",
     "expected 3 columns (query-id corpus-id score, as BEIR's header line says), found 2"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\tyes\n", 2, "score", "is not an integer"),
    ("qrels/test.tsv", "query-id\tcorpus-id\tscore\nq9\td1\t1\n", 2, "query-id", "judged but not in"),
])
def test_a_malformed_beir_line_is_exit_2_naming_file_line_and_field(tmp_path, cache, capsys, name, text, line,
                                                                    field, message):
    folder = tmp_path / "bad"
    shutil.copytree(BEIR, folder)
    (folder / name).write_text(text)
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        dataset = get_dataset(str(folder))
        dataset.topics(), dataset.qrels(), list(dataset.docs())
    assert (Path(caught.value.path).name, caught.value.line, caught.value.field) == (Path(name).name, line, field)
    command = ["index", "--dataset", folder] if name == "corpus.jsonl" else ["search", "--dataset", folder]
    code, _, err = irpipe(capsys, *command, "--output", tmp_path / "out")
    assert code == 2 and f"{folder / name}:{line} [{field}]: " in err and message in err


@pytest.mark.slow
def test_index_search_eval_and_run_take_the_folder_as_it_is(tmp_path, cache, capsys):
    index, run = tmp_path / "index", tmp_path / "bm25.trec"
    code, _, err = irpipe(capsys, "index", "--dataset", BEIR, "--output", index)
    assert code == 0, err
    code, _, err = irpipe(capsys, "search", "--dataset", BEIR, "--index", index, "--output", run, "--hits", "3")
    assert code == 0, err
    ranking = read_run(run).ranking
    assert list(ranking) == ["q1", "q3", "q6"]  # the test split's queries only
    assert ranking["q3"][0][0] == "d5"  # "colliery" is only in d5's title: the title is indexed with the text
    for data in (["--dataset", BEIR], ["--qrels", BEIR / "qrels" / "test.tsv"]):
        code, out, err = irpipe(capsys, "eval", run, *data, "-m", "nDCG@10", "RR")
        assert code == 0, err
        assert out.splitlines()[1].split()[1:] == ["3", "1.0000", "1.0000"]
    code, out, err = irpipe(capsys, "run", "bm25() % 10 >> overlap()", "--dataset", f"{BEIR}:dev", "--output",
                            tmp_path / "dev.trec", "--eval", "nDCG@10", "--results-dir", tmp_path / "results")
    assert code == 0, err
    assert "beir-tiny:dev" in out and "(2 queries)" in out
    assert list(read_run(tmp_path / "dev.trec").ranking) == ["q2", "q4"]
    assert len(list((cache / "indexes").iterdir())) == 1  # the test and dev splits share the corpus's index


@pytest.mark.slow
def test_train_and_rerank_on_beir_splits(tmp_path, cache, capsys):
    from support import save_tiny_bert

    bert, model = save_tiny_bert(tmp_path / "bert"), tmp_path / "monobert"
    code, out, err = irpipe(capsys, "train", "monobert", "--train", f"{BEIR}:train", "--dev", f"{BEIR}:dev",
                            "--negatives", "bm25", "--depth", "4", "--output", model, "--epochs", "1", "--threads", "1",
                            "--option", "warmup=0", "--set", f"bert={bert}", "--set", "max_length=32")
    assert code == 0, err
    log = [json.loads(line) for line in (model / "train.jsonl").read_text().splitlines()]
    assert len(log) == 1
    candidates = tmp_path / "cand.trec"
    candidates.write_text("q1 Q0 d4 1 3 x\nq1 Q0 d1 2 2 x\nq3 Q0 d3 1 2 x\nq3 Q0 d5 2 1 x\nq6 Q0 d4 1 1 x\n")
    code, out, err = irpipe(capsys, "rerank", "--model", model, "--run", candidates, "--dataset", BEIR,
                            "--output", tmp_path / "reranked.trec", "--threads", "1", "--eval", "ndcg_cut_10")
    assert code == 0, err
    assert out.splitlines()[0].split()[-1] == "nDCG@10"  # texts from the folder's corpus; trec_eval's name printed as ir-measures'
    reranked = read_run(tmp_path / "reranked.trec").ranking
    assert {q: sorted(d for d, _ in hits) for q, hits in reranked.items()} == \
        {"q1": ["d1", "d4"], "q3": ["d3", "d5"], "q6": ["d4"]}


def test_a_beir_folder_takes_a_name_and_keeps_its_splits(tmp_path, cache, capsys):
    code, _, err = irpipe(capsys, "datasets", "add", "tiny", BEIR)
    assert code == 0, err
    assert get_dataset("tiny").name == "tiny:test" and list(get_dataset("tiny:dev").topics()) == ["q2", "q4"]
    assert get_dataset("tiny:dev").files == get_dataset(f"{BEIR}:dev").files
    with pytest.raises(ConfigError, match="has no splits"):  # a dataset.yaml folder is one split already
        get_dataset(f"{write_collection(tmp_path / 'mine')}:dev")
