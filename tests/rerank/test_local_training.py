"""Training on data of your own: HCAN on an answer-selection folder whose candidate ids repeat across questions
(`irpipe train hcan --train DIR --dev DIR`, and `hcan(train=DIR)` in a spec), monoBERT on a labelled-pairs TSV."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import cli

COLOURS = [("sky", "blue"), ("grass", "green"), ("snow", "white"), ("coal", "black"), ("blood", "red"),
           ("sun", "yellow"), ("violet", "purple"), ("sea", "blue")]
DISTRACTORS = ["the train left the station late", "a cat sleeps on the warm mat", "numbers can be added",
               "rivers flow to the sea"]
TINY_HCAN = ["--set", "embeddings=random", "--set", "embedding_dim=8", "--set", "filters=8",
             "--set", "max_query_length=12", "--set", "max_doc_length=16"]


def answer_selection_folder(folder: Path, facts: list[tuple[str, str]], prefix: str) -> Path:
    """One correct answer per question, then the same four distractors under every question (ids f0..f3)."""
    rows = []
    for i, (thing, colour) in enumerate(facts):
        question = f"what colour is the {thing}"
        rows.append((question, f"the {thing} is {colour}", 1, f"{prefix}{i} 0 a{prefix}{i} 1"))
        rows += [(question, text, 0, f"{prefix}{i} 0 f{j} 0") for j, text in enumerate(DISTRACTORS)]
    folder.mkdir(parents=True)
    for name, column in (("a.toks", 0), ("b.toks", 1), ("sim.txt", 2), ("id.txt", 3)):
        (folder / name).write_text("".join(f"{row[column]}\n" for row in rows))
    (folder / "dataset.yaml").write_text("kind: answer-selection\n")
    return folder


def irpipe(*argv) -> int:
    return cli.main(["-q", *map(str, argv)])


def test_hcan_trains_on_local_folders_with_repeated_candidate_ids(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    answer_selection_folder(tmp_path / "train", COLOURS[:6], "t")
    answer_selection_folder(tmp_path / "dev", COLOURS[6:], "d")
    code = irpipe("train", "hcan", "--train", "./train", "--dev", "./dev", "--output", "model", "--epochs", "1",
                  "--threads", "1", *TINY_HCAN)
    out, err = capsys.readouterr()
    assert code == 0, err
    log = [json.loads(line) for line in (tmp_path / "model" / "train.jsonl").read_text().splitlines()]
    assert log[-1]["epoch"] == 1 and "dev" in json.dumps(log[-1])
    assert (tmp_path / "model" / "model.safetensors").is_file()
    spec = ("candidates() >> hcan(train=./train, epochs=1, embeddings=random, embedding_dim=8, filters=8, "
            "max_query_length=12, max_doc_length=16, threads=1)")
    code = irpipe("run", spec, "--dataset", "./dev", "--eval", "AP,RR", "--output", "runs/spec.trec")
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "(2 queries)" in out and len((tmp_path / "runs" / "spec.trec").read_text().splitlines()) == 10
    assert [p.name.split("-")[0] for p in (tmp_path / "cache" / "models").iterdir()] == ["hcan"]


def test_monobert_trains_on_a_labelled_pairs_tsv(tmp_path, tiny_bert, capsys):
    folder = tmp_path / "pairs"
    folder.mkdir()
    (folder / "pairs.tsv").write_text("".join(
        f"1\twhat colour is the {thing}\tthe {thing} is {colour}\n0\twhat colour is the {thing}\t{DISTRACTORS[i % 4]}\n"
        for i, (thing, colour) in enumerate(COLOURS)))
    (folder / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
    code = irpipe("train", "monobert", "--train", folder, "--output", tmp_path / "model", "--epochs", "1",
                  "--train-queries", "4", "--threads", "1", "--set", "max_length=64", "--set", f"bert={tiny_bert}")
    out, err = capsys.readouterr()
    assert code == 0, err
    log = [json.loads(line) for line in (tmp_path / "model" / "train.jsonl").read_text().splitlines()]
    assert len(log) == 1 and (tmp_path / "model" / "config.json").is_file()


def test_an_experiment_over_seeds_pins_the_mean_of_its_seed_runs(tmp_path, monkeypatch, capsys):
    import statistics

    from pipeline.data.registry import get_dataset
    from pipeline.data.runs import read_run
    from pipeline.evaluation import evaluate

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    answer_selection_folder(tmp_path / "train", COLOURS[:4], "t")
    answer_selection_folder(tmp_path / "dev", COLOURS[4:], "d")
    spec = ("candidates() >> hcan(train=./train, epochs=1, embeddings=random, embedding_dim=8, filters=8, "
            "max_query_length=12, max_doc_length=16, threads=1, seed={seed})")
    (tmp_path / "exp.yaml").write_text(f"dataset: ./dev\npipeline: {spec}\nmeasures: [AP, RR]\nseeds: [0, 1, 2]\n"
                                       "expected: {AP: 0.5}\ntolerance: 0.0001\nci: false\n")
    code = irpipe("run", "exp.yaml", "--results-dir", "results")
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads((tmp_path / "results" / "exp.json").read_text())
    assert result["run"] == [f"runs/exp.seed{seed}.trec" for seed in (0, 1, 2)]
    qrels = get_dataset("./dev").qrels()
    for seed in (0, 1, 2):  # each seed's scores are its own run file's
        assert evaluate(read_run(tmp_path / "runs" / f"exp.seed{seed}.trec"), qrels, ["AP", "RR"]) == pytest.approx(
            result["seeds"][str(seed)])
    assert [p.name.split("-")[0] for p in (tmp_path / "cache" / "models").iterdir()] == ["hcan"] * 3
    aps = [result["seeds"][str(seed)]["AP"] for seed in (0, 1, 2)]
    assert result["measures"]["AP"] == pytest.approx(statistics.fmean(aps))
    assert result["sd"]["AP"] == pytest.approx(statistics.stdev(aps))
    assert result["checks"]["AP"]["score"] == result["measures"]["AP"]
    assert f"± {result['sd']['AP']:.4f}" in out and "seed 2: AP " in out
    # the same from the command line: a spec with {seed} and --seeds gives the same seed runs (the models are cached)
    assert irpipe("run", spec, "--dataset", "./dev", "--eval", "AP,RR", "--seeds", "0,2", "--output", "runs/cli.trec") == 0
    assert "mean ± sd over 2 seeds" in capsys.readouterr().out
    for seed in (0, 2):
        assert read_run(tmp_path / "runs" / f"cli.seed{seed}.trec").ranking == read_run(
            tmp_path / "runs" / f"exp.seed{seed}.trec").ranking
    assert irpipe("run", spec, "--dataset", "./dev", "--seeds", "0,x") == 2
    assert "--seeds takes integers" in capsys.readouterr().err
