"""Does a reranker's score follow lexical overlap on lcqmc/questions-test, or the candidate's length? For each query of
a run file: the Pearson correlation of the run's scores with the character Jaccard overlap of query and candidate and
with the candidate's length in characters, and the mean score of the paired (relevant) question against the others.
(A pair classifier trained on LCQMC's labelled dev pairs follows the length: eval/KEYWORD_BERT.md section 4.)

    python bench/lcqmc/score_overlap.py runs/lcqmc-questions-test-kwbert.trec [DATASET]

(the run from `irpipe run <spec> --dataset lcqmc/questions-test --output FILE`).
"""
from __future__ import annotations

import statistics
import sys

from pipeline.data.registry import get_dataset
from pipeline.data.runs import read_run


def jaccard(a: str, b: str) -> float:
    a, b = set(a), set(b)
    return len(a & b) / len(a | b)


def main(run_file: str, dataset_name: str = "lcqmc/questions-test") -> None:
    dataset = get_dataset(dataset_name)
    texts = {doc["id"]: doc["contents"] for doc in dataset.docs()}
    topics, qrels, run = dataset.topics(), dataset.qrels(), read_run(run_file)
    correlations, by_length, relevant, others = [], [], [], []
    for qid, hits in run.ranking.items():
        overlaps = [jaccard(topics[qid], texts[docid]) for docid, _ in hits]
        lengths = [len(texts[docid]) for docid, _ in hits]
        scores = [score for _, score in hits]
        if len(hits) > 2 and len(set(overlaps)) > 1 and len(set(scores)) > 1:
            correlations.append(statistics.correlation(overlaps, scores))
        if len(hits) > 2 and len(set(lengths)) > 1 and len(set(scores)) > 1:
            by_length.append(statistics.correlation(lengths, scores))
        for docid, score in hits:
            (relevant if qrels.get(qid, {}).get(docid, 0) > 0 else others).append(score)
    print(f"{run_file}: {len(run)} queries")
    print(f"  mean per-query correlation of score with character Jaccard overlap: {statistics.mean(correlations):+.3f}")
    print(f"  mean per-query correlation of score with the candidate's length: {statistics.mean(by_length):+.3f}")
    print(f"  mean score, paired question {statistics.mean(relevant):+.3f} vs the other candidates "
          f"{statistics.mean(others):+.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
