"""The MS MARCO passage files as `--dataset DIR` (dev.small) or `DIR:SPLIT`: queries, TREC qrels, collection.tsv
and the top1000 candidates with their texts (a reranker needs no index); bad lines are exit 2 with file:line."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline.data.registry import get_dataset
from pipeline.data.runs import read_run
from pipeline.errors import InputError, MissingResourceError
from support import irpipe

MSMARCO = Path(__file__).resolve().parent.parent / "fixtures" / "msmarco-passage-tiny"


def test_the_folder_is_dev_small_and_dir_colon_split_another():
    small = get_dataset(str(MSMARCO))
    assert small.name == "msmarco-passage-tiny:dev.small" and small.info()["family"] == "msmarco-passage-folder"
    assert set(small.provides) == {"topics", "qrels", "docs", "run"}
    assert dict(small.topics().items()) == {"2001": "colour of the sky", "2002": "coal mine wales"}
    assert small.qrels() == {"2001": {"0": 1}, "2002": {"4": 1}}
    run = small.run()  # top1000.dev.tsv: no scores, so file order is the ranking; the passages come along
    assert run.ranking == {"2001": [("3", -1.0), ("0", -2.0), ("5", -3.0)], "2002": [("2", -1.0), ("4", -2.0)]}
    assert run.texts["4"] == "a coal mine in wales" and len(run.texts) == 5
    dev = get_dataset(f"{MSMARCO}:dev")
    assert list(dev.topics()) == ["2001", "2002", "2003"] and set(dev.run().ranking) == {"2001", "2002"}
    evaluation = get_dataset(f"{MSMARCO}:eval")  # eval's qrels are hidden: topics and candidates only
    assert set(evaluation.provides) == {"topics", "docs", "run"} and list(evaluation.run().ranking) == ["3001", "3002"]
    train = get_dataset(f"{MSMARCO}:train")
    assert set(train.provides) == {"topics", "qrels", "docs"} and train.run() is None
    assert next(iter(train.docs())) == {"id": "0", "contents": "the sky is blue on a clear day"}
    assert train.index_key == small.index_key  # one collection, one index


def test_a_missing_split_names_the_file_and_the_splits_there(capsys):
    with pytest.raises(MissingResourceError, match=r"queries\.test\.tsv \(splits here: dev, dev\.small, eval, train"):
        get_dataset(f"{MSMARCO}:test")
    code, _, err = irpipe(capsys, "eval", "x.trec", "--dataset", f"{MSMARCO}:test")
    assert code == 2 and "MS MARCO split 'test'" in err


@pytest.mark.parametrize("name, text, line, field", [
    ("top1000.dev.tsv", "2001\t3\tcolour of the sky\tthe sky at night is dark\n2001\t0\tcolour of the sky\n", 2,
     "columns"),
    ("top1000.dev.tsv", "2001\t3\tq\tp\n2002\t4\tq\tp\n2001\t3\tq\tp\n", 3, "pid"),
    ("qrels.dev.small.tsv", "2001\t0\t0\t1\n2002\t0\t4\n", 2, "columns"),
    ("queries.dev.small.tsv", "2001\tcolour of the sky\n2002 coal mine wales\n", 2, "columns"),
])
def test_a_malformed_line_is_exit_2_naming_file_line_and_field(tmp_path, cache, capsys, name, text, line, field):
    folder = tmp_path / "bad"
    shutil.copytree(MSMARCO, folder)
    (folder / name).write_text(text)
    with pytest.raises(InputError) as caught:
        dataset = get_dataset(str(folder))
        dataset.topics(), dataset.qrels(), dataset.run()
    assert (Path(caught.value.path).name, caught.value.line, caught.value.field) == (name, line, field)
    code, _, err = irpipe(capsys, "run", "overlap()", "--dataset", folder, "--output", tmp_path / "x.trec",
                          "--results-dir", tmp_path / "results")
    assert code == 2 and f"{folder / name}:{line} [{field}]: " in err


def test_search_eval_train_and_rerank_on_the_folder(tmp_path, cache, capsys):
    from support import save_tiny_bert

    run = tmp_path / "bm25.trec"
    code, _, err = irpipe(capsys, "search", "--dataset", MSMARCO, "--output", run, "--hits", "10")
    assert code == 0, err
    assert read_run(run).ranking["2002"][0][0] == "4"  # collection.tsv indexed on first use
    code, out, err = irpipe(capsys, "eval", run, "--dataset", MSMARCO, "-m", "recip_rank", "RR@10")
    assert code == 0, err
    assert out.splitlines()[1].split()[1:] == ["2", "0.7500", "0.7500"]
    bert, model = save_tiny_bert(tmp_path / "bert"), tmp_path / "monobert"
    code, _, err = irpipe(capsys, "train", "monobert", "--train", f"{MSMARCO}:train", "--dev", MSMARCO,
                          "--negatives", "bm25", "--depth", "4", "--output", model, "--epochs", "1", "--threads", "1",
                          "--option", "warmup=0", "--set", f"bert={bert}", "--set", "max_length=32")
    assert code == 0, err
    shutil.rmtree(cache / "indexes")  # the top1000 candidates carry their passages: reranking needs no index
    code, out, err = irpipe(capsys, "rerank", "--model", model, "--dataset", MSMARCO, "--output",
                            tmp_path / "reranked.trec", "--threads", "1", "--eval", "recip_rank")
    assert code == 0, err
    assert out.splitlines()[0].split()[-1] == "RR" and not (cache / "indexes").exists()  # irpipe eval's table
    reranked = read_run(tmp_path / "reranked.trec").ranking
    assert {q: sorted(d for d, _ in hits) for q, hits in reranked.items()} == {"2001": ["0", "3", "5"],
                                                                              "2002": ["2", "4"]}
