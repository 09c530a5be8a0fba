"""Data of your own: files on the command line, dataset folders (dataset.yaml) by path or by name, the
answer-selection reader with candidate ids repeated across questions, and file:line[field] errors for bad files."""
from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.data.registry import get_dataset
from pipeline.data.sets.local import load_dataset_folder
from pipeline.errors import InputError, IrpipeError
from support import QRELS, irpipe, write_collection


def write_answer_selection(folder: Path, rows: list[tuple[str, str, int, str]]) -> Path:
    """rows of (question, answer, label, id.txt line)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, column in (("a.toks", 0), ("b.toks", 1), ("sim.txt", 2), ("id.txt", 3)):
        (folder / name).write_text("".join(f"{row[column]}\n" for row in rows))
    (folder / "dataset.yaml").write_text("kind: answer-selection\n")
    return folder


@pytest.mark.slow
def test_files_on_the_command_line_and_a_dataset_folder_give_the_same_run(tmp_path, cache, capsys, monkeypatch):
    data = write_collection(tmp_path / "data")
    spec = "bm25() % 10 >> overlap()"
    files = ["--topics", data / "topics.tsv", "--qrels", data / "qrels.txt", "--corpus", data / "docs.jsonl"]
    outputs = {}
    for how, args in {"files": files, "folder": ["--dataset", data], "named": ["--dataset", "mine"]}.items():
        if how == "named":
            code, out, err = irpipe(capsys, "datasets", "add", "mine", data)
            assert code == 0, err
        (tmp_path / how).mkdir()
        outputs[how] = tmp_path / how / "run.trec"
        code, out, err = irpipe(capsys, "run", spec, *args, "--output", outputs[how], "--eval", "AP,RR@10",
                                "--results-dir", tmp_path / "results")
        assert code == 0, err
        assert "(3 queries)" in out
    text = outputs["files"].read_text()
    assert text and text == outputs["folder"].read_text() == outputs["named"].read_text()
    assert text.splitlines()[0].split()[:3] == ["1", "Q0", "d1"]
    indexes = list((cache / "indexes").iterdir())
    assert len(indexes) == 1  # one index: keyed by the corpus checksum, not the name
    (tmp_path / "by-index").mkdir()
    code, out, err = irpipe(capsys, "run", spec, "--topics", data / "topics.tsv", "--qrels", data / "qrels.txt",
                            "--index", indexes[0], "--output", tmp_path / "by-index" / "run.trec", "--eval", "AP")
    assert code == 0, err
    assert (tmp_path / "by-index" / "run.trec").read_text() == text
    code, out, _ = irpipe(capsys, "datasets", "list")
    assert code == 0 and "mine" in out and "topics,qrels,docs" in out


def test_a_named_file_beside_a_dataset_replaces_that_part(tmp_path):
    data = write_collection(tmp_path / "data")
    (tmp_path / "two.tsv").write_text("2\tgrass\n")
    from argparse import Namespace

    from pipeline.commands.data_args import dataset_from_args

    args = Namespace(dataset=str(data), topics=str(tmp_path / "two.tsv"), qrels=None, corpus=None, index=None, run=None)
    dataset = dataset_from_args(args)
    # the dataset's qrels narrowed to the topics file's queries: the others would score 0 in every mean
    assert list(dataset.topics()) == ["2"] and set(dataset.qrels()) == {"2"}
    assert "docs" in dataset.provides and dataset.index_key == get_dataset(str(data)).index_key


def test_recipe_keys_follow_file_contents_not_folder_names(tmp_path):
    from pipeline.training.examples import dataset_fingerprint

    first = load_dataset_folder(write_collection(tmp_path / "a"))
    moved = load_dataset_folder(write_collection(tmp_path / "b"))
    assert dataset_fingerprint(first) == dataset_fingerprint(moved)  # same name (tiny-trec), same files
    (tmp_path / "b" / "qrels.txt").write_text(QRELS.replace("d5 1", "d5 0"))
    changed = load_dataset_folder(tmp_path / "b")
    assert dataset_fingerprint(changed) != dataset_fingerprint(first)


def test_candidate_ids_may_repeat_across_questions_with_the_same_text(tmp_path):
    folder = write_answer_selection(tmp_path / "qa", [
        ("who wrote hamlet", "shakespeare wrote hamlet", 1, "1 0 t7 1"),
        ("who wrote hamlet", "a tweet about cats", 0, "1 0 t9 0"),
        ("what is a tweet", "a tweet about cats", 1, "2 0 t9 1"),   # t9 again, under question 2, same text
    ])
    dataset = get_dataset(str(folder))
    assert dataset.qrels() == {"1": {"t7": 1, "t9": 0}, "2": {"t9": 1}}
    assert dataset.run().ranking["2"] == [("t9", -1.0)]
    assert [doc["id"] for doc in dataset.docs()] == ["t7", "t9"]  # one document per id


@pytest.mark.parametrize("rows, file, line, field, message", [
    ([("q", "one text", 1, "1 0 t9 1"), ("r", "another text", 0, "2 0 t9 0")], "b.toks", 2, "answer",
     "another text than on line 1"),
    ([("q", "a", 1, "1 0 t9 1"), ("q", "a", 0, "1 0 t9 0")], "id.txt", 2, "docid", "twice under question '1'"),
    ([("q", "a", 2, "1 0 t1 1")], "sim.txt", 1, "label", "not 0 or 1"),
    ([("q", "a", 1, "1"), ("r", "b", 1, "2"), ("q", "c", 0, "1")], "id.txt", 3, "qid", "not consecutive"),
])
def test_bad_answer_selection_files(tmp_path, rows, file, line, field, message):
    folder = write_answer_selection(tmp_path / "qa", rows)
    with pytest.raises(InputError) as error:
        get_dataset(str(folder)).run()
    assert (Path(error.value.path).name, error.value.line, error.value.field) == (file, line, field)
    assert message in str(error.value)


BAD_FOLDERS = [  # (files to write, file at fault, line, field, message)
    ({"dataset.yaml": "kind: tweets\n"}, "dataset.yaml", None, "kind", "is not one of"),
    ({"dataset.yaml": "nmae: x\n"}, "dataset.yaml", None, "nmae", "unknown key"),
    ({"dataset.yaml": "files: {topics: missing.tsv}\n"}, "dataset.yaml", None, "files.topics", "does not exist"),
    ({"dataset.yaml": "files: {qrels: q.txt}\n", "q.txt": "1 0 d 1\n"}, "dataset.yaml", None, "files.topics",
     "needs a topics file"),
    ({"dataset.yaml": "files: {topics: {path: t.tsv, format: xml}}\n", "t.tsv": "1\ta\n"}, "dataset.yaml", None,
     "files.topics.format", "not one of"),
    ({"dataset.yaml": "files: [\n"}, "dataset.yaml", 2, None, "invalid YAML"),
    ({"dataset.yaml": "kind: pairs\nfiles: {pairs: p.tsv}\n", "p.tsv": "1\ta\tb\n0\tonly two\n"}, "p.tsv", 2,
     "columns", "3 tab-separated columns"),
    ({"dataset.yaml": "kind: pairs\nfiles: {pairs: p.tsv}\n", "p.tsv": "yes\ta\tb\n"}, "p.tsv", 1, "label",
     "not 0 or 1"),
    ({"dataset.yaml": "files: {topics: t.tsv, qrels: q.txt}\n", "t.tsv": "1\ta\n", "q.txt": "1 0 d\n"}, "q.txt", 1,
     "columns", "expected 4 columns"),
    ({"dataset.yaml": "files: {topics: t.tsv}\n", "t.tsv": "1\ta\n1\tb\n"}, "t.tsv", 2, "qid", "appears twice"),
    ({"dataset.yaml": "run_texts: index\nfiles: {topics: t.tsv, run: r.trec, corpus: c.tsv}\n", "t.tsv": "1\ta\n",
      "r.trec": "1 Q0 d 1 1.0 x\n", "c.tsv": "d\ttext\n"}, "dataset.yaml", None, "run_texts", "the one value"),
    ({"dataset.yaml": "run_texts: corpus\nfiles: {topics: t.tsv, run: r.trec}\n", "t.tsv": "1\ta\n",
      "r.trec": "1 Q0 d 1 1.0 x\n"}, "dataset.yaml", None, "run_texts", "a run and a corpus file"),
]


@pytest.mark.parametrize("files, culprit, line, field, message", BAD_FOLDERS)
def test_bad_dataset_folders_name_file_line_and_field(tmp_path, files, culprit, line, field, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as error:
        dataset = get_dataset(str(tmp_path))
        dataset.topics(), dataset.qrels()
    assert (Path(error.value.path).name, error.value.line, error.value.field) == (culprit, line, field)
    assert message in str(error.value)


def test_bad_local_files_exit_2_with_file_and_line_and_no_traceback(tmp_path, capsys):
    (tmp_path / "t.tsv").write_text("1\tok\n2\n")
    (tmp_path / "q.txt").write_text("1 0 d1 1\n")
    code, out, err = irpipe(capsys, "run", "candidates()", "--topics", tmp_path / "t.tsv", "--qrels",
                            tmp_path / "q.txt", "--run", tmp_path / "q.txt")
    assert code == 2 and "Traceback" not in err
    assert f"{tmp_path / 't.tsv'}:2 [" in err
    code, _, err = irpipe(capsys, "run", "candidates()", "--topics", tmp_path / "none.tsv")
    assert code == 2 and "--topics" in err and "no such file" in err
    code, _, err = irpipe(capsys, "eval", tmp_path / "q.txt", "--dataset", tmp_path)
    assert code == 2 and "dataset.yaml" in err


def test_pairs_become_a_ranking_task(tmp_path):
    (tmp_path / "pairs.tsv").write_text("1\thow old is the sun\tabout 4.6 billion years\n"
                                        "0\thow old is the sun\tthe sun is a star\n"
                                        "1\twhat is bm25\ta ranking function\n")
    (tmp_path / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
    dataset = get_dataset(str(tmp_path))
    assert dataset.topics().queries == {"q1": "how old is the sun", "q2": "what is bm25"}
    assert dataset.qrels() == {"q1": {"q1-1": 1, "q1-2": 0}, "q2": {"q2-3": 1}}
    assert dataset.run().texts["q1-2"] == "the sun is a star"


def test_a_registered_name_cannot_be_taken(tmp_path, cache):
    from pipeline.data.registry import add_local

    with pytest.raises(IrpipeError, match="registered dataset name"):
        add_local("cacm", write_collection(tmp_path / "data"))


def test_prefixed_data_args_for_train_and_dev(tmp_path):
    import argparse

    from pipeline.commands.data_args import add_data_args, dataset_from_args

    data = write_collection(tmp_path / "data")
    parser = argparse.ArgumentParser()
    add_data_args(parser, prefix="train")
    add_data_args(parser, prefix="dev", parts=("topics", "qrels", "corpus"))
    args = parser.parse_args(["--train", str(data), "--dev-topics", str(data / "topics.tsv"),
                              "--dev-qrels", str(data / "qrels.txt"), "--dev-corpus", str(data / "docs.jsonl")])
    train, dev = dataset_from_args(args, prefix="train"), dataset_from_args(args, prefix="dev")
    assert train.name == "tiny-trec" and dev.name == "local:topics"
    assert dev.qrels() == train.qrels() and dev.index_key == train.index_key
    assert dataset_from_args(parser.parse_args([]), prefix="dev", required=False) is None
    with pytest.raises(IrpipeError, match=r"give --train NAME\|DIR"):
        dataset_from_args(parser.parse_args([]), prefix="train")
    with pytest.raises(IrpipeError, match="need --dev-topics"):
        dataset_from_args(parser.parse_args(["--dev-qrels", str(data / "qrels.txt")]), prefix="dev")


@pytest.mark.slow
def test_tune_and_eval_take_local_data(tmp_path, cache, capsys):
    data = write_collection(tmp_path / "data")
    code, out, err = irpipe(capsys, "tune", "bm25(k1={k1}) % 10", "--dataset", data, "--grid", "k1=0.9,1.2",
                            "--measure", "AP", "--output", tmp_path / "tune.json")
    assert code == 0, err
    assert out.splitlines()[-1].startswith("best AP ")
    code, out, err = irpipe(capsys, "run", "bm25() % 10", "--topics", data / "topics.tsv", "--corpus",
                            data / "docs.jsonl", "--qrels", data / "qrels.txt", "--output", tmp_path / "r.trec")
    assert code == 0, err
    by_folder = irpipe(capsys, "eval", tmp_path / "r.trec", "--dataset", data, "-m", "AP", "--format", "json")
    by_file = irpipe(capsys, "eval", tmp_path / "r.trec", "--qrels", data / "qrels.txt", "-m", "AP", "--format", "json")
    assert by_folder[0] == by_file[0] == 0 and by_folder[1] == by_file[1] and '"AP"' in by_file[1]


def test_run_texts_from_the_corpus(tmp_path):
    """`run_texts: corpus`: the run's candidates carry the corpus's texts (no index to read them from)."""
    (tmp_path / "t.tsv").write_text("1\twhat colour is the sky\n")
    (tmp_path / "r.trec").write_text("1 Q0 d2 1 2.0 x\n1 Q0 d1 2 1.0 x\n")
    (tmp_path / "c.tsv").write_text("d1\tthe sky is blue\nd2\tgrass is green\nd3\tnot a candidate\n")
    spec = "files: {topics: t.tsv, run: r.trec, corpus: c.tsv}\n"
    (tmp_path / "dataset.yaml").write_text(spec)
    assert get_dataset(str(tmp_path)).run().texts == {}
    (tmp_path / "dataset.yaml").write_text("run_texts: corpus\n" + spec)
    run = get_dataset(str(tmp_path)).run()
    assert run.ranking == {"1": [("d2", 2.0), ("d1", 1.0)]}
    assert run.texts == {"d1": "the sky is blue", "d2": "grass is green", "d3": "not a candidate"}
