"""A score is a function of (query, document, model), not of which other queries are scored with it (issue 60).

Each pipeline is bound once to a collection and run on: all topics at once; each of two random halves of them; the
topics in reverse order; one query at a time. Every query's {docid: score} must be the same in all four, and the
same through each entry point: `ir.run`, `irpipe run` (its run file), and `IrpipeTransformer` under
pt.Experiment with batch_size=8 (its saved results).

Stages covered, on a collection of our own (12 queries, 40 documents, an Anserini index): bm25, bm25kw, keywords,
exclude, candidates, cutoff (`% k`), fusion (weighted, z-scored), rrf, `+` (the score sum), overlap(idf=true) over
the index's df and N and over a table of the shipped candidates' texts, overlap(idf=false), and every neural model
at a tiny size (a 2-layer BERT of width 32 or 8-wide embeddings): monobert, kwbert, biencoder, addax, hcan, mrnn.
With the mirror: the README's CACM pipeline (the index's statistics) and overlap(idf=true) on WikiQA (the table).

Bounds. Every stage that does not run a neural model gives the same floats bit for bit. A neural model does up to
`FP32_BOUND` in fp32 on one CPU: its pairs are scored in length-sorted batches that mix queries
(pipeline/rerank/batching.py), and MKL picks its GEMM kernel by the row count of a batch, so the same pair's
score moves in the last bits of an fp32 (measured 3e-8 on the tiny monobert: 26 of 60 pairs differ, scored alone
against all at once). Under bf16 autocast (`amp=bf16`) each matmul rounds to bf16's 8-bit mantissa, so such a
last-bit difference can turn into one bf16 step (2^-8 relative) of an activation, carried through the layers:
`BF16_BOUND`.
"""
from __future__ import annotations

import json
import random

import pytest
import torch

from pipeline.binding import Binding
from pipeline.data.registry import get_dataset
from pipeline.data.runs import Run, read_run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.experiment import run_pipeline
from pipeline.retrieve.keyword_dictionary import Keyword, KeywordDictionary
from pipeline.spec import parse
from support import irpipe, needs_shared_data, save_tiny_bert

FP32_BOUND = 1e-6   # |score difference| of a neural model's pair between two batchings, fp32
BF16_BOUND = 0.05   # the same under bf16 autocast (scores of the tiny models are within +-2)

WORDS = ("sky blue cloud rain river sea fish boat coal mine dark deep train station late city green grass field "
         "spring stone wall tower bridge").split()


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(low, high)))


def _write_collection(folder, with_run: bool):
    """12 topics, 40 documents, qrels; `with_run`: a shipped candidate run whose texts are the corpus's."""
    rng = random.Random(60)
    docs = {f"d{i:02d}": _text(rng, 4, 24) for i in range(40)}
    topics = {f"q{i:02d}": _text(rng, 2, 4) for i in range(12)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "topics.tsv").write_text("".join(f"{qid}\t{text}\n" for qid, text in topics.items()))
    (folder / "qrels.txt").write_text("".join(f"{qid} 0 d{(3 * i) % 40:02d} 1\n" for i, qid in enumerate(topics)))
    (folder / "docs.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in docs.items()))
    files = "topics: topics.tsv, qrels: qrels.txt, corpus: docs.jsonl"
    if with_run:
        lines = [f"{qid} Q0 d{(5 * i + j) % 40:02d} {j + 1} {10 - j} shipped\n" for i, qid in enumerate(topics)
                 for j in range(8)]
        (folder / "run.trec").write_text("".join(lines))
        files += ", run: run.trec"
    (folder / "dataset.yaml").write_text(f"name: {folder.name}\n" + ("run_texts: corpus\n" if with_run else "")
                                         + f"files: {{{files}}}\n")
    return folder


@pytest.fixture(scope="module")
def collections(tmp_path_factory):
    """(the collection, the same with shipped candidates), with IRPIPE_CACHE of their own (the index)."""
    root = tmp_path_factory.mktemp("metamorphic")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IRPIPE_CACHE", str(root / "cache"))
        yield (get_dataset(str(_write_collection(root / "tiny-trec", False))),
               get_dataset(str(_write_collection(root / "tiny-shipped", True))))


@pytest.fixture(scope="module")
def dictionary(tmp_path_factory):
    """An English keyword dictionary (index terms: these words are their own Porter stems)."""
    entries = [Keyword(word, "nature", 2.0, 4, 10, 0, 10) for word in ("coal", "river", "tower", "grass")]
    return KeywordDictionary(entries, "en").save(tmp_path_factory.mktemp("dictionary") / "nature.tsv")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, collections):
    """name -> a checkpoint folder of each neural model at a tiny size (seeded)."""
    from pipeline.rerank.checkpoint import save_checkpoint
    from pipeline.rerank.models.addax import ADDAX, ADDAXConfig
    from pipeline.rerank.models.biencoder import BiEncoder, BiEncoderConfig
    from pipeline.rerank.models.hcan import HCAN, HCANConfig
    from pipeline.rerank.models.kwbert import KeywordBERT, KeywordBERTConfig
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
    from pipeline.rerank.models.mrnn import MRNN, MRNNConfig

    root = tmp_path_factory.mktemp("tiny-models")
    bert = str(save_tiny_bert(root / "bert", layers=2))
    queries = list(collections[0].topics().queries.values())
    docs = [doc["contents"] for doc in collections[0].docs()]
    makers = {
        "monobert": lambda: MonoBERT(MonoBERTConfig(bert=bert, max_length=48)),
        "kwbert": lambda: KeywordBERT(KeywordBERTConfig(bert=bert, max_length=48)),
        "biencoder": lambda: BiEncoder(BiEncoderConfig(bert=bert)),
        "addax": lambda: ADDAX(ADDAXConfig(bert=bert, max_doc_length=32)),
        "hcan": lambda: HCAN.from_training_data(HCANConfig(embeddings="random", embedding_dim=8, filters=6,
                                                           sm_hidden=10, max_query_length=12, max_doc_length=32,
                                                           dropout=0.0), queries, docs),
        "mrnn": lambda: MRNN.from_training_data(MRNNConfig(embeddings="random", embedding_dim=8, filters=6,
                                                           max_query_length=12, max_doc_length=32), queries, docs),
    }
    folders = {}
    for name, make in makers.items():
        torch.manual_seed(0)
        folders[name] = str(save_checkpoint(make().eval(), root / name))
    return folders


# -- the relations ---------------------------------------------------------------------------------------------
def per_query(run: Run) -> dict[str, dict[str, float]]:
    return {qid: dict(hits) for qid, hits in run.ranking.items()}


def _part(run: Run | None, qids) -> Run | None:
    """The candidates of `qids` (a pipeline that starts with a reranker gets its queries' candidates only)."""
    if run is None:
        return None
    ranking = {qid: run.ranking[qid] for qid in qids if qid in run.ranking}
    return Run(ranking, run.texts, run.tag, run.doc_fields)


def relations(stage, topics: Topics, candidates: Run | None) -> dict[str, dict]:
    """{relation: qid -> docid -> score} of the bound `stage` on all topics, two random halves, the topics
    reversed, and one query at a time."""
    qids = list(topics.queries)
    shuffled = random.Random(0).sample(qids, len(qids))

    def on(parts) -> dict:
        scores = {}
        for part in parts:
            scores.update(per_query(stage(topics.subset(part), _part(candidates, part))))
        return scores

    return {"all": on([qids]), "halves": on([shuffled[:len(qids) // 2], shuffled[len(qids) // 2:]]),
            "reversed": on([qids[::-1]]), "one at a time": on([[qid] for qid in qids])}


def largest_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys() and all(a[q].keys() == b[q].keys() for q in a)
    return max((abs(a[q][d] - b[q][d]) for q in a for d in a[q]), default=0.0)


def assert_same_scores(found: dict, bound: float = 0.0) -> None:
    """Each relation's scores equal the whole run's (bit for bit when `bound` is 0, else within it)."""
    whole = found["all"]
    assert whole and any(whole.values())
    for relation, scores in found.items():
        if bound == 0.0:
            assert scores == whole, f"{relation}: other scores than with all topics at once"
        else:
            assert largest_difference(scores, whole) <= bound, relation


# -- every stage that runs no neural model: bit for bit -----------------------------------------------------------
PLAIN = ["bm25()", "bm25(k1=1.2, b=0.75, rm3=true, fb_docs=3, fb_terms=5)", "bm25kw(dict={dict}, weight=2)",
         "bm25() % 5", "bm25() >> exclude()", "bm25() % 8 >> overlap(idf=true)", "bm25() % 8 >> overlap(idf=false)",
         "bm25() % 8 >> keywords(dict={dict}) >> overlap()", "bm25() % 6 + bm25kw(dict={dict}) % 6",
         "rrf(bm25() % 6, bm25() % 6 >> overlap())",
         "fusion(bm25() % 6, bm25() % 6 >> overlap(), method=weighted, weights=[1, 2], norm=zscore)"]
SHIPPED = ["candidates()", "candidates() % 4", "overlap(idf=true)", "candidates() % 5 >> overlap()",
           "fusion(candidates(), overlap(), method=weighted, norm=zscore)"]


@pytest.mark.parametrize("spec", PLAIN)
def test_retrieval_and_plain_reranking_give_each_query_the_same_scores_bit_for_bit(spec, collections, dictionary):
    tiny = collections[0]
    stage = parse(spec.format(dict=dictionary)).bind(tiny)
    assert_same_scores(relations(stage, tiny.topics(), None))


@pytest.mark.parametrize("spec", SHIPPED)
def test_shipped_candidates_give_each_query_the_same_scores_bit_for_bit(spec, collections):
    shipped = collections[1]
    candidates = shipped.run()
    stage = parse(spec).bind(Binding(shipped, None, candidates))
    assert_same_scores(relations(stage, shipped.topics(), candidates))


# -- every neural model at a tiny size: within FP32_BOUND, and BF16_BOUND under bf16 --------------------------------
NEURAL = {"monobert": "bm25() % 5 >> monobert({model})", "biencoder": "bm25() % 5 >> biencoder({model})",
          "addax": "bm25() % 5 >> addax({model})", "hcan": "bm25() % 5 >> hcan({model})",
          "mrnn": "bm25() % 5 >> mrnn({model})", "kwbert": "bm25() % 5 >> keywords(dict={dict}) >> kwbert({model})"}


@pytest.mark.slow
@pytest.mark.parametrize("name", NEURAL)
@pytest.mark.parametrize("amp, bound", [("none", FP32_BOUND), ("bf16", BF16_BOUND)], ids=["fp32", "bf16"])
def test_neural_models_give_each_query_the_same_scores_within_the_bound(name, amp, bound, collections, checkpoints,
                                                                         dictionary):
    tiny = collections[0]
    spec = NEURAL[name].format(model=f"ckpt={checkpoints[name]}, amp={amp}, threads=1", dict=dictionary)
    found = relations(parse(spec).bind(tiny), tiny.topics(), None)
    print(name, amp, {r: largest_difference(s, found["all"]) for r, s in found.items()},
          {r: s == found["all"] for r, s in found.items()})
    assert_same_scores(found, bound)
