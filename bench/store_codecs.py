"""Benchmark: the ADDAX store's codecs side by side -- bytes per passage, projected MS MARCO size, scoring
agreement with fp16 and effectiveness -- with the identity-start ADDAX (no training).

    python -m bench.store_codecs [--dataset wikiqa/test] [--threads 1] [--codecs ...] [--record [NAME]]
    python -m bench.store_codecs --dataset dl19-passage --max-doc-length 180 --codecs fp16 int8 \
        residual2 residual1 residual2-128 residual1-256 --record store-codecs-dl19        # and dl20-passage

The dataset's shipped candidates are encoded once (BERT's token rows, float32); each codec's store is then written
through the store's own path (`write_encoded`: the residual codebook trained on a sample of those rows, every row
compressed, checksums in the manifest) and read back through `EncodingStore` (decoded on the fly) by
`score_late_interaction`, as `irpipe rerank --store` does. The model is ADDAX with `init=identity` (MAGS the
identity, the denoiser a sign projection, seed 0): it ranks with no training (eval/wikiqa-addax-identity.yaml is the
trained one).
- fp32 (the exact rows), fp16, int8, residual2, residual1, and residual2-128 / residual1-256 (the residual's 128 /
  256 principal components, 34 bytes a row either): ADDAX's full head from the store's rows.
- no_mags sign codes: the `no_mags` ablation with `codes=sign` keeps no rows at all: its document codes sgn(B) of
  eq. (8) do not depend on the query, so they are packed (1 bit per code dimension, `hash_bits` = 300 -> 38 bytes
  a row), unpacked and scored by MaxSim against the query's tanh(W_q U_Q) (eqs. (10)-(11)); a different model from
  the full head, so its agreement is with its own scores from fp16 rows.
Agreement: per query Kendall's tau between the codec's and fp16's scores (mean over queries), the largest score
difference, and the share of queries whose top document is the same. Effectiveness: nDCG@10, AP and RR@10 at the
dataset's relevance level. Speed: warm pairs/s of `score_late_interaction` from each store (1 thread).
Centroid density: the default k (ColBERTv2's rule on the sample's rows, at most 2^16 for 2-byte ids) leaves DL19's
374k rows about 91 rows a centroid, where MS MARCO's ~770M rows at the 2^16 cap leave ~11,700: a small collection's
residuals are smaller than MS MARCO's would be. `--centroids K` sets k, e.g. to MS MARCO's density (DL19: 32).
Projection: MS MARCO passages are longer than the dataset's; the rows per passage are measured on DL19's shipped
MS MARCO candidates at L_D = 180 (docs/models.md §3), times each codec's row bytes, plus the measured .ids bytes a
passage and the codebook, over 8,841,823 passages.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench import machine, record, record_name, rounded, run_main

MSMARCO_PASSAGES = 8_841_823
CODECS = ("fp32", "fp16", "int8", "residual2", "residual1", "residual2-128", "residual1-256")
MEASURES = ["nDCG@10", "AP", "RR@10"]
REFERENCES = {  # /work/shared/docs/REFERENCES.md
    "addax_bert_base_wikiqa_test_trained": "MAP 0.8250, MRR 0.8338 (paper; the head here is untrained)",
    "colbert_v1_msmarco_index": "286 GiB fp32, 143-154 GiB fp16, 27 GiB at 24 dims (Khattab & Zaharia 2020, Table 4)",
    "colbertv2_residual_2bit": "36 bytes per 128-d token (32 B residual + 4 B centroid id)"}


def agreement(scores: dict[str, dict[str, float]], reference: dict[str, dict[str, float]]) -> dict:
    from scipy.stats import kendalltau

    taus, top, gap = [], 0, 0.0
    for qid, ref in reference.items():
        docids = list(ref)
        a, b = [scores[qid][d] for d in docids], [ref[d] for d in docids]
        gap = max(gap, max(abs(x - y) for x, y in zip(a, b)))
        top += max(docids, key=scores[qid].get) == max(docids, key=ref.get)
        if len(docids) > 1:
            tau = kendalltau(a, b).statistic
            taus.append(1.0 if tau != tau else tau)  # constant scores on both sides: the same order
    return {"kendall_tau": round(sum(taus) / len(taus), 4), "max_abs_diff": round(gap, 4),
            "top1_same": round(top / len(reference), 4)}


def sign_code_scores(model, pairs, rows: dict, batch: int = 256) -> tuple[list[float], float]:
    """The no_mags model's scores from packed sign codes of each document's rows; and the code bytes a row."""
    import numpy as np
    import torch

    from pipeline.rerank.models.addax import maxsim
    from pipeline.rerank.store import encode_texts

    with torch.inference_mode():
        packed = {d: np.packbits((model.denoiser.encoder(r) > 0).numpy(), axis=1) for d, r in rows.items()}  # (8)
        bits = model.config.hash_bits
        queries = list(dict.fromkeys(p.query for p in pairs))
        encoded = dict(zip(queries, encode_texts(model, queries, "query")))
        scores = []
        for pair in pairs:
            codes = torch.from_numpy(np.unpackbits(packed[pair.docid], axis=1, count=bits)).float() * 2 - 1  # +-1
            query = torch.tanh(model.query_projection(encoded[pair.query]))                           # (10)
            scores.append(float(maxsim(query[None], torch.ones(1, len(query), dtype=torch.bool), codes[None],
                                       torch.ones(1, len(codes), dtype=torch.bool))[0]))             # (11)
    return scores, next(iter(packed.values())).shape[1]


def bench(dataset: str, threads: int, batch_size: int, max_doc_length: int, codec_sample: int,
          projection_dataset: str, codecs: tuple[str, ...] = CODECS, centroids: int | None = None) -> dict:
    import torch

    from pipeline.data.registry import get_dataset
    from pipeline.evaluation import evaluate
    from pipeline.rerank.models.addax import ADDAX, ADDAXConfig
    from pipeline.rerank.pairs import pairs_of, scores_by_query
    from pipeline.rerank.store import EncodingStore, encode_texts, score_late_interaction, write_encoded

    torch.set_num_threads(threads)
    data = get_dataset(dataset)
    run = data.run()
    pairs, qrels = pairs_of(data.topics(), run, run.texts), data.qrels()
    docs = {p.docid: p.text for p in pairs}
    torch.manual_seed(0)
    model = ADDAX(ADDAXConfig(max_doc_length=max_doc_length)).eval()
    start = time.perf_counter()
    with torch.inference_mode():
        fresh = dict(zip(docs, encode_texts(model, list(docs.values()), "document", batch_size)))
    encode_seconds = time.perf_counter() - start
    by_text = {docs[d]: rows for d, rows in fresh.items()}

    def encode(texts, desc="encode"):  # the BERT pass done once above: each store only compresses
        return [by_text[t] for t in texts]

    def measure(scores: list[float]) -> dict:
        return rounded(evaluate(scores_by_query(pairs, scores), qrels, MEASURES, data.rel_level))

    results, by_codec = {}, {}
    with tempfile.TemporaryDirectory() as folder:
        for dtype in codecs:
            start = time.perf_counter()
            manifest = write_encoded(Path(folder) / dtype, "addax", "start", docs.items(), encode, dtype,
                                     shard_size=2000, codec_sample=codec_sample, centroids=centroids)
            write_seconds = time.perf_counter() - start
            store = EncodingStore.open(Path(folder) / dtype, "addax", "start")
            score_late_interaction(model, pairs[:50], store, batch_size, torch.device("cpu"), desc="warm-up")
            start = time.perf_counter()
            scores = score_late_interaction(model, pairs, store, batch_size, torch.device("cpu"), desc=dtype)
            seconds = time.perf_counter() - start
            files = {p.name: p.stat().st_size for p in (Path(folder) / dtype).iterdir() if not p.name.startswith(".")}
            by_codec[dtype] = scores_by_query(pairs, scores)
            results[dtype] = {"row_bytes": manifest["row_bytes"], "dims": manifest["dims"],
                              "store_bytes_per_passage": round(sum(files.values()) / len(docs), 1),
                              "ids_bytes_per_passage": round(sum(v for k, v in files.items() if k.endswith(".ids"))
                                                             / len(docs), 1),
                              "codebook_bytes": files.get("codec.safetensors", 0),
                              "centroids": (manifest["codec"] or {}).get("centroids"),
                              "write_seconds": round(write_seconds, 2), "warm_pairs_per_s": round(len(pairs) / seconds),
                              **measure(scores)}
        for dtype in codecs:
            results[dtype]["agreement_with_fp16"] = agreement(by_codec[dtype], by_codec["fp16"])
        torch.manual_seed(0)  # the identity start's sign projection, seeded
        no_mags = ADDAX(ADDAXConfig(max_doc_length=max_doc_length, ablation="no_mags", codes="sign"), model.bert,
                        model.tokenizer).eval()
        store = EncodingStore.open(Path(folder) / "fp16", "addax", "start")
        from_rows = score_late_interaction(no_mags, pairs, store, batch_size, torch.device("cpu"), desc="no_mags")
        start = time.perf_counter()
        codes, code_bytes = sign_code_scores(no_mags, pairs, fresh)
        seconds = time.perf_counter() - start
        results["no_mags_sign_codes"] = {
            "row_bytes": int(code_bytes), "ids_bytes_per_passage": results["fp16"]["ids_bytes_per_passage"],
            "codebook_bytes": 0, "warm_pairs_per_s": round(len(pairs) / seconds), **measure(codes),
            "agreement_with_no_mags_from_fp16_rows": agreement(scores_by_query(pairs, codes),
                                                               scores_by_query(pairs, from_rows)),
            "no_mags_from_fp16_rows": measure(from_rows)}
    projection = project(results, projection_dataset, model.tokenizer)
    return {"dataset": dataset, "queries": len(run.ranking), "pairs": len(pairs), "passages": len(docs),
            "mean_rows_per_passage": round(sum(len(r) for r in fresh.values()) / len(docs), 1),
            "max_doc_length": max_doc_length, "threads": threads, "codec_sample_documents": codec_sample,
            "rows": sum(len(r) for r in fresh.values()),
            "encode_seconds_once": round(encode_seconds, 1), "codecs": results, "msmarco_projection": projection,
            "references": REFERENCES}


def project(results: dict, dataset: str, tokenizer) -> dict:
    """Bytes per MS MARCO passage and GiB for 8,841,823 of them, from the rows of `dataset`'s candidates at
    L_D = 180 and each codec's row bytes, .ids bytes a passage (measured) and codebook."""
    from pipeline.data.registry import get_dataset
    from pipeline.rerank.bert import single_lengths

    run = get_dataset(dataset).run()
    texts = list({docid: run.texts[docid] for hits in run.ranking.values() for docid, _ in hits}.values())
    rows = sum(single_lengths(tokenizer, texts, 180)) / len(texts)
    out = {"rows_per_passage": round(rows, 1), "from": f"{dataset} shipped candidates, L_D = 180",
           "passages": MSMARCO_PASSAGES}
    for name, result in results.items():
        per_passage = rows * result["row_bytes"] + result["ids_bytes_per_passage"]
        out[name] = {"bytes_per_passage": round(per_passage),
                     "gib": round((per_passage * MSMARCO_PASSAGES + result["codebook_bytes"]) / 2 ** 30, 1)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="wikiqa/test", metavar="NAME", help="a dataset with a shipped run")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-doc-length", type=int, default=128, help="L_D word pieces (WikiQA: 128)")
    parser.add_argument("--codec-sample", type=int, default=2048, metavar="N",
                        help="documents whose rows train the residual codebook (irpipe encode's default)")
    parser.add_argument("--centroids", type=int, metavar="K",
                        help="residual codebook centroids (default: ColBERTv2's rule from the sample's rows); a "
                             "collection's rows per centroid decide how well the centroids fit it (docstring)")
    parser.add_argument("--projection-dataset", default="dl19-passage", metavar="NAME",
                        help="MS MARCO candidates whose rows per passage give the projection")
    parser.add_argument("--codecs", nargs="+", default=list(CODECS), metavar="DTYPE",
                        help="irpipe encode dtypes to compare, fp16 among them (default: %(default)s)")
    parser.add_argument("--record", nargs="?", const="store-codecs", metavar="NAME", type=record_name,
                        help="write eval/benchmarks/NAME.json (default NAME: store-codecs)")
    args = parser.parse_args(argv)
    if "fp16" not in args.codecs:
        parser.error("--codecs: fp16 is the reference the others are compared with; name it too")

    from pipeline import log

    log.configure(quiet=True)
    result = bench(args.dataset, args.threads, args.batch_size, args.max_doc_length, args.codec_sample,
                   args.projection_dataset, tuple(args.codecs), args.centroids)
    print(machine())
    print(json.dumps(result, indent=2))
    if args.record:
        record(args.record, __spec__.name, argv, {"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
