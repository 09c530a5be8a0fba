"""How much of an answer-selection set HCAN's contextual inputs rank with no training at all.

HCAN's level-0 relevance matching (docs/models.md §1 eq. (3)) needs no parameters: with rm_similarity=cosine and
rm_softmax=raw, each query word's feature is its best cosine against the candidate's words, weighted by its IDF.
Scoring a pair by that IDF-weighted mean, on the inputs of `hcan(embeddings=contextual)` (the frozen BERT's states
of each sentence, a word the mean of its pieces; vocabulary and IDF from the training set, as a trained model's),
measures the signal the trained network starts from: when this parameter-free score ranks as well as the trained
HCAN or better, what the 93 training questions teach the network on top of the inputs is the limit, not the inputs.

    python -m bench.hcan_inputs_probe --train trecqa/train --dataset trecqa/raw-test \\
        --output runs/trecqa-hcan-contextual-rm0.trec
    irpipe eval --dataset trecqa/raw-test runs/trecqa-hcan-contextual-rm0.trec -m AP RR P@1

The run is written atomically (Run.write); `--static glove` scores the GloVe table's vectors the same way.
A set without shipped candidates (SQuAD) is scored on a run's (`--run FILE`, texts from the set's documents), its
vocabulary and IDF from the training set's questions and documents; `--queries N` keeps the run's first N queries:

    python -m bench.hcan_inputs_probe --train squad-v1.1/dev-articles-a-train \
        --dataset squad-v1.1/dev-articles-b --run runs/squad-dev-articles-b-bm25.trec --max-doc-length 256 \
        --output runs/squad-dev-articles-b-hcan-contextual-rm0.trec
"""
from __future__ import annotations

import argparse
import sys

from bench import positive, run_main
from bench._candidates import add_candidate_arguments, candidates, training_texts


def probe_scores(train: str, dataset: str, embeddings: str = "contextual", batch: int = 256, run: str | None = None,
                 queries: int | None = None, max_doc_length: int = 100, uniform: bool = False) -> dict:
    """qid -> docid -> the IDF-weighted mean over query words of their best cosine against the candidate's words
    (`uniform`: the plain mean, every real query word weighing 1)."""
    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.rerank.models.hcan import HCAN, HCANConfig
    from pipeline.rerank.models.hcan.network import relevance_matching
    from pipeline.rerank.pairs import pairs_of, scores_by_query

    test_set = get_dataset(dataset)
    config = HCANConfig(embeddings=embeddings, rm_softmax="raw", rm_similarity="cosine", rm_only=True,
                        max_doc_length=max_doc_length)
    model = HCAN.from_training_data(config, *training_texts(get_dataset(train))).eval()
    c = model.config
    run = candidates(test_set, run, queries)
    pairs = pairs_of(test_set.topics(), run, run.texts)
    scores = []
    with torch.no_grad():
        for start in range(0, len(pairs), batch):
            t = model.prepare(pairs[start:start + batch]).tensors
            qmask, cmask = t["query_ids"] != 0, t["doc_ids"] != 0
            uq = model.embed(t["query_ids"], t.get("query_pieces"), t.get("query_piece_word"))     # (B, n, E)
            uc = model.embed(t["doc_ids"], t.get("doc_pieces"), t.get("doc_piece_word"))           # (B, m, E)
            weights = t["query_idf"][:, 0]                                                         # (B, n)
            if uniform:
                weights = qmask.to(weights.dtype)
            rm = relevance_matching(uq, uc, qmask, cmask, weights, c)                              # (B, 2L)
            best = rm[:, :c.max_query_length].sum(1) / weights.sum(1).clamp(min=1e-9)             # max part
            scores += best.tolist()
    return scores_by_query(pairs, scores, run.ranking)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hcan_inputs_probe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_candidate_arguments(parser, "trecqa/raw-test")
    parser.add_argument("--static", metavar="TABLE", help="a static table (glove, bert, ...) instead of contextual")
    parser.add_argument("--max-doc-length", type=positive, default=100, metavar="N", help="words kept a candidate")
    parser.add_argument("--uniform", action="store_true", help="every query word weighs 1 (no IDF)")
    parser.add_argument("--output", required=True, help="the run file to write (TREC)")
    args = parser.parse_args(argv)
    from pipeline.data.runs import Run

    scores = probe_scores(args.train, args.dataset, args.static or "contextual", run=args.run, queries=args.queries,
                          max_doc_length=args.max_doc_length, uniform=args.uniform)
    Run.from_scores(scores, tag="hcan-rm0-probe").write(args.output)
    print(f"wrote {args.output} ({sum(map(len, scores.values()))} pairs, {len(scores)} queries)")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
