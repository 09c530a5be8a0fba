"""A score is a function of (query, document, model), not of which other queries are scored with it.

Each pipeline is bound once to a collection and run on: all topics at once; each of two random halves of them; the
topics in reverse order; one query at a time. Every query's {docid: score} must be the same in all four, and the
same through each entry point: `ir.run`, `irpipe run` (its run file), and `IrpipeTransformer` under
pt.Experiment with batch_size=8 (its saved results).

Stages covered, on a collection of our own (12 queries, 40 documents, an Anserini index): bm25, bm25kw, keywords,
exclude, candidates, cutoff (`% k`), fusion (weighted, z-scored), rrf, `+` (the score sum), overlap(idf=true) over
the index's df and N and over a table of the shipped candidates' texts, overlap(idf=false), and every neural model
at a tiny size (a 2-layer BERT of width 32 or 8-wide embeddings): monobert, kwbert, biencoder, addax, hcan, mrnn.
With the mirror: the README's CACM pipeline (the index's statistics) and overlap(idf=true) on WikiQA (the table).

Every stage gives the same floats bit for bit, the neural models included, in fp32 and under bf16 autocast, on
one CPU with a fixed thread count. For a neural model that takes the batching rule of pipeline/rerank/batching.py:
a batch never mixes two queries' pairs (the same batch whichever queries come with it), a text remembered once per
model (MRNN's maps, HCAN's and MRNN's frozen BERT features) is computed alone, and a late-interaction model encodes
each query alone and the candidates it encodes on the fly in batches of one query's. Before that rule a pair's
score moved in the last bits of an fp32 with its batch (MKL picks its GEMM kernel by a batch's row count: 3e-8 on
the tiny monobert scored pair by pair, 6e-8 on HCAN and MRNN between random halves of the topics).
"""
from __future__ import annotations

import json
import math
import random

import pytest
import torch

from pipeline.binding import Binding
from pipeline.data.registry import get_dataset
from pipeline.data.runs import Run, read_run
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError
from pipeline.retrieve.keyword_dictionary import Keyword, KeywordDictionary
from pipeline.spec import parse
from support import irpipe, needs_shared_data, save_tiny_bert


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
def tiny_collections(tmp_path_factory):
    """(the collection, the same with shipped candidates, the collection's folder), with an IRPIPE_CACHE of their
    own (the index)."""
    root = tmp_path_factory.mktemp("metamorphic")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IRPIPE_CACHE", str(root / "cache"))
        folder = _write_collection(root / "tiny-trec", False)
        yield get_dataset(str(folder)), get_dataset(str(_write_collection(root / "tiny-shipped", True))), folder


@pytest.fixture(scope="module")
def dictionary(tmp_path_factory):
    """An English keyword dictionary (index terms: these words are their own Porter stems)."""
    entries = [Keyword(word, "nature", 2.0, 4, 10, 0, 10) for word in ("coal", "river", "tower", "grass")]
    return KeywordDictionary(entries, "en").save(tmp_path_factory.mktemp("dictionary") / "nature.tsv")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, tiny_collections):
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
    queries = list(tiny_collections[0].topics().queries.values())
    docs = [doc["contents"] for doc in tiny_collections[0].docs()]
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


def assert_same_scores(found: dict) -> None:
    """Each relation's scores equal the whole run's, bit for bit."""
    whole = found["all"]
    assert whole and any(whole.values())
    for relation, scores in found.items():
        assert scores == whole, f"{relation}: other scores than with all topics at once"


# -- every stage that runs no neural model: bit for bit -----------------------------------------------------------
PLAIN = ["bm25()", "bm25(k1=1.2, b=0.75, rm3=true, fb_docs=3, fb_terms=5)", "bm25kw(dict={dict}, weight=2)",
         "bm25() % 5", "bm25() >> exclude()", "bm25() % 8 >> overlap(idf=true)", "bm25() % 8 >> overlap(idf=false)",
         "bm25() % 8 >> keywords(dict={dict}) >> overlap()", "bm25() % 6 + bm25kw(dict={dict}) % 6",
         "rrf(bm25() % 6, bm25() % 6 >> overlap())",
         "fusion(bm25() % 6, bm25() % 6 >> overlap(), method=weighted, weights=[1, 2], norm=zscore)"]
SHIPPED = ["candidates()", "candidates() % 4", "overlap(idf=true)", "candidates() % 5 >> overlap()",
           "fusion(candidates(), overlap(), method=weighted, norm=zscore)"]


@pytest.mark.parametrize("spec", PLAIN)
def test_retrieval_and_plain_reranking_give_each_query_the_same_scores_bit_for_bit(spec, tiny_collections, dictionary):
    tiny = tiny_collections[0]
    stage = parse(spec.format(dict=dictionary)).bind(tiny)
    assert_same_scores(relations(stage, tiny.topics(), None))


@pytest.mark.parametrize("spec", SHIPPED)
def test_shipped_candidates_give_each_query_the_same_scores_bit_for_bit(spec, tiny_collections):
    shipped = tiny_collections[1]
    candidates = shipped.run()
    stage = parse(spec).bind(Binding(shipped, None, candidates))
    assert_same_scores(relations(stage, shipped.topics(), candidates))


def _by_hand(topics: Topics, run: Run, texts: dict[str, str], documents: list[str]) -> dict[str, dict[str, float]]:
    """IDF-weighted overlap as the formula says, N and df counted over `documents`."""
    from pipeline.rerank.overlap import words

    df = {w: sum(w in words(text) for text in documents) for text in documents for w in words(text)}
    idf = lambda word: math.log(len(documents) / df[word]) if df.get(word) else 0.0  # noqa: E731
    return {qid: {d: math.fsum(idf(w) for w in words(topics[qid]) & words(texts[d])) for d, _ in hits}
            for qid, hits in run.ranking.items()}


def test_overlap_takes_the_collections_idf_and_its_cache_key_names_which(tiny_collections):
    """The index's N and df (its 40 documents; each word here gives an index term no other word gives: `coal`, or
    `citi` of `city`), or the table of the distinct texts of every shipped candidate, as the formula
    says by hand; the stage's cache fingerprint names the source."""
    tiny, shipped, _ = tiny_collections
    retrieved = parse("bm25() % 8").bind(tiny)(tiny.topics())
    texts = {doc["id"]: doc["contents"] for doc in tiny.docs()}
    overlap = parse("overlap(idf=true)").bind(tiny)
    assert per_query(overlap(tiny.topics(), retrieved)) == _by_hand(tiny.topics(), retrieved, texts,
                                                                   list(texts.values()))
    assert "idf: the df and N of the index" in overlap.fingerprint()

    candidates = shipped.run()
    overlap = parse("overlap(idf=true)").bind(Binding(shipped, None, candidates))
    pool = list({candidates.texts[d] for hits in candidates.ranking.values() for d, _ in hits})
    some = _part(candidates, list(candidates.ranking)[:3])  # a few queries: the whole pool's IDF all the same
    assert per_query(overlap(shipped.topics(), some)) == _by_hand(shipped.topics(), some, candidates.texts, pool)
    assert f"idf: table over the {len(pool)} distinct candidate texts of tiny-shipped" in overlap.fingerprint()
    assert "idf" not in parse("overlap(idf=false)").bind(tiny).fingerprint()


def test_idf_overlap_without_a_collection_is_refused_at_bind():
    with pytest.raises(ConfigError, match=r"takes its IDF from a collection, and has none") as refused:
        parse("overlap(idf=true)").bind(None)
    assert refused.value.field == "idf"
    topics, run = Topics({"q": "coal mine"}), Run({"q": [("a", 1.0)]}, {"a": "a coal mine"})
    assert parse("overlap(idf=false)").bind(None)(topics, run).ranking == {"q": [("a", 2.0)]}


# -- every neural model at a tiny size, in fp32 and under bf16: bit for bit -----------------------------------------
NEURAL = {"monobert": "bm25() % 5 >> monobert({model})", "biencoder": "bm25() % 5 >> biencoder({model})",
          "addax": "bm25() % 5 >> addax({model})", "hcan": "bm25() % 5 >> hcan({model})",
          "mrnn": "bm25() % 5 >> mrnn({model})", "kwbert": "bm25() % 5 >> keywords(dict={dict}) >> kwbert({model})"}


@pytest.mark.slow
@pytest.mark.parametrize("name", NEURAL)
@pytest.mark.parametrize("amp", ["none", "bf16"], ids=["fp32", "bf16"])
def test_neural_models_give_each_query_the_same_scores_bit_for_bit(name, amp, tiny_collections, checkpoints,
                                                                    dictionary):
    tiny = tiny_collections[0]
    spec = NEURAL[name].format(model=f"ckpt={checkpoints[name]}, amp={amp}, threads=1", dict=dictionary)
    found = relations(parse(spec).bind(tiny), tiny.topics(), None)
    assert_same_scores(found)


# -- the entry points: ir.run, `irpipe run`, IrpipeTransformer under pt.Experiment(batch_size=8) --------------------
def through_entry_points(spec: str, dataset, folder, capsys) -> dict[str, dict]:
    """{entry point: qid -> docid -> score} of `spec` on `dataset` (a folder or a name) through each entry point;
    `irpipe run`'s run file keeps 6 decimals of a score, so it is compared with ir.run's run written the same way
    (Run.write)."""
    pt = pytest.importorskip("pyterrier", reason='PyTerrier is the optional extra: pip install -e ".[pyterrier]"')
    import pipeline as ir
    from pipeline.evaluation import parse_measures
    from pipeline.pyterrier import IrpipeTransformer, qrels_frame

    data = get_dataset(str(dataset))
    whole = ir.run(spec, data, cache=False)
    code, _, err = irpipe(capsys, "run", spec, "--dataset", dataset, "--output", folder / "cli.trec", "--no-cache")
    assert code == 0, err
    assert read_run(folder / "cli.trec").ranking == read_run(whole.write(folder / "api.trec")).ranking
    transformer = IrpipeTransformer(spec, dataset=data, cache=False)
    pt.Experiment([transformer], data.topics().to_frame(), qrels_frame(data.qrels()),
                  eval_metrics=parse_measures(["AP"], data.rel_level), names=["batched"], batch_size=8,
                  save_dir=str(folder), save_mode="overwrite")
    saved = pt.io.read_results(str(folder / "batched.res.gz"))
    experiment = {qid: dict(zip(hits.docno, hits.score.astype(float))) for qid, hits in saved.groupby("qid")}
    return {"ir.run": per_query(whole), "pt.Experiment(batch_size=8)": experiment}


@pytest.mark.slow
@pytest.mark.parametrize("spec", [
    "fusion(bm25() % 8, bm25() % 8 >> overlap(), method=weighted, norm=zscore)",
    "bm25() % 5 >> monobert({monobert}, amp=none, threads=1)",
    "bm25() % 5 >> addax({addax}, amp=none, threads=1)"], ids=["overlap", "monobert", "addax"])
def test_every_entry_point_gives_each_query_the_same_scores(spec, tiny_collections, checkpoints, tmp_path, capsys):
    spec = spec.format(monobert=f"ckpt={checkpoints['monobert']}", addax=f"ckpt={checkpoints['addax']}")
    found = through_entry_points(spec, tiny_collections[2], tmp_path, capsys)
    assert_same_scores({"all": found["ir.run"], **found})


@pytest.mark.slow
@needs_shared_data
@pytest.mark.parametrize("dataset, spec", [("cacm", "bm25(k1=0.9, b=0.4) % 100 >> overlap(idf=true)"),
                                           ("wikiqa/test", "overlap(idf=true)")], ids=["cacm-index", "wikiqa-table"])
def test_the_readme_pipeline_and_the_answer_selection_floor_do_not_depend_on_the_batch(dataset, spec, tmp_path,
                                                                                        capsys):
    """CACM (IDF from the index): the README's first pipeline scored AP 0.2249 whole and 0.2206 through
    pt.Experiment with batch_size=8, query 1's top score 13.70 or 10.97 by its neighbours; WikiQA (IDF from the
    table of its candidates): the pinned whole-run numbers (eval/wikiqa-test-idf-overlap.yaml)."""
    data = get_dataset(dataset)
    candidates = data.run() if "run" in data.provides else None
    stage = parse(spec).bind(Binding(data, None, candidates))
    assert_same_scores(relations(stage, data.topics(), candidates))
    found = through_entry_points(spec, dataset, tmp_path, capsys)
    assert_same_scores({"all": found["ir.run"], **found})
