"""The neural reranker stage: batched scoring independent of batch size, truncation reported, a run sorted by the
new score, the spec grammar and `irpipe rerank`/`irpipe train` on the command line."""
from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import torch

from pipeline.data.runs import Run, read_run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.rerank.checkpoint import save_checkpoint
from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
from pipeline.rerank.pairs import Pair, pairs_of
from pipeline.rerank.scoring import autocast, predict, resolve_device
from pipeline.spec import SpecError, parse
from pipeline.stages.neural import reranker_class

MonoBERTReranker = reranker_class("monobert")


@pytest.fixture(scope="module")
def checkpoint(tiny_bert, tmp_path_factory):
    torch.manual_seed(0)
    return save_checkpoint(MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=24)),
                           tmp_path_factory.mktemp("neural") / "ckpt")


def test_scores_do_not_depend_on_batch_size_or_order(checkpoint, tiny_qa):
    run = tiny_qa.run()
    pairs = pairs_of(tiny_qa.topics(), run, run.texts)
    model = MonoBERTReranker(ckpt=str(checkpoint)).bind().model
    one = predict(model, pairs, batch_size=1).scores
    many = predict(model, pairs, batch_size=64).scores
    backwards = predict(model, pairs[::-1], batch_size=7).scores[::-1]
    assert one == pytest.approx(many, abs=1e-5) and one == pytest.approx(backwards, abs=1e-5)


def test_stage_returns_the_run_sorted_by_the_new_score(checkpoint, tiny_qa):
    reranker = MonoBERTReranker(ckpt=str(checkpoint), batch_size=3).bind()
    output = reranker(tiny_qa.topics(), tiny_qa.run())
    model = reranker.model
    for qid, hits in output.ranking.items():
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True) and len(hits) == 5
        docid, score = hits[0]
        expected = predict(model, [Pair(qid, docid, tiny_qa.topics()[qid], tiny_qa.run().texts[docid])]).scores[0]
        assert score == pytest.approx(expected, abs=1e-5)
    assert output.texts == tiny_qa.run().texts and output.tag == "monobert"


def test_truncation_is_counted_and_reported(checkpoint, caplog):
    topics = Topics({"q": "what colour is the sky"})
    run = Run({"q": [("short", 2.0), ("long", 1.0)]}, {"short": "blue", "long": "the sky is " + "very " * 40 + "blue"})
    reranker = MonoBERTReranker(ckpt=str(checkpoint)).bind()
    with caplog.at_level(logging.WARNING, logger="irpipe"):
        reranker(topics, run)
    assert reranker.truncated == 1
    assert "monobert: 1 of 2 pairs were truncated to fit the model (max_length=24, max_query_length=64)" in caplog.text
    longer = MonoBERTReranker(ckpt=str(checkpoint), max_length=128).bind()  # a config override at load time
    longer(topics, run)
    assert longer.truncated == 0 and longer.model.config.max_length == 128


def test_spec_builds_the_stage_and_checks_options(checkpoint):
    stage = parse(f"monobert(ckpt={checkpoint}, max_length=64)")
    assert stage == MonoBERTReranker(ckpt=str(checkpoint), max_length=64)
    assert repr(stage) == f"monobert(ckpt={checkpoint}, max_length=64)"
    recipe = parse("monobert(train=wikiqa/train, dev=wikiqa/dev, epochs=2, seed=1)")
    assert recipe.config() == {"train": "wikiqa/train", "dev": "wikiqa/dev", "epochs": 2, "seed": 1}
    for spec, message in [("monobert()", "needs a checkpoint folder"),
                          ("monobert(ckpt=x, train=wikiqa/train)", "not both"),
                          ("monobert(ckpt=x, epochs=2)", "training option"),
                          ("monobert(train=wikiqa/train, epoch=2)", "did you mean epochs"),
                          ("monobert(train=wikiqa/train, max_length=long)", "should be of type int"),
                          ("monobert(train=wikiqa/train, pooling=mean)", "pooling='mean'; choose one of pooler, cls")]:
        with pytest.raises(SpecError, match=message):
            parse(spec)


def test_devices_and_autocast():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            resolve_device("cuda")
        with pytest.raises(ConfigError, match="fp16 autocast needs a CUDA device"):
            autocast(torch.device("cpu"), "fp16")
    with pytest.raises(ConfigError, match="amp='fp8'; choose one of"):
        autocast(torch.device("cpu"), "fp8")


def test_bf16_autocast_scores_close_to_float32(checkpoint, tiny_qa):
    run = tiny_qa.run()
    pairs = pairs_of(tiny_qa.topics(), run, run.texts)
    model = MonoBERTReranker(ckpt=str(checkpoint)).bind().model
    exact = predict(model, pairs).scores
    assert predict(model, pairs, amp="bf16").scores == pytest.approx(exact, abs=0.05)


def test_rerank_command_with_a_dataset(checkpoint, tmp_path, capsys, shared_data):
    from pipeline.cli import main
    from pipeline.data.registry import get_dataset

    shipped = get_dataset("wikiqa/dev").run()
    first = dict(list(shipped.ranking.items())[:5])
    Run(first).write(tmp_path / "in.trec")
    assert main(["-q", "rerank", "--model", str(checkpoint), "--run", str(tmp_path / "in.trec"), "--dataset",
                 "wikiqa/dev", "--output", str(tmp_path / "out.trec"), "--batch-size", "4", "--eval", "AP,RR"]) == 0
    output = read_run(tmp_path / "out.trec")
    assert output.ranking.keys() == first.keys() and output.num_hits() == sum(map(len, first.values()))
    assert capsys.readouterr().out.splitlines()[0].split()[-3:] == ["queries", "AP", "RR"]  # irpipe eval's table
    assert main(["-q", "rerank", "--model", str(tmp_path), "--run", str(tmp_path / "in.trec"), "--dataset",
                 "wikiqa/dev", "--output", str(tmp_path / "x.trec")]) == 2  # not a checkpoint: a one-line error


def test_train_command_writes_a_checkpoint(tiny_bert, tmp_path, capsys, shared_data):
    from pipeline.cli import main
    from pipeline.rerank.checkpoint import load_checkpoint

    out = tmp_path / "model"
    assert main(["-q", "train", "monobert", "--train", "wikiqa/dev", "--output", str(out), "--epochs", "1",
                 "--train-queries", "3", "--batch-size", "8", "--seed", "2", "--option", "warmup=0",
                 "--set", f"bert={tiny_bert}", "--set", "max_length=32"]) == 0
    assert "best epoch 1 of 1" in capsys.readouterr().out
    model = load_checkpoint(out)
    assert model.config.max_length == 32
    assert main(["-q", "train", "monobert", "--train", "wikiqa/dev", "--output", str(tmp_path / "x"),
                 "--set", "max_lenght=3"]) == 2
    assert main(["-q", "train", "monobert", "--train", "wikiqa/dev", "--output", str(tmp_path / "x"),
                 "--set", "pooling=mean"]) == 2  # a ConfigError naming the field and the choices, no traceback


def test_importing_the_cli_imports_no_torch():
    code = "import sys, pipeline.cli as c; c.build_parser(); print('torch' in sys.modules, 'transformers' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_bm25_then_monobert_takes_texts_from_the_index(checkpoint, cacm_index, cacm_topics_file):
    """`bm25 % k >> monobert(ckpt=...)`: BM25 hits carry no text, so the reranker reads them from the index."""
    from pipeline.data.topics import read_topics

    topics = read_topics(cacm_topics_file).subset(["1", "2", "3"])
    pipeline = parse(f"bm25(index={cacm_index}) % 5 >> monobert(ckpt={checkpoint}, index={cacm_index})")
    first = pipeline[0](topics)
    output = pipeline(topics)
    assert output.ranking.keys() == first.ranking.keys()
    assert all({d for d, _ in output[q]} == {d for d, _ in first[q][:5]} for q in first.ranking)
    without_index = MonoBERTReranker(ckpt=str(checkpoint))
    with pytest.raises(ConfigError, match="no index to read them from"):
        without_index(topics, first.cut(5))


@pytest.mark.slow
def test_a_bound_stage_keeps_its_identity_when_it_runs(checkpoint, shared_data, tmp_path, monkeypatch):
    """Binding a reranker to a dataset builds (or finds) the dataset's index for candidates without a text;
    binding keeps its repr and config, and running it keeps its fingerprint (its cache key)."""
    from pipeline.data.registry import get_dataset

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    cacm = get_dataset("cacm")
    topics = cacm.topics().subset(["1", "2"])
    unbound = MonoBERTReranker(ckpt=str(checkpoint))
    stage = unbound.bind(cacm)
    assert (repr(stage), stage.config()) == (repr(unbound), unbound.config())
    before = (repr(stage), stage.config(), stage.fingerprint())
    run = Run({qid: [("CACM-0001", 2.0), ("CACM-0002", 1.0)] for qid in topics})  # no texts: read from the index
    output = stage(topics, run)
    assert output.num_hits() == 4
    assert (repr(stage), stage.config(), stage.fingerprint()) == before


def test_the_cache_key_names_the_precision_scores_are_computed_in(checkpoint, monkeypatch):
    """amp=bf16, and amp=auto where it resolves to bf16, key `amp=bf16` with the fp32 score head (a score of the
    former bf16 head is not reused); fp32, explicit or resolved, keys neither."""
    monobert = reranker_class("monobert")
    bf16, auto, none = (monobert(ckpt=str(checkpoint), amp=amp).fingerprint() for amp in ("bf16", "auto", "none"))
    assert "amp=bf16\x1fhead=fp32" in bf16 and "head=" not in none and auto == none     # this suite: auto is fp32
    monkeypatch.setattr("pipeline.rerank.scoring.native_bf16", lambda: True)
    assert "amp=bf16\x1fhead=fp32" in monobert(ckpt=str(checkpoint), amp="auto").fingerprint()
