"""The one batched inference path (pipeline/rerank/batching.py): batches cut by a token budget, scores back in input
order and within float noise of the old fixed-size batches, tokenisation on a background thread that changes no
number, a CUDA out-of-memory (injected by a model of this test's own) halving the batch, the autocast switch, int8,
and the last BERT layer run for [CLS] alone."""
from __future__ import annotations

import logging
import random

import pytest
import torch

from pipeline.errors import ConfigError
from pipeline.rerank.batching import batch_cuts, batch_limits, group_cuts, group_order
from pipeline.rerank.model import Batch, RerankModel
from pipeline.rerank.models.biencoder import BiEncoder, BiEncoderConfig
from pipeline.rerank.models.kwbert import KeywordBERT, KeywordBERTConfig
from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
from pipeline.rerank.pairs import Pair, pairs_of
from pipeline.rerank.scoring import check_amp, predict, quantized, resolve_amp, scoring_batches
from pipeline.rerank.store import encode_texts

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def _spans(cuts) -> list[tuple[int, int]]:
    return [(cut.start, cut.stop) for cut in cuts]


def test_batches_are_cut_by_count_and_by_padded_positions():
    lengths = [10, 8, 8, 5, 5, 5, 2]  # longest first
    # budget 20: 2 x 10 fits (3 x 10 not); 2 x 8 (3 x 8 = 24 not); 3 x 5 = 15 (the cap of 3 ends it)
    assert _spans(batch_cuts(lengths, batch_size=3, batch_tokens=20)) == [(0, 2), (2, 4), (4, 7)]
    assert _spans(batch_cuts(lengths, batch_size=3, batch_tokens=0)) == [(0, 3), (3, 6), (6, 7)]  # count only
    assert _spans(batch_cuts([30, 9, 2], batch_size=8, batch_tokens=20)) == [(0, 1), (1, 3)]  # 30 > 20: alone
    assert _spans(batch_cuts([], 4, 10)) == []
    assert batch_limits("cpu") == (64, 2048) and batch_limits("cuda", None, 0) == (512, 0)  # device defaults
    assert group_order([0] * 4, [3, 7, 3, 9]) == [3, 1, 0, 2]  # longest first, ties in input order


def test_cutting_again_from_a_batch_boundary_gives_the_same_batches():
    """What the ray engine relies on: a shard of whole batches, cut again on its worker, is cut the same way."""
    rng = random.Random(0)
    lengths = sorted((rng.randint(3, 300) for _ in range(500)), reverse=True)
    cuts = _spans(batch_cuts(lengths, 16, 1024))
    for start, _ in cuts[::7]:
        again = [(a + start, b + start) for a, b in _spans(batch_cuts(lengths[start:], 16, 1024))]
        assert again == [span for span in cuts if span[0] >= start]


def test_no_batch_mixes_two_groups_and_a_groups_batches_are_the_same_whatever_comes_beside_it():
    groups, lengths = ["a", "b", "a", "c", "b", "a"], [3, 9, 5, 2, 4, 5]
    order = group_order(groups, lengths)
    assert order == [2, 5, 0, 1, 4, 3]  # a's (longest first, ties in input order), then b's, then c's
    cuts = group_cuts([groups[i] for i in order], [lengths[i] for i in order], batch_size=2, batch_tokens=0)
    assert [[order[i] for i in range(cut.start, cut.stop)] for cut in cuts] == [[2, 5], [0], [1, 4], [3]]
    rng = random.Random(1)
    a_sizes = [rng.randint(1, 30) for _ in range(15)]
    alone = [("a", size) for size in a_sizes]
    for _ in range(20):  # other groups' items inserted anywhere (a's own order kept), or none
        mixed = list(alone)
        for _ in range(rng.randint(0, 40)):
            mixed.insert(rng.randint(0, len(mixed)), (rng.choice("bc"), rng.randint(1, 30)))
        assert batches_of("a", mixed) == batches_of("a", alone)


def batches_of(group: str, items: list[tuple[str, int]]) -> list[list[int]]:
    """The sizes in each batch of `group`'s items (items: (group, size) in input order; 4 items, 40 positions)."""
    groups, sizes = [g for g, _ in items], [size for _, size in items]
    order = group_order(groups, sizes)
    cuts = group_cuts([groups[i] for i in order], [sizes[i] for i in order], 4, 40)
    return [[sizes[order[i]] for i in range(cut.start, cut.stop)] for cut in cuts if groups[order[cut.start]] == group]


def test_predicts_batches_hold_one_query_each(monobert, qa_pairs):
    order, cuts = scoring_batches(monobert, qa_pairs, batch_size=64, batch_tokens=0)
    assert sorted(order) == list(range(len(qa_pairs)))
    for cut in cuts:
        assert len({qa_pairs[i].qid for i in order[cut]}) == 1
    assert len(cuts) >= len({pair.qid for pair in qa_pairs})


@pytest.fixture(scope="module")
def monobert(tiny_bert) -> MonoBERT:
    torch.manual_seed(0)
    return MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=48)).eval()


@pytest.fixture(scope="module")
def qa_pairs(tiny_qa) -> list[Pair]:
    run = tiny_qa.run()
    return pairs_of(tiny_qa.topics(), run, run.texts)


def test_scores_come_back_in_input_order_and_match_the_old_fixed_batches(monobert, qa_pairs):
    new = predict(monobert, qa_pairs, batch_size=64, batch_tokens=200).scores  # several batches of ~10 pairs
    by_chars = sorted(range(len(qa_pairs)), key=lambda i: -(len(qa_pairs[i].query) + len(qa_pairs[i].text)))
    old = predict(monobert, qa_pairs, batch_size=64, batch_tokens=0, order=by_chars).scores  # the old batching
    alone = [predict(monobert, [pair], batch_size=1).scores[0] for pair in qa_pairs]      # no padding at all
    assert new == pytest.approx(old, abs=1e-5) and new == pytest.approx(alone, abs=1e-5)
    shuffled = list(range(len(qa_pairs)))
    random.Random(1).shuffle(shuffled)
    again = predict(monobert, [qa_pairs[i] for i in shuffled], batch_size=64, batch_tokens=200).scores
    assert [again[shuffled.index(i)] for i in range(len(qa_pairs))] == new  # the same batches, rows and kernels


def test_a_querys_batches_and_rows_do_not_depend_on_the_order_its_candidates_come_in(monobert, qa_pairs):
    def batches(pairs):
        order, cuts = scoring_batches(monobert, pairs, batch_size=3, batch_tokens=0)
        return [[(pairs[i].qid, pairs[i].docid) for i in order[cut]] for cut in cuts]

    lengths = monobert.input_lengths(qa_pairs)
    assert len(set(lengths)) < len(lengths)  # pairs of one length (ties), cut across batches of 3
    reversed_pairs = list(reversed(qa_pairs))
    assert sorted(batches(reversed_pairs)) == sorted(batches(qa_pairs))
    forward = predict(monobert, qa_pairs, batch_size=3, amp="none").scores
    assert predict(monobert, reversed_pairs, batch_size=3, amp="none").scores[::-1] == forward


def test_lengths_are_the_padded_word_pieces(monobert, qa_pairs):
    batch = monobert.prepare(qa_pairs)
    assert monobert.input_lengths(qa_pairs) == batch.tensors["attention_mask"].sum(1).tolist()


def test_tokenising_on_a_background_thread_changes_no_score(monobert, qa_pairs):
    ahead = predict(monobert, qa_pairs, batch_size=4, prefetch=3)
    inline = predict(monobert, qa_pairs, batch_size=4, prefetch=0)
    assert ahead.scores == inline.scores and ahead.truncated == inline.truncated


class Fussy(RerankModel):
    """A model of our own that runs out of CUDA memory on a batch of more than `fits` pairs: score = text words."""

    name = "fussy"

    def __init__(self, fits: int):
        super().__init__(None)
        self.fits, self.sizes = fits, []
        self.weight = torch.nn.Parameter(torch.ones(1))

    def prepare(self, pairs: list[Pair]) -> Batch:
        return Batch({"words": torch.tensor([float(len(p.text.split())) for p in pairs])}, 0, pairs)

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        self.sizes.append(len(words))
        if len(words) > self.fits:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (injected)")
        return words * self.weight

    def score(self, output: torch.Tensor) -> torch.Tensor:
        return output


def test_out_of_memory_halves_the_batch_retries_and_says_so_once(caplog):
    pairs = [Pair("q", f"d{i}", "q", " ".join(["w"] * (1 + i % 7))) for i in range(20)]  # one query's
    model = Fussy(fits=3)
    with caplog.at_level(logging.WARNING, logger="irpipe"):
        scored = predict(model, pairs, batch_size=8)
    assert scored.scores == [1.0 + i % 7 for i in range(20)]          # every pair scored, in input order
    assert model.sizes[:3] == [8, 4, 2] and set(model.sizes[3:]) == {2}  # 8 -> 4 -> 2, and 2 from then on
    assert caplog.text.count("CUDA out of memory") == 1 and "halving it and retrying" in caplog.text
    with pytest.raises(torch.cuda.OutOfMemoryError):
        predict(Fussy(fits=0), pairs[:3], batch_size=8)                 # a pair alone that does not fit: fails


def test_autocast_is_bf16_on_cuda_by_default_and_none_turns_it_off(monobert, qa_pairs):
    assert resolve_amp("auto", CUDA) == "bf16" and resolve_amp(None, CUDA) == "bf16"
    assert resolve_amp("none", CUDA) is None and resolve_amp("fp16", CUDA) == "fp16"
    assert resolve_amp("auto", CPU) is None and resolve_amp("bf16", CPU) == "bf16"  # the CPU stays fp32
    assert check_amp(False) == "none"
    with pytest.raises(ConfigError, match="amp='fp8'; choose one of auto, none, bf16, fp16"):
        check_amp("fp8")
    exact = predict(monobert, qa_pairs).scores
    assert predict(monobert, qa_pairs, amp="none").scores == exact
    half = predict(monobert, qa_pairs, amp="bf16").scores
    assert half != exact and half == pytest.approx(exact, abs=0.05)     # autocast ran: bf16 noise, no more


def test_int8_quantises_the_linear_layers_for_the_cpu(tiny_bert, qa_pairs):
    torch.manual_seed(0)
    model = MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=48)).eval()
    exact = predict(model, qa_pairs).scores
    with pytest.raises(ConfigError, match="for the CPU"):
        quantized(model, "int8", CUDA)
    with pytest.raises(ConfigError, match="does not combine with amp=bf16"):
        quantized(model, "int8", CPU, amp="bf16")
    int8 = quantized(model, "int8", CPU)
    assert type(int8.classifier).__module__.startswith("torch.ao.nn.quantized.dynamic")
    scores = predict(int8, qa_pairs).scores
    assert scores != exact and scores == pytest.approx(exact, abs=0.05)


@pytest.mark.parametrize("make", [
    lambda bert: MonoBERT(MonoBERTConfig(bert=bert, max_length=48)),
    lambda bert: MonoBERT(MonoBERTConfig(bert=bert, max_length=48, pooling="cls")),
    lambda bert: KeywordBERT(KeywordBERTConfig(bert=bert, max_length=48)),
], ids=["monobert-pooler", "monobert-cls", "kwbert"])
def test_the_last_layer_for_cls_alone_gives_bert_s_own_numbers(make, tiny_bert, qa_pairs):
    torch.manual_seed(0)
    model = make(str(tiny_bert)).eval()
    assert model.cls_only
    fast = predict(model, qa_pairs, batch_size=7).scores
    model.cls_only = False  # BERT's own forward, every layer over every position
    assert fast == pytest.approx(predict(model, qa_pairs, batch_size=7).scores, abs=1e-5)


def test_encodings_come_back_in_input_order(tiny_bert):
    torch.manual_seed(0)
    model = BiEncoder(BiEncoderConfig(bert=str(tiny_bert))).eval()
    texts = [" ".join(["word"] * n) + f" {n}" for n in (3, 40, 1, 17, 9, 40, 2)]
    batched = encode_texts(model, texts, "document", batch_size=2, batch_tokens=60)
    with torch.inference_mode():
        alone = [model.encode_documents([text])[0] for text in texts]
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(batched, alone))
    queries = encode_texts(model, texts[:3], "query")
    assert [q.shape for q in queries] == [torch.Size([32])] * 3
    tied = [f"word word {n}" for n in range(1, 10)] + texts
    assert len(set(model.text_lengths(tied, "document"))) < len(set(tied))  # texts of one length, cut across batches
    batches, prepare_texts = [], model.prepare_texts
    model.prepare_texts = lambda chunk, side: batches.append(list(chunk)) or prepare_texts(chunk, side)
    forward = encode_texts(model, tied, "document", batch_size=2)
    forward_batches, batches[:] = list(batches), []
    backward = encode_texts(model, tied[::-1], "document", batch_size=2)[::-1]
    assert sorted(batches) == sorted(forward_batches)  # each text on the same row of the same batch
    assert all(torch.equal(a, b) for a, b in zip(forward, backward))


def test_the_ray_engine_shards_whole_batches():
    from pipeline.rerank.on_cluster import batch_shards

    order = list(range(10))
    cuts = [slice(0, 3), slice(3, 5), slice(5, 9), slice(9, 10)]
    assert batch_shards(order, cuts, 4) == [[0, 1, 2, 3, 4], [5, 6, 7, 8], [9]]


@pytest.mark.slow
def test_the_last_layer_for_cls_alone_gives_the_same_floats_on_any_thread_count(monobert, qa_pairs):
    """The ray engine's workers run other thread counts than the driver: their scores must still be bit-identical
    (SDPA's CPU kernel split a single query row by thread count: other floats at 1e-8, a flipped 6th decimal)."""
    threads = torch.get_num_threads()
    try:
        scores = []
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            scores.append(predict(monobert, qa_pairs * 4, batch_size=16, prefetch=0).scores)
    finally:
        torch.set_num_threads(threads)
    assert scores[0] == scores[1] == scores[2]
