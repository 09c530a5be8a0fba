"""Benchmark: passages/s of the bi-encoder's document encoding beside sentence-transformers' `encode` and the
runtimes it is deployed on, same weights (all-MiniLM-L6-v2), same passages, same threads, one run.

    IRPIPE_MIRROR=../shared/data python -m bench.encode_peers --threads 1 --passages 400 --repeats 3 \
        --output encode-peers-1t --record

The passages: the first `--passages` distinct ones of DL19's shipped top-100, in the run's order. Modes:
- st (the reference): `SentenceTransformer.encode(batch_size=32, normalize_embeddings=True)` in fp32: its own
  length sort, mean pooling, at most 256 word pieces;
- irpipe: biencoder()'s `encode_texts` as `irpipe encode` runs it (one group: batches by length and a token budget,
  pipeline/rerank/batching.py), fp32;
- irpipe-per-query: the same passages batched per query, as reranking encodes a query's candidates (a score never
  depends on other queries' candidates; the main job's path);
- ort-fp32 / ov-fp32: the BERT exported by `torch.onnx.export` and run by ONNX Runtime (all graph optimisations), or
  converted by `openvino.convert_model` and compiled for the CPU in fp32; fed as `encode` feeds its model (batches
  of 32 sorted by length, each padded to its longest), mean-pooled and normalised in numpy;
- st-bf16 (`--modes`, not by default): `encode` under `torch.autocast("cpu", torch.bfloat16)` -- fast only with
  native bf16 (AVX512-BF16, AMX).
Per mode: passages/s (median of interleaved rounds, bench/inference_speed.py `timed`), the ratio to st in the same
round (`speedup_vs_st`), the FLOP/s of the encoder passes (bench/_inference_models.py `encoder_flops`) with its
share of the fp32 peak estimate, and the largest |cosine(mode) - cosine(st)| between each passage's vector and its
query's (the score a bi-encoder ranks by).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from bench import positive, record, record_name, run_main
from bench._inference_models import achieved, cpu_name, default_encoder_flops, default_tokenizer, dl_pairs, peak_fields
from bench._peer_runtimes import INPUTS, onnx_export, openvino_compiled, ort_session, positional_module
from bench.inference_speed import timed

MODES = ("st", "irpipe", "irpipe-per-query", "ort-fp32", "ov-fp32", "st-bf16")
DEFAULT_MODES = MODES[:-1]
BATCH = 32                                                              # SentenceTransformer.encode's default


def passages(count: int) -> tuple[list[str], list[str], dict[str, str]]:
    """(texts, the qid of each, qid -> query text): the first `count` distinct DL19 top-100 passages."""
    _, pairs = dl_pairs("dl19-passage")
    seen, texts, qids, queries = set(), [], [], {}
    for pair in pairs:
        if pair.text not in seen and len(texts) < count:
            seen.add(pair.text)
            texts.append(pair.text)
            qids.append(pair.qid)
            queries[pair.qid] = pair.query
    return texts, qids, queries


def encoders(names: list[str], threads: int, qids: list[str], folder: Path) -> dict:
    """mode -> function(texts) -> (N, H) normalised numpy vectors."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from pipeline.rerank.bert import DEFAULT_BERT, bert_folder
    from pipeline.rerank.models.biencoder import BiEncoder, BiEncoderConfig
    from pipeline.rerank.store import encode_texts

    st = SentenceTransformer(str(bert_folder(DEFAULT_BERT)), device="cpu")
    model = BiEncoder(BiEncoderConfig()).eval()

    def st_encode(bf16: bool):
        def run(texts):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                return st.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True)
        return run

    def irpipe(groups):
        def run(texts):
            vectors = encode_texts(model, texts, "document", amp="none", desc="timed",
                                   groups=groups[:len(texts)] if groups else None)
            return torch.cat(vectors).numpy()
        return run

    def runtime(forward):                                              # numpy ids, mask, types -> (B, L, H)
        tokenizer = st.tokenizer

        def run(texts):
            order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
            out = np.zeros((len(texts), model.bert.config.hidden_size), dtype=np.float32)
            for start in range(0, len(order), BATCH):
                chunk = order[start:start + BATCH]
                encoded = tokenizer([texts[i] for i in chunk], padding=True, truncation=True,
                                    max_length=st.max_seq_length, return_tensors="np")
                states = forward(*(encoded[k].astype("int64") for k in INPUTS))
                mask = encoded["attention_mask"][..., None].astype(np.float32)
                pooled = (states * mask).sum(1) / mask.sum(1)
                out[chunk] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
            return out
        return run

    build = {"st": lambda: st_encode(False), "st-bf16": lambda: st_encode(True), "irpipe": lambda: irpipe(None),
             "irpipe-per-query": lambda: irpipe(qids), "ort-fp32": lambda: runtime(_ort(st, folder, threads)),
             "ov-fp32": lambda: runtime(_openvino(st, threads))}
    return {name: build[name]() for name in names}


def _hidden(st):
    """The SentenceTransformer's BertModel returning its last layer (B, L, H)."""
    return positional_module(st[0].auto_model, lambda outputs: outputs.last_hidden_state)


def _example(st):
    return tuple(st.tokenizer(["a passage"], return_tensors="pt")[k] for k in INPUTS)


def _ort(st, folder: Path, threads: int):
    path = onnx_export(_hidden(st), _example(st), folder / "encoder.onnx", "hidden", {0: "batch", 1: "length"})
    session = ort_session(path, threads)
    return lambda ids, mask, types: session.run(["hidden"], dict(zip(INPUTS, (ids, mask, types))))[0]


def _openvino(st, threads: int):
    compiled = openvino_compiled(_hidden(st), _example(st), threads, "f32")
    return lambda ids, mask, types: compiled([ids, mask, types])[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=positive, default=400, help="distinct DL19 passages (default 400)")
    parser.add_argument("--threads", type=positive, default=1, help="CPU threads, every runtime (default 1)")
    parser.add_argument("--repeats", type=positive, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(DEFAULT_MODES), metavar="MODE",
                        help=f"{', '.join(MODES)} (default all but st-bf16); st is always timed: the reference")
    parser.add_argument("--output", default="encode-peers", type=record_name, help="eval/benchmarks/<NAME>.json")
    parser.add_argument("--record", action="store_true", help="write eval/benchmarks/<--output>.json")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    from pipeline import log
    from pipeline.rerank.bert import single_lengths
    from pipeline.rerank.models.biencoder import BiEncoderConfig

    log.configure(quiet=True)
    torch.set_num_threads(args.threads)
    texts, qids, queries = passages(args.passages)
    names = ["st"] + [m for m in args.modes if m != "st"]
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="irpipe-encode-peers-") as scratch:
        functions = encoders(names, args.threads, qids, Path(scratch))
        last = {}
        speed = timed({n: (lambda n, f: lambda xs: last.__setitem__(n, f(xs)))(n, f) for n, f in functions.items()},
                      texts, args.repeats, reference="st")
    query_vectors = functions["st"]([queries[q] for q in qids])             # (N, H): each passage's query
    reference = (last["st"] * query_vectors).sum(1)
    flops = default_encoder_flops(single_lengths(default_tokenizer(), texts, BiEncoderConfig().max_length))
    peak, stated = peak_fields(args.threads)
    for name, row in speed.items():
        gflops, share = achieved(flops, len(texts) / row["pairs_per_s"], peak)
        row["passages_per_s"] = row.pop("pairs_per_s")
        row |= {"gflops": gflops, "share_of_fp32_peak": share,
                "max_abs_cosine_vs_st": float(np.abs((last[name] * query_vectors).sum(1) - reference).max())}
    payload = {"cpu": cpu_name(), "threads": args.threads, "passages": len(texts), "repeats": args.repeats,
               "load_average_start": [round(x, 2) for x in load_start], "tflop": round(flops / 1e12, 3), **stated,
               "speed": speed, "load_average_end": [round(x, 2) for x in os.getloadavg()]}
    print(markdown(payload))
    if args.record:
        record(args.output, __spec__.name, argv, payload)
    return 0


def markdown(payload: dict) -> str:
    """A record as docs/inference.md shows it."""
    lines = [f"{payload['cpu']}, {payload['threads']} thread(s), {payload['passages']} DL19 passages, "
             f"{payload['repeats']} rounds, load {payload['load_average_start'][0]} at the start", "",
             "| mode | passages/s | × st encode | GFLOP/s (share of fp32 peak) | max \\|Δ cosine\\| vs st |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for mode, row in payload["speed"].items():
        lines.append(f"| {mode} | {row['passages_per_s']} | {row['speedup_vs_st']} | {row['gflops']} "
                     f"({row['share_of_fp32_peak']}) | {row['max_abs_cosine_vs_st']:.1e} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(run_main(main))
