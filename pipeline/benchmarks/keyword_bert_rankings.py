"""The keyword-BERT benchmark's rankers trained and scored on a machine without Java (a GPU machine), measured here.

BM25 needs Lucene; a lent GPU machine has torch and transformers but no Java. The ranking half of
pipeline/benchmarks/keyword_bert.py therefore splits in three steps over one folder R:

    # here, with Lucene: the BM25 candidates the rankers train on and rerank, exported
    python -m pipeline.benchmarks.keyword_bert --dataset lcqmc --ranking-queries 2000 --fusion --export-rankings R
    # there: each system and seed's ranker trained on R/train and its scores of R/test.json, R/tune.json written
    python -m pipeline.benchmarks.keyword_bert --dataset lcqmc --bert B --seeds 0 1 2 --device cuda --score-rankings R
    # here: Success@k, the dev-tuned fusion with BM25 and the paired tests, from R/scores/
    python -m pipeline.benchmarks.keyword_bert --dataset lcqmc --bert B --seeds 0 1 2 --ranking-queries 2000 \
        --fusion --rankings-from R --record

R/train is a dataset folder (topics, qrels, corpus, BM25 run; `run_texts: corpus`, pipeline/data/sets/local.py)
holding exactly what the ranker's recipe (`--ranking-train questions`) trains on: each <dataset>/questions-dev
query with BM25's top `--train-depth` (its own question excluded) and its paired question, so `negatives=bm25`
finds the run shipped and needs no index. R/test.json and R/tune.json are the rankings themselves (pairs, BM25
scores, qrels). The measures are computed here, where the rankings are built again from Lucene and must list the
same pairs in the same order as the exported ones (else an error says so).
"""
from __future__ import annotations

import json
from pathlib import Path

from pipeline.data.files import atomic_write
from pipeline.errors import ConfigError

SPLITS = ("test", "tune")


def export_rankings(args, folder: Path, ranking, tuning) -> None:
    """Write R/train (the ranker's training data), R/test.json and R/tune.json (`tuning`: None without --fusion)."""
    from pipeline.data.registry import get_dataset
    from pipeline.data.runs import Run, write_run
    from pipeline.data.topics import Topics, write_topics
    from pipeline.training.examples import _candidates

    questions = get_dataset(f"{args.dataset}/questions-dev")
    run = _candidates(questions, args.train_depth).cut(args.train_depth)
    topics, qrels = questions.topics(), questions.qrels()
    qids = [q for q in run.ranking if q in qrels]
    wanted = {d for q in qids for d, _ in run.ranking[q]} | {d for q in qids for d in qrels[q]}
    train = folder / "train"
    train.mkdir(parents=True, exist_ok=True)
    write_topics(Topics({q: topics[q] for q in qids}), train / "topics.tsv")
    with atomic_write(train / "qrels.txt") as out:
        out.writelines(f"{q} 0 {d} {label}\n" for q in qids for d, label in qrels[q].items())
    with atomic_write(train / "corpus.jsonl") as out:
        out.writelines(json.dumps({"id": doc["id"], "contents": doc["contents"]}, ensure_ascii=False) + "\n"
                       for doc in questions.docs() if doc["id"] in wanted)
    write_run(Run({q: run.ranking[q] for q in qids}, tag="bm25"), train / "run.trec")
    spec = {"name": f"{args.dataset}-questions-dev-bm25-top{args.train_depth}", "kind": "trec",
            "language": questions.language, "rel_level": questions.rel_level, "run_texts": "corpus",
            "description": f"{questions.name}: BM25's top {args.train_depth} (own question excluded) and the paired "
                           "question, exported by pipeline/benchmarks/keyword_bert_rankings.py",
            "files": {"topics": "topics.tsv", "qrels": "qrels.txt", "corpus": "corpus.jsonl", "run": "run.trec"}}
    with atomic_write(train / "dataset.yaml") as out:
        json.dump(spec, out, ensure_ascii=False, indent=2)  # JSON is YAML
    for split, chosen in zip(SPLITS, (ranking, tuning)):
        if chosen is not None:
            with atomic_write(folder / f"{split}.json") as out:
                json.dump({"pairs": [[p.qid, p.docid, p.query, p.text] for p in chosen.pairs], "bm25": chosen.bm25,
                           "qrels": chosen.qrels}, out, ensure_ascii=False)


def load_ranking(path: Path):
    """A `Ranking` (pipeline/benchmarks/keyword_bert.py) from an exported R/test.json or R/tune.json."""
    from pipeline.benchmarks.keyword_bert import Ranking
    from pipeline.rerank.pairs import Pair

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return Ranking([Pair(*row) for row in data["pairs"]], data["bm25"], data["qrels"])


def scores_path(folder: Path, name: str, seed: int) -> Path:
    return Path(folder) / "scores" / f"{name}-seed{seed}.json"


def score_rankings(args, folder: Path) -> None:
    """Train (or find cached) each system and seed's ranker on R/train and write its scores of R's rankings."""
    from pipeline.benchmarks.keyword_bert import recipe_of, scores_of
    from pipeline.rerank.checkpoint import load_checkpoint

    rankings = {split: load_ranking(folder / f"{split}.json") for split in SPLITS if (folder / f"{split}.json").is_file()}
    for name in args.systems:
        for seed in args.seeds:
            recipe = recipe_of(name, args, seed, ranking=True, ranking_data=str(folder / "train"))
            model = load_checkpoint(recipe.ensure_trained())
            scores = {split: scores_of(model, r.pairs, args.eval_batch_size, args.device) for split, r in rankings.items()}
            path = scores_path(folder, name, seed)
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(path) as out:
                json.dump({"recipe": recipe.key(), "bert": args.bert, **scores}, out)
            print(f"{name} seed {seed}: scores of {', '.join(scores)} -> {path}", flush=True)


def exported_scores(folder: Path, name: str, seed: int, rankings: dict) -> dict[str, list[float]]:
    """The scores of `name` and `seed` for each of `rankings` (split -> the Ranking built here), checked against the
    exported pairs: the same (query, candidate) pairs in the same order."""
    path = scores_path(folder, name, seed)
    if not path.is_file():
        raise ConfigError(f"{path} is missing: run --score-rankings {folder} for {name}, seed {seed}")
    scores = json.loads(path.read_text(encoding="utf-8"))
    for split, ranking in rankings.items():
        exported = [(row[0], row[1]) for row in json.loads((folder / f"{split}.json").read_text("utf-8"))["pairs"]]
        if exported != [(p.qid, p.docid) for p in ranking.pairs] or len(scores.get(split, ())) != len(exported):
            raise ConfigError(f"{folder}/{split}.json or its scores in {path} do not list this run's pairs: export "
                              "again with the same --dataset, --depth, --ranking-queries and --tune-queries")
    return {split: scores[split] for split in rankings}

