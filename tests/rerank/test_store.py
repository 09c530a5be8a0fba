"""The document-encoding store: rows per docid equal to on-the-fly encodings (fp32 exactly, fp16 within 1e-3),
shards written atomically and resumed after a fault, a store of another model refused, and a reranking stage that
reads the store and encodes the rest on the fly -- on real DL20 candidates through `irpipe encode`/`irpipe rerank`."""
from __future__ import annotations

import json
import logging

import pytest
import torch

from pipeline.data.runs import Run, read_run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.rerank.models.biencoder import BiEncoder, BiEncoderConfig
from pipeline.stages.neural import pretrained_digest
from pipeline.rerank.store import EncodingStore, write_store

DOCS = [(f"d{i}", text) for i, text in enumerate(
    ["the sky is blue", "grass is green", "snow is white and cold", "coal is black", "blood is red",
     "the sun is a yellow star", "violets are purple", "oranges are orange"])]


@pytest.fixture(scope="module")
def tiny(tiny_bert):
    config = BiEncoderConfig(bert=str(tiny_bert))
    return BiEncoder(config).eval(), pretrained_digest(BiEncoder, config)


def _rows(store: EncodingStore) -> dict[str, torch.Tensor]:
    return {docid: store.get(docid) for docid, _ in DOCS}


@pytest.mark.parametrize("dtype, tolerance", [("fp32", 1e-6), ("fp16", 1e-3)])
def test_stored_rows_equal_fresh_encodings(tiny, tmp_path, dtype, tolerance):
    model, digest = tiny
    manifest = write_store(tmp_path / "s", model, digest, DOCS, dtype=dtype, shard_size=3, batch_size=2)
    assert manifest["count"] == 8 and manifest["rows"] == 8 and len(manifest["shards"]) == 3
    assert manifest["dtype"] == dtype and manifest["dims"] == 32 and manifest["model"] == "biencoder"
    store = EncodingStore.open(tmp_path / "s", "biencoder", digest)
    with torch.inference_mode():
        fresh = dict(zip([d for d, _ in DOCS], model.encode_documents([t for _, t in DOCS])))
    for docid, rows in _rows(store).items():
        torch.testing.assert_close(rows, fresh[docid], rtol=0, atol=tolerance)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["manifest.json"] + [
        f"shard-0000{i}.{kind}" for i in range(3) for kind in ("bin", "ids")]


def test_a_fault_between_shards_resumes_to_the_same_store(tiny, tmp_path, monkeypatch):
    model, digest = tiny
    whole = write_store(tmp_path / "whole", model, digest, DOCS, shard_size=3)
    calls, encode = [], model.encode_prepared

    def failing(prepared, side):  # the third shard's encoding dies, as a killed process would
        calls.append(len(prepared[0]))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return encode(prepared, side)

    monkeypatch.setattr(model, "encode_prepared", failing)
    with pytest.raises(KeyboardInterrupt):
        write_store(tmp_path / "cut", model, digest, DOCS, shard_size=3, batch_size=64)
    assert json.loads((tmp_path / "cut" / "manifest.json").read_text())["count"] == 6  # two shards kept
    monkeypatch.setattr(model, "encode_prepared", encode)
    resumed = write_store(tmp_path / "cut", model, digest, DOCS, shard_size=3)
    assert resumed["count"] == whole["count"] and resumed["rows"] == whole["rows"]
    a = _rows(EncodingStore.open(tmp_path / "whole", "biencoder", digest))
    b = _rows(EncodingStore.open(tmp_path / "cut", "biencoder", digest))
    assert all(torch.equal(a[d], b[d]) for d in a)
    assert write_store(tmp_path / "cut", model, digest, DOCS)["count"] == 8  # nothing left to encode


def test_a_store_of_another_model_is_refused(tiny, tmp_path):
    model, digest = tiny
    write_store(tmp_path / "s", model, digest, DOCS[:2])
    with pytest.raises(ConfigError, match="holds encodings of another model"):
        EncodingStore.open(tmp_path / "s", "biencoder", "0" * 40)
    with pytest.raises(ConfigError, match="another model"):
        write_store(tmp_path / "s", model, "0" * 40, DOCS)
    with pytest.raises(ConfigError, match="not an encoding store"):
        EncodingStore.open(tmp_path, "biencoder", digest)


def test_stage_reads_the_store_and_encodes_the_rest(tiny_bert, tiny, tmp_path, caplog):
    from pipeline.stages import get_stage_class

    model, digest = tiny
    write_store(tmp_path / "s", model, digest, DOCS[:5], dtype="fp32")
    topics = Topics({"q": "what colour is the sky", "r": "which star is yellow"})
    run = Run({"q": [(d, 1.0) for d, _ in DOCS[:4]], "r": [(d, 1.0) for d, _ in DOCS[3:]]}, dict(DOCS))
    stage = get_stage_class("biencoder")
    with caplog.at_level(logging.INFO, logger="irpipe"):
        stored = stage(bert=str(tiny_bert), store=str(tmp_path / "s"))(topics, run)
    assert "5 of 8 documents from the store, 3 encoded on the fly" in caplog.text
    fresh = stage(bert=str(tiny_bert))(topics, run)
    for qid in ("q", "r"):
        assert [d for d, _ in stored[qid]] == [d for d, _ in fresh[qid]]
        assert [s for _, s in stored[qid]] == pytest.approx([s for _, s in fresh[qid]], abs=1e-5)
    assert stage(bert=str(tiny_bert), store=str(tmp_path / "s")).fingerprint() != stage(bert=str(tiny_bert)).fingerprint()


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_dl20_warm_store_ranks_as_on_the_fly(tmp_path, shared_data, dtype):
    """`irpipe encode` of the candidates of 3 DL20 queries, then `irpipe rerank --store` against encoding on the fly:
    fp32, the same ranking with scores within 1e-5; fp16, scores within 1e-3, so only candidates whose scores lie
    within 2e-3 of each other may trade places."""
    from pipeline.cli import main
    from pipeline.data.registry import get_dataset

    shipped = get_dataset("dl20-passage").run()
    Run(dict(list(shipped.ranking.items())[:3])).write(tmp_path / "cand.trec")
    assert main(["-q", "encode", "--model", "biencoder", "--run", str(tmp_path / "cand.trec"), "--dataset",
                 "dl20-passage", "--output", str(tmp_path / "store"), "--shard-size", "120", "--dtype", dtype]) == 0
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    assert manifest["count"] == 300 and manifest["dtype"] == dtype and len(manifest["shards"]) == 3
    common = ["-q", "rerank", "--model", "biencoder", "--run", str(tmp_path / "cand.trec"), "--dataset",
              "dl20-passage"]
    assert main(common + ["--store", str(tmp_path / "store"), "--output", str(tmp_path / "warm.trec")]) == 0
    assert main(common + ["--output", str(tmp_path / "fly.trec")]) == 0
    warm, fly = read_run(tmp_path / "warm.trec"), read_run(tmp_path / "fly.trec")
    for qid in fly.ranking:
        fly_scores = dict(fly[qid])
        assert [s for d, s in warm[qid]] == pytest.approx([fly_scores[d] for d, _ in warm[qid]],
                                                          abs=1e-5 if dtype == "fp32" else 1e-3)
        if dtype == "fp32":
            assert [d for d, _ in warm[qid]] == [d for d, _ in fly[qid]]
        else:  # in the warm order, on-the-fly scores never rise by more than fp16's error
            order = [fly_scores[d] for d, _ in warm[qid]]
            assert all(later <= earlier + 2e-3 for earlier, later in zip(order, order[1:]))
    assert main(["-q", "encode", "--model", "monobert", "--corpus", str(tmp_path / "cand.trec"),
                 "--output", str(tmp_path / "x")]) == 2  # a cross-encoder has no document encodings: exit 2
