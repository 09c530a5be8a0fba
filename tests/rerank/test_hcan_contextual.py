"""HCAN with contextual inputs (embeddings=contextual): a frozen BERT's last-layer states of each sentence as the
word vectors, a word the mean of its pieces (pipeline/rerank/models/hcan/, inputs.py WordPieces), memoised
per sentence by the code MRNN's contextual features use (pipeline/rerank/memo.py frozen_token_features)."""
from __future__ import annotations


import pytest
import torch

from pipeline.rerank.bert import last_layer
from pipeline.rerank.models.hcan import HCAN, HCANConfig
from support import make_pairs

QUERIES = ["who wrote the iron lady ?", "what is the capital of france ?"]
DOCS = ["hugo young wrote the iron lady , a biography of margaret thatcher .", "paris is the capital of france",
        "the iron lady is a film", "the eiffel tower is 324 metres tall"]


def build(tiny_bert, **overrides) -> HCAN:
    fields = dict(embeddings="contextual", bert=str(tiny_bert), filters=6, sm_hidden=10, max_query_length=12,
                  max_doc_length=16, dropout=0.0)
    torch.manual_seed(0)
    return HCAN.from_training_data(HCANConfig(**(fields | overrides)), QUERIES, DOCS).eval()


def pairs():
    return make_pairs(QUERIES * 2, DOCS)


def test_word_vectors_are_the_mean_of_their_pieces_in_the_sentence(tiny_bert):
    model = build(tiny_bert)
    batch = model.prepare(pairs())
    t = batch.tensors
    assert t["doc_pieces"].shape == t["doc_piece_word"].shape and t["doc_pieces"].size(0) == 4
    (row,) = [i for i, p in enumerate(pairs()) if p.text.startswith("hugo")]
    words = t["doc_piece_word"][row]
    assert words[0] == -1 and words.max() == (t["doc_ids"][row] != 0).sum() - 1  # [CLS] first; every word has pieces
    with torch.no_grad():
        vectors = model.embed(t["doc_ids"], t["doc_pieces"], t["doc_piece_word"])           # (B, m, H)
        real = t["doc_pieces"][row:row + 1] != model.tokenizer.pad_token_id
        states = last_layer(model.bert, t["doc_pieces"][row:row + 1], real.long())[0]    # the whole sentence
    assert vectors.shape == (4, t["doc_ids"].size(1), model.bert.config.hidden_size)
    for word in range(int(words.max()) + 1):
        torch.testing.assert_close(vectors[row, word], states[words == word].mean(0), atol=1e-5, rtol=1e-5)
    assert not vectors[row, int(words.max()) + 1:].any()                                # padding words: zero


def test_a_word_reads_differently_in_another_sentence_and_the_inputs_move_the_scores(tiny_bert):
    model = build(tiny_bert)
    batch = model.prepare(pairs())
    t = batch.tensors
    with torch.no_grad():
        vectors = model.embed(t["doc_ids"], t["doc_pieces"], t["doc_piece_word"])
        iron = model.vocab.encode(["iron"])[0]
        a, b = [vectors[i][t["doc_ids"][i] == iron][0] for i in range(4) if (t["doc_ids"][i] == iron).any()]
        assert not torch.allclose(a, b)                                                  # contextual, not a table
        before = model.score(model(**t))
        other = build(tiny_bert)                                                         # the same trained weights
        for p in other.bert.parameters():                                                # on another BERT's states
            p.add_(torch.randn_like(p) * 0.1)
        after = other.score(other(**other.prepare(pairs()).tensors))
    assert before.shape == (4,) and not torch.allclose(before, after)


def test_the_bert_is_frozen_memoised_and_round_trips(tiny_bert, tmp_path):
    from pipeline.rerank.checkpoint import load_checkpoint, save_checkpoint

    model = build(tiny_bert)
    assert model.embedding is None and not any(p.requires_grad for p in model.bert.parameters())
    assert not model.train().bert.training                                           # no dropout in training either
    model.eval()
    with torch.no_grad():
        scores = model.score(model(**model.prepare(pairs()).tensors))
    assert len(model._features) == len(set(QUERIES)) + len(DOCS)                      # one entry per sentence
    folder = save_checkpoint(model, tmp_path / "ctx")
    assert (folder / "bert" / "config.json").is_file()
    again = load_checkpoint(folder)
    with torch.no_grad():
        torch.testing.assert_close(again.score(again(**again.prepare(pairs()).tensors)), scores)


def test_static_tables_keep_their_inputs():
    """Static tables: no BERT, no piece tensors; the defaults (and so every older checkpoint) are unchanged."""
    assert HCANConfig().embeddings == "glove"
    torch.manual_seed(0)
    model = HCAN.from_training_data(HCANConfig(embeddings="random", embedding_dim=8, filters=6, sm_hidden=10),
                                    QUERIES, DOCS)
    assert model.bert is None and set(model.prepare(pairs()).tensors) == {"query_ids", "doc_ids", "query_idf"}


@pytest.mark.parametrize("encoder", ["deep", "wide", "bilstm"])
def test_every_encoder_takes_contextual_inputs(tiny_bert, encoder):
    model = build(tiny_bert, encoder=encoder)
    with torch.no_grad():
        out = model(**model.prepare(pairs()).tensors)
    assert out.shape == (4, 2) and torch.isfinite(out).all()


@pytest.mark.parametrize("uniform", [False, True])
def test_the_inputs_probe_scores_a_candidate_that_repeats_the_query_one(tiny_qa, uniform):
    """bench/hcan_inputs_probe.py: the IDF-weighted (or plain) mean over query words of their best
    cosine; a candidate holding every query word scores 1 (each word's own vector), the others less."""
    from bench.hcan_inputs_probe import probe_scores
    from pipeline.data.runs import Run

    class Echo(type(tiny_qa)):
        def run(self) -> Run:
            run = super().run()
            topics = self.topics()
            texts = dict(run.texts) | {hits[-1][0]: topics[qid] + " indeed" for qid, hits in run.ranking.items()}
            return Run(run.ranking, texts)

    echo = Echo()
    scores = probe_scores(echo, echo, "random", uniform=uniform)
    assert sorted(scores) == sorted(echo.run().ranking)
    for qid, hits in echo.run().ranking.items():
        echoed = hits[-1][0]
        assert scores[qid][echoed] == pytest.approx(1.0, abs=1e-5)
        assert all(s < 1.0 - 1e-3 for doc, s in scores[qid].items() if doc != echoed)
