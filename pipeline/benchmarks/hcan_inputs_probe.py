"""How much of an answer-selection set HCAN's contextual inputs rank with no training at all.

HCAN's level-0 relevance matching (docs/models.md §1 eq. (3)) needs no parameters: with rm_similarity=cosine and
rm_softmax=raw, each query word's feature is its best cosine against the candidate's words, weighted by its IDF.
Scoring a pair by that IDF-weighted mean, on the inputs of `hcan(embeddings=contextual)` (the frozen BERT's states
of each sentence, a word the mean of its pieces; vocabulary and IDF from the training set, as a trained model's),
measures the signal the trained network starts from: when this parameter-free score ranks as well as the trained
HCAN or better, what the 93 training questions teach the network on top of the inputs is the limit, not the inputs.

    python -m pipeline.benchmarks.hcan_inputs_probe --train trecqa/train --dataset trecqa/raw-test \\
        --output runs/trecqa-hcan-contextual-rm0.trec
    irpipe eval --dataset trecqa/raw-test runs/trecqa-hcan-contextual-rm0.trec -m AP RR P@1

The run is written atomically (Run.write); `--static glove` scores the GloVe table's vectors the same way.
"""
from __future__ import annotations

import argparse
import sys

from pipeline.benchmarks import run_main


def probe_scores(train: str, dataset: str, embeddings: str = "contextual", batch: int = 256) -> dict:
    """qid -> docid -> the IDF-weighted mean over query words of their best cosine against the candidate's words."""
    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.rerank.models.hcan import HCAN, HCANConfig, relevance_matching
    from pipeline.rerank.pairs import pairs_of, scores_by_query

    train_set, test_set = get_dataset(train), get_dataset(dataset)
    train_topics, train_run = train_set.topics(), train_set.run()
    queries = [train_topics[q] for q in train_run.ranking]
    docs = [train_run.texts[d] for hits in train_run.ranking.values() for d, _ in hits]
    config = HCANConfig(embeddings=embeddings, rm_softmax="raw", rm_similarity="cosine", rm_only=True)
    model = HCAN.from_training_data(config, queries, docs).eval()
    c = model.config
    run = test_set.run()
    pairs = pairs_of(test_set.topics(), run, run.texts)
    scores = []
    with torch.no_grad():
        for start in range(0, len(pairs), batch):
            t = model.prepare(pairs[start:start + batch]).tensors
            qmask, cmask = t["query_ids"] != 0, t["doc_ids"] != 0
            uq = model.embed(t["query_ids"], t.get("query_pieces"), t.get("query_piece_word"))     # (B, n, E)
            uc = model.embed(t["doc_ids"], t.get("doc_pieces"), t.get("doc_piece_word"))           # (B, m, E)
            weights = t["query_idf"][:, 0]                                                         # (B, n)
            rm = relevance_matching(uq, uc, qmask, cmask, weights, c)                              # (B, 2L)
            best = rm[:, :c.max_query_length].sum(1) / weights.sum(1).clamp(min=1e-9)             # max part
            scores += best.tolist()
    return scores_by_query(pairs, scores, run.ranking)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.benchmarks.hcan_inputs_probe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", default="trecqa/train", help="vocabulary and IDF from this set (a trained model's)")
    parser.add_argument("--dataset", default="trecqa/raw-test", help="the set whose candidates are scored")
    parser.add_argument("--static", metavar="TABLE", help="a static table (glove, bert, ...) instead of contextual")
    parser.add_argument("--output", required=True, help="the run file to write (TREC)")
    args = parser.parse_args(argv)
    from pipeline.data.runs import Run

    scores = probe_scores(args.train, args.dataset, args.static or "contextual")
    Run.from_scores(scores, tag="hcan-rm0-probe").write(args.output)
    print(f"wrote {args.output} ({sum(map(len, scores.values()))} pairs, {len(scores)} queries)")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
