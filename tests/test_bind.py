"""One resolve phase: every entry point (the Python API, `irpipe run`, `irpipe rerank`, `irpipe search`) binds a
pipeline before it runs it, and no stage's transform trains a model, builds or opens an index, or opens or builds
a store. `irpipe rerank` and `irpipe run` give the same ranking for the same candidates and model."""
from __future__ import annotations

import json

import pytest
import torch

from support import write_collection

RESOLVERS = [("pipeline.retrieve.index", "open_index"), ("pipeline.stages.bm25", "open_index"),
             ("pipeline.retrieve.index", "build_index"), ("pipeline.retrieve.index", "dataset_index"),
             ("pipeline.retrieve.index", "dataset_index_for"), ("pipeline.rerank.checkpoint", "load_checkpoint"),
             ("pipeline.rerank.store", "write_store")]


@pytest.fixture
def tripwire(monkeypatch, tmp_path):
    """Records each resolving call, and those made while a bound stage computes (which must be none)."""
    import importlib

    from pipeline.rerank.checkpoint import ModelSource
    from pipeline.rerank.store import EncodingStore
    from pipeline.stage import Stage
    from pipeline.training.recipes import Recipe

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    computing, calls = [0], {"during bind": [], "during transform": []}

    def watched(name, original):
        def call(*args, **kwargs):
            calls["during transform" if computing[0] else "during bind"].append(name)
            return original(*args, **kwargs)
        return call

    for module_name, name in RESOLVERS:
        module = importlib.import_module(module_name)
        monkeypatch.setattr(module, name, watched(name, getattr(module, name)))
    monkeypatch.setattr(Recipe, "ensure_trained", watched("ensure_trained", Recipe.ensure_trained))
    monkeypatch.setattr(ModelSource, "load", watched("ModelSource.load", ModelSource.load))
    monkeypatch.setattr(EncodingStore, "open", classmethod(watched("EncodingStore.open", EncodingStore.open.__func__)))
    stage_call = Stage.__call__

    def call(self, topics, run=None):
        if not self.bound:  # binding first, then the bound copy's call (counted)
            return stage_call(self, topics, run)
        computing[0] += 1
        try:
            return stage_call(self, topics, run)
        finally:
            computing[0] -= 1

    monkeypatch.setattr(Stage, "__call__", call)
    return calls


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    return write_collection(tmp_path_factory.mktemp("bind") / "tiny")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from support import save_tiny_bert

    from pipeline.rerank.checkpoint import save_checkpoint
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig

    folder = tmp_path_factory.mktemp("bind-model")
    bert = save_tiny_bert(folder / "bert")
    torch.manual_seed(0)
    return save_checkpoint(MonoBERT(MonoBERTConfig(bert=str(bert), max_length=32)), folder / "monobert")


def _run_file(path, ranking: dict) -> str:
    path.write_text("".join(f"{qid} Q0 {d} {rank} {len(hits) - rank + 1} cand\n"
                            for qid, hits in ranking.items() for rank, d in enumerate(hits, 1)))
    return str(path)


@pytest.mark.slow
def test_python_api_resolves_in_bind_only(tripwire, collection, checkpoint):
    from pipeline.data.registry import get_dataset
    from pipeline.spec import parse

    dataset = get_dataset(str(collection))
    pipeline = parse(f"bm25() % 3 >> overlap() >> monobert(ckpt={checkpoint})").bind(dataset)
    assert {"dataset_index_for", "open_index", "ModelSource.load"} <= set(tripwire["during bind"])
    run = pipeline(dataset.topics())
    assert run.num_hits() == 5 and tripwire["during transform"] == []  # BM25 matches 5 documents


@pytest.mark.slow
def test_a_recipe_is_trained_in_bind(tripwire, collection, checkpoint):
    from pipeline.data.registry import get_dataset
    from pipeline.spec import parse

    bert = json.loads((checkpoint / "config.json").read_text())["config"]["bert"]
    dataset = get_dataset(str(collection))
    spec = (f"bm25() % 4 >> monobert(train={collection}, negatives=bm25, epochs=1, train_batch_size=4, "
            f"warmup=0, bert={bert}, max_length=32)")
    pipeline = parse(spec).bind(dataset)
    assert "ensure_trained" in tripwire["during bind"]
    pipeline(dataset.topics())
    assert tripwire["during transform"] == []


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "rerank", "search"])
def test_commands_resolve_in_bind_only(tripwire, collection, checkpoint, tmp_path, command):
    from pipeline.cli import main

    candidates = _run_file(tmp_path / "cand.trec", {"1": ["d4", "d1", "d6"], "2": ["d2", "d6"], "3": ["d5", "d3"]})
    arguments = {"run": ["run", f"bm25() % 3 >> monobert(ckpt={checkpoint})", "--dataset", str(collection),
                         "--results-dir", str(tmp_path / "results")],
                 "rerank": ["rerank", "--model", str(checkpoint), "--run", candidates, "--dataset", str(collection)],
                 "search": ["search", "--dataset", str(collection)]}[command]
    assert main(["-q", *arguments, "--output", str(tmp_path / "out.trec")]) == 0
    assert tripwire["during bind"] and tripwire["during transform"] == []


@pytest.mark.slow
def test_rerank_and_run_give_the_same_ranking(collection, checkpoint, tmp_path):
    from pipeline.cli import main
    from pipeline.data.runs import read_run

    candidates = _run_file(tmp_path / "cand.trec", {"1": ["d4", "d1", "d6"], "2": ["d2", "d6"], "3": ["d5", "d3"]})
    assert main(["-q", "rerank", "--model", str(checkpoint), "--run", candidates, "--dataset", str(collection),
                 "--output", str(tmp_path / "rerank.trec")]) == 0
    assert main(["-q", "run", f"monobert(ckpt={checkpoint})", "--dataset", str(collection), "--run", candidates,
                 "--output", str(tmp_path / "run.trec"), "--results-dir", str(tmp_path / "results"),
                 "--no-cache"]) == 0
    assert read_run(tmp_path / "rerank.trec").ranking == read_run(tmp_path / "run.trec").ranking


def test_a_store_that_holds_every_candidate_needs_no_texts(collection, tmp_path):
    """`irpipe encode --corpus`, then `irpipe rerank --store` of a run with no texts, no dataset, no index."""
    from pipeline.cli import main
    from pipeline.data.runs import read_run

    store = tmp_path / "store"
    assert main(["-q", "encode", "--model", "biencoder", "--corpus", str(collection / "docs.jsonl"),
                 "--output", str(store)]) == 0
    candidates = _run_file(tmp_path / "cand.trec", {"1": ["d4", "d1"], "3": ["d6", "d5", "d3"]})
    assert main(["-q", "rerank", "--model", "biencoder", "--store", str(store), "--run", candidates,
                 "--topics", str(collection / "topics.tsv"), "--output", str(tmp_path / "out.trec")]) == 0
    assert main(["-q", "rerank", "--model", "biencoder", "--run", candidates, "--topics",
                 str(collection / "topics.tsv"), "--corpus", str(collection / "docs.jsonl"),
                 "--output", str(tmp_path / "from-texts.trec")]) == 0  # the texts encoded on the fly instead
    from_store, from_texts = read_run(tmp_path / "out.trec"), read_run(tmp_path / "from-texts.trec")
    assert from_store.ranking.keys() == from_texts.ranking.keys()
    for qid, hits in from_texts.ranking.items():  # fp16 store rows: the same order, scores within 1e-3
        assert [d for d, _ in from_store[qid]] == [d for d, _ in hits]
        assert [s for _, s in from_store[qid]] == pytest.approx([s for _, s in hits], abs=1e-3)
    missing = _run_file(tmp_path / "more.trec", {"1": ["d1", "d9"]})  # d9 is in neither store nor any index
    assert main(["-q", "rerank", "--model", "biencoder", "--store", str(store), "--run", missing,
                 "--topics", str(collection / "topics.tsv"), "--output", str(tmp_path / "x.trec")]) == 2


@pytest.mark.slow
def test_rerank_is_served_from_the_stage_cache_as_run_is(collection, checkpoint, tmp_path, monkeypatch, capsys):
    """The second `irpipe rerank` of the same model, run and texts reads the first one's run back (before, it scored
    every pair again: 139-158 s a call for the bi-encoder on DL19); --no-cache scores them again; --eval prints the
    table `irpipe eval` prints."""
    from pipeline.cli import main

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    candidates = _run_file(tmp_path / "cand.trec", {"1": ["d4", "d1", "d6"], "2": ["d2", "d6"], "3": ["d5", "d3"]})
    rerank = ["rerank", "--model", str(checkpoint), "--run", candidates, "--dataset", str(collection), "--eval", "AP"]
    outputs = []
    for flags in ([], [], ["--no-cache"]):
        capsys.readouterr()
        assert main([*rerank, "--output", str(tmp_path / f"out{len(outputs)}.trec"), *flags]) == 0
        outputs.append(capsys.readouterr())
    assert "computed" in outputs[0].err and "from cache" in outputs[1].err and "computed" in outputs[2].err
    assert "stage cache: 1 hit(s), 0 miss(es)" in outputs[1].err
    table = outputs[0].out.splitlines()
    assert table[0].split() == ["run", "queries", "AP"] and table[1].split()[:2] == [str(tmp_path / "out0.trec"), "3"]
    assert (tmp_path / "out0.trec").read_text().replace("out0", "") == (tmp_path / "out1.trec").read_text()
