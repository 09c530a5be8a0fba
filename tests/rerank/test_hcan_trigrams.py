"""HCAN's character-trigram inputs (the authors' tweet setting): trigrams and URLs as text, shapes, padding
invariance, the URL branch exactly off without with_url, what reaches the model from a run's doc_fields."""
from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from pipeline.errors import ConfigError
from pipeline.rerank.models.hcan import HCAN, HCANConfig
from pipeline.rerank.models.hcan.inputs import MAX_QUERY_TRIGRAMS, MAX_URL_TRIGRAMS, char_trigrams, url_text
from pipeline.rerank.pairs import Pair

QUERIES = ["water shortages", "tony mendez", "water shortages", "Kerry"]
TWEETS = ["water shortage defunct borewells @url", "argo tony mendez", "iran farmers and water", ""]
URLS = ["http://www.thehindu.com/water-scarcity-worries/article4520714.ece", "", "https://globalvoices.org/iran-water/",
        "http://wp.me/p1CPTt-24p?utm_source=tw"]


def tiny(**overrides) -> HCANConfig:
    fields = dict(embeddings="random", embedding_dim=8, filters=6, sm_hidden=10, max_query_length=12,
                  max_doc_length=16, dropout=0.0)
    return HCANConfig(**(fields | overrides))


def pairs(urls=URLS) -> list[Pair]:
    return [Pair(f"q{i}", f"d{i}", q, t, doc_fields={"url": u}) for i, (q, t, u) in enumerate(zip(QUERIES, TWEETS, urls))]


def build(**overrides) -> HCAN:
    torch.manual_seed(0)
    fields = [p.doc_fields for p in pairs()]
    return HCAN.from_training_data(tiny(**overrides), QUERIES, TWEETS, fields).eval()


def scores(model: HCAN, batch_pairs: list[Pair], extra: int = 0) -> torch.Tensor:
    """Scores of the pairs, with `extra` padding positions appended to every id sequence."""
    tensors = model.prepare(batch_pairs).tensors
    padded = {k: F.pad(v, (0, extra)) if k.endswith(("ids", "idf", "trigrams")) else v for k, v in tensors.items()}
    with torch.inference_mode():
        return model.score(model(**padded))


def test_trigrams_and_urls_as_text():
    assert char_trigrams("Water  Shortägés") == ["#wa", "wat", "ate", "ter", "er ", "r s", " sh", "sho", "hor", "ort",
                                                   "rta", "tag", "age", "ges", "es#"]
    assert char_trigrams("a") == ["#a#"] and char_trigrams("  ") == [] and char_trigrams("") == []
    assert url_text("HTTP://www.X.org/a-b?utm=1 https://y.co/z") == "www.x.org/a-b y.co/z"
    assert url_text("") == ""


@pytest.mark.parametrize("options, branches", [(dict(char_trigrams=True), 1), (dict(with_url=True), 1),
                                               (dict(char_trigrams=True, with_url=True), 2),
                                               (dict(char_trigrams=True, with_url=True, rm_only=True), 2)])
def test_shapes_and_classifier_width(options, branches):
    model = build(**options)
    batch = model.prepare(pairs())
    longest = max(len(char_trigrams(q)) for q in QUERIES)
    assert batch.tensors["query_trigrams"].shape == (4, longest)
    assert ("doc_trigrams" in batch.tensors) == model.config.char_trigrams
    if model.config.with_url:  # the longest URL text, in trigrams (under MAX_URL_TRIGRAMS)
        assert batch.tensors["url_trigrams"].shape == (4, max(len(char_trigrams(url_text(u))) for u in URLS))
    sm = 0 if model.config.rm_only else 4 * 10
    assert model.classifier[0].in_features == 5 * 2 * 12 + branches * 5 * 2 * MAX_QUERY_TRIGRAMS + sm
    output = model(**batch.tensors)
    assert output.shape == (4, 2) and torch.isfinite(output).all()


MODES = [dict(char_trigrams=True, with_url=True, encoder=e, rm_softmax=s)
         for e in ("deep", "wide", "bilstm") for s in ("query", "padded")] + [
    dict(with_url=True, rm_only=True, rm_softmax="raw", rm_similarity="cosine")]


@pytest.mark.parametrize("options", MODES, ids=lambda o: "-".join(map(str, o.values())))
def test_appending_padding_does_not_change_a_score(options):
    model = build(**options)
    together = scores(model, pairs())
    torch.testing.assert_close(scores(model, pairs(), extra=5), together, rtol=0, atol=1e-6)
    alone = torch.cat([scores(model, [p]) for p in pairs()])            # each pair alone: no padding at all
    torch.testing.assert_close(alone, together, rtol=0, atol=1e-6)
    assert len(set(together.tolist())) > 1


def test_the_url_branch_is_exactly_off_without_with_url():
    plain, with_text = build(), build(char_trigrams=True)
    assert not any("trigram" in key for key in plain.state_dict())        # the default model: as before
    assert plain.trigram_vocab is None and "query_trigrams" not in plain.prepare(pairs()).tensors
    assert not any(key.startswith("url_trigrams") for key in with_text.state_dict())
    other_urls = ["http://elsewhere.net/x"] * 4
    for model in (plain, with_text):                                    # URLs change nothing, missing ones neither
        torch.testing.assert_close(scores(model, pairs(other_urls)), scores(model, pairs()), rtol=0, atol=0)
        bare = [dataclasses.replace(p, doc_fields={}) for p in pairs()]
        torch.testing.assert_close(scores(model, bare), scores(model, pairs()), rtol=0, atol=0)
    with_url = build(with_url=True)
    assert not torch.equal(scores(with_url, pairs(other_urls)), scores(with_url, pairs()))


def test_url_level_zero_is_exact_trigram_matching_with_cosine():
    """rm_softmax=raw, rm_similarity=cosine: a query trigram found in the URL scores 1 at level 0."""
    model = build(with_url=True, rm_only=True, rm_softmax="raw", rm_similarity="cosine")
    batch = model.prepare(pairs()[:1])
    query, url = batch.tensors["query_trigrams"], batch.tensors["url_trigrams"]
    with torch.inference_mode():
        features = model.url_trigrams(model.trigram_embedding(query), query != 0, model.trigram_embedding(url), url != 0)
    level0 = features[0, :MAX_QUERY_TRIGRAMS]                           # (N+1) x [max; mean] x L_3: level 0's max
    grams = char_trigrams("water shortages")
    in_url = set(char_trigrams(url_text(URLS[0])))
    for j, gram in enumerate(grams):
        if gram in in_url:
            assert level0[j] == pytest.approx(1.0)
    assert {g for g in grams if g in in_url} == {"wat", "ate", "ter"} and (level0[len(grams):] == 0).all()
    assert level0[grams.index("sho")] < 1


def test_a_long_url_keeps_its_end_and_counts_as_truncated():
    model = build(with_url=True)
    long_url = "http://example.org/" + "a" * MAX_URL_TRIGRAMS + "/water-news"
    batch = model.prepare(pairs([long_url] * 4))
    assert batch.truncated == 4 and batch.tensors["url_trigrams"].shape == (4, MAX_URL_TRIGRAMS)
    expected = model.trigram_vocab.encode(char_trigrams(url_text(long_url))[-MAX_URL_TRIGRAMS:])
    assert batch.tensors["url_trigrams"][0].tolist() == expected


def test_missing_url_field_and_bad_configs_fail_at_once():
    model = build(with_url=True)
    with pytest.raises(ConfigError, match="with_url=true needs each candidate's 'url' field") as error:
        model.prepare([Pair("q", "d", "water", "water news")])
    assert error.value.field == "with_url"
    with pytest.raises(ConfigError, match="sm_only"):
        build(with_url=True, sm_only=True)


def test_assets_round_trip(tmp_path):
    from pipeline.errors import CheckpointError

    model = build(char_trigrams=True, with_url=True)
    model.save_assets(tmp_path)
    again = HCAN.load_assets(model.config, tmp_path)
    again.load_state_dict(model.state_dict())
    assert again.trigram_vocab.words == model.trigram_vocab.words and "wat" in again.trigram_vocab
    torch.testing.assert_close(scores(again.eval(), pairs()), scores(model, pairs()))
    (tmp_path / "trigrams.txt").unlink()
    with pytest.raises(CheckpointError, match="trigrams.txt"):
        HCAN.load_assets(model.config, tmp_path)


def test_urls_of_a_run_reach_training_and_reranking(tiny_tweets, tmp_path):
    from pipeline.rerank.checkpoint import load_checkpoint
    from pipeline.stages import get_stage_class
    from pipeline.training.loop import train

    overrides = dataclasses.asdict(tiny(with_url=True, rm_only=True, max_query_length=8))
    train("hcan", tiny_tweets, tmp_path / "hcan", options={"epochs": 1, "train_batch_size": 8}, overrides=overrides)
    model = load_checkpoint(tmp_path / "hcan")
    assert model.config.with_url and "new" in model.trigram_vocab and "blo" in model.trigram_vocab  # URL trigrams
    stage = get_stage_class("hcan")(ckpt=str(tmp_path / "hcan"))
    run = tiny_tweets.run()
    assert stage(tiny_tweets.topics(), run).num_hits() == 40
    without = type(run)(run.ranking, run.texts, run.tag)                 # no doc_fields: refused, not guessed
    with pytest.raises(ConfigError, match="'url' field"):
        stage(tiny_tweets.topics(), without)
