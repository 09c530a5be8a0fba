"""The reranker stage of every neural model, the shared batched scorer, and `irpipe rerank`.

A model file registers its `RerankModel` subclass, which makes it a spec stage under the model's name:

    MonoBERTReranker = register_model(MonoBERT)                   # in pipeline/rerank/monobert.py

    bm25() % 100 >> monobert(ckpt=models/monobert-wikiqa)         # a checkpoint folder (pipeline/rerank/checkpoint.py)
    monobert(train=dl19-passage, epochs=2, seed=1)                # a training recipe (pipeline/rerank/train.py)

With `train=DATASET` (+ `dev=`, and any `TrainOptions` field: epochs, lr, seed, loss, negatives, measure...) the
model is trained once and kept under `<irpipe cache>/models/<key>`, key = model + recipe + model config + the
data's checksums; later runs load it from there. Other keyword arguments set fields of the model's config
(`monobert(ckpt=DIR, max_length=512)`, `hcan(train=trecqa/train, encoder=wide)`). `batch_size`, `device`
("auto": CUDA when present) and `threads` (torch CPU threads) are about how the model runs (inference, and a
recipe's training too), not what it computes: they are not part of a recipe's key. `amp` ("bf16" | "fp16"
autocast) applies to both too, but is part of the key: training in half precision computes another model.

Scoring (`predict`) sorts the pairs by length so that a batch holds similar lengths (less padding), runs under
`torch.inference_mode` (and autocast when asked), and counts the pairs the model had to truncate; the stage logs
that count as a warning, never silently.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pipeline.errors import ConfigError
from pipeline.log import logger, progress
from pipeline.rerank.base import Reranker
from pipeline.stage import register

if TYPE_CHECKING:
    import torch

    from pipeline.rerank.model import RerankModel

AMP_DTYPES = ("bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")


# -- devices and autocast -------------------------------------------------------------------------------------

def resolve_device(device: str = "auto") -> "torch.device":
    """"auto": the first CUDA device when there is one, else the CPU."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"unknown device {device!r}; expected auto, cpu, cuda or cuda:N") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but torch sees no CUDA device here; use device=cpu or auto")
    return resolved


def check_amp(amp: str | None) -> str | None:
    if amp in (None, "", "none", "no", False):
        return None
    if amp not in AMP_DTYPES:
        raise ConfigError(f"amp must be one of {', '.join(AMP_DTYPES)} or none, got {amp!r}")
    return amp


def autocast(device: "torch.device", amp: str | None):
    """torch.autocast for `amp` on `device`, or a no-op context. fp16 needs CUDA; bf16 works on both."""
    import torch

    amp = check_amp(amp)
    if amp is None:
        return contextlib.nullcontext()
    if amp == "fp16" and device.type != "cuda":
        raise ConfigError("fp16 autocast needs a CUDA device; use amp=bf16 or no amp on the CPU")
    return torch.autocast(device.type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)


# -- batched scoring ----------------------------------------------------------------------------------------------

@dataclass
class Scored:
    """What `predict` returns: one score per pair (input order), how many pairs were truncated, and the mean
    pointwise loss when labels were given."""

    scores: list[float]
    truncated: int
    loss: float | None = None


def predict(model: "RerankModel", queries: list[str], docs: list[str], batch_size: int = 64,
            device: "torch.device | str" = "cpu", amp: str | None = None, labels: list[float] | None = None,
            desc: str = "scoring") -> Scored:
    """Score (query, doc) pairs with `model` in length-sorted batches, in eval mode and under inference_mode."""
    import torch

    if len(queries) != len(docs):
        raise ValueError(f"{len(queries)} queries for {len(docs)} documents")
    device = torch.device(device) if isinstance(device, str) else device
    order = sorted(range(len(queries)), key=lambda i: len(queries[i]) + len(docs[i]), reverse=True)  # longest first
    scores = torch.zeros(len(queries), dtype=torch.float32)
    truncated, loss_sum = 0, 0.0
    model.eval().to(device)
    with torch.inference_mode(), autocast(device, amp), progress(desc=desc, total=len(order), unit="pair") as bar:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = model.prepare([queries[i] for i in chunk], [docs[i] for i in chunk])
            truncated += batch.truncated
            output = model(**batch.to(device).tensors)
            scores[chunk] = model.score(output).float().cpu()
            if labels is not None:
                target = torch.tensor([labels[i] for i in chunk], device=device)
                loss_sum += float(model.loss(output, target)) * len(chunk)
            bar.update(len(chunk))
    loss = loss_sum / len(order) if labels is not None and order else None
    return Scored(scores.tolist(), truncated, loss)


# -- the stage -----------------------------------------------------------------------------------------------------

class NeuralReranker(Reranker):
    """Rerank with a neural model from a checkpoint (`ckpt=DIR`) or a training recipe (`train=DATASET`)."""

    model_class: ClassVar[type]  # set by register_model

    def __init__(self, ckpt: str | None = None, train: str | None = None, dev: str | None = None,
                 batch_size: int = 64, device: str = "auto", amp: str | None = None, threads: int | None = None,
                 index: str | None = None, **options):
        from pipeline.rerank.train import TrainOptions

        if (ckpt is None) == (train is None):
            raise ValueError(f"{self.name} needs a checkpoint folder (ckpt=DIR) or a training recipe "
                             f"(train=DATASET [, dev=DATASET, epochs=N, ...]), not {'both' if ckpt else 'neither'}")
        if dev is not None and train is None:
            raise ValueError("dev= goes with a training recipe (train=DATASET)")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if device not in DEVICES and not str(device).startswith("cuda:"):
            raise ValueError(f"device must be auto, cpu, cuda or cuda:N, got {device!r}")
        self.ckpt, self.train, self.dev = (str(ckpt) if ckpt is not None else None), train, dev
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        self.batch_size, self.device, self.amp, self.index = int(batch_size), device, check_amp(amp), index
        self.threads = threads
        config_fields = {f.name for f in dataclasses.fields(self.model_class.config_class)}
        train_fields = {f.name for f in dataclasses.fields(TrainOptions)} - {"device", "amp", "threads"}
        self.overrides = {k: v for k, v in options.items() if k in config_fields}
        self.train_options = {k: v for k, v in options.items() if k not in config_fields}
        for key in self.train_options:
            if key not in train_fields:
                close = difflib.get_close_matches(key, sorted(config_fields | train_fields), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ValueError(f"{self.name} has no option {key!r}{hint} (model config: "
                                 f"{', '.join(sorted(config_fields))}; training: {', '.join(sorted(train_fields))})")
            if train is None:
                raise ValueError(f"{key}= is a training option; it goes with train=DATASET, not ckpt=")
        check_overrides(self.model_class.config_class, self.overrides)
        TrainOptions(**self.train_options)  # type checks now, not after minutes of work
        self.truncated = 0  # pairs truncated by the last transform
        self._model = None

    def config(self) -> dict:
        config = {"ckpt": self.ckpt} if self.ckpt is not None else {"train": self.train, "dev": self.dev}
        config.update(sorted(self.train_options.items()))
        config.update(sorted(self.overrides.items()))
        if self.amp:
            config["amp"] = self.amp
        if self.index:
            config["index"] = self.index
        return {k: v for k, v in config.items() if v is not None}

    def fingerprint(self) -> str:
        from pipeline.rerank.checkpoint import checkpoint_digest

        model = checkpoint_digest(self.ckpt) if self.ckpt else self.recipe().key()
        return f"{model}\x1f{super().fingerprint()}"

    def recipe(self):
        from pipeline.rerank.train import Recipe

        return Recipe(self.name, self.train, self.dev, self.train_options, self.overrides, device=self.device,
                      amp=self.amp, threads=self.threads)

    def checkpoint(self) -> Path:
        """The checkpoint folder: `ckpt`, or the recipe's cached model (trained now if it is not there yet)."""
        return Path(self.ckpt) if self.ckpt else self.recipe().ensure_trained()

    def load(self) -> "RerankModel":
        """The model, loaded once per stage."""
        if self._model is None:
            from pipeline.rerank.checkpoint import load_checkpoint

            self._model = load_checkpoint(self.checkpoint(), self.overrides if self.ckpt else None)
        return self._model

    def score_pairs(self, queries: list[str], texts: list[str]) -> list[float]:
        model = self.load()
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        scored = predict(model, queries, texts, self.batch_size, resolve_device(self.device), self.amp, desc=self.name)
        self.truncated = scored.truncated
        if scored.truncated:
            limits = {k: v for k, v in dataclasses.asdict(model.config).items() if "length" in k}
            logger.warning("%s: %d of %d pairs were truncated to fit the model (%s)", self.name, scored.truncated,
                           len(queries), ", ".join(f"{k}={v}" for k, v in limits.items()) or "its length limits")
        return scored.scores


def check_overrides(config_class: type, overrides: dict) -> None:
    """Model config fields given as options: known names, values of the field's kind (ValueError otherwise)."""
    from pipeline.rerank.checkpoint import field_problem

    for key, value in overrides.items():
        problem = field_problem(config_class, key, value)
        if problem:
            raise ValueError(problem)


def register_model(model_class: type["RerankModel"]) -> type[NeuralReranker]:
    """Make `model_class` a spec stage under `model_class.name`; returns the stage class (e.g. MonoBERTReranker).
    Add the model's module to `_BUILTIN_MODULES` in pipeline/stage.py so that specs find it by name."""
    if not model_class.name:
        raise TypeError(f"{model_class.__name__} needs a `name` to be registered")
    stage = type(f"{model_class.__name__}Reranker", (NeuralReranker,),
                 {"name": model_class.name, "model_class": model_class, "__module__": model_class.__module__,
                  "__doc__": f"Rerank with {model_class.__name__} ({model_class.name}): see NeuralReranker."})
    return register(stage)


def reranker_for_checkpoint(directory: str | Path, **kwargs) -> NeuralReranker:
    """The stage of whatever model the checkpoint folder holds (named in its config.json)."""
    from pipeline.rerank.checkpoint import CONFIG_FILE, model_class, read_checkpoint_config
    from pipeline.stage import get_stage_class

    name = read_checkpoint_config(directory)["model"]
    model_class(name, Path(directory) / CONFIG_FILE)  # a clear error for an unknown model
    try:
        return get_stage_class(name)(ckpt=str(directory), **kwargs)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"{name}: {error}") from None


# -- irpipe rerank --------------------------------------------------------------------------------------------------

def define_args(parser: argparse.ArgumentParser) -> None:
    from pipeline.data.runs import RUN_FORMATS

    parser.add_argument("--model", required=True, metavar="DIR", help="checkpoint folder (config.json + model.safetensors)")
    parser.add_argument("--run", required=True, metavar="RUN", help="run file to rerank (TREC or MS MARCO)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", metavar="NAME", help="topics and candidate texts (or its index) from a dataset")
    source.add_argument("--index", metavar="DIR", help="Lucene index holding the candidates' texts (with --topics)")
    parser.add_argument("--topics", metavar="FILE", help="topics file (with --index)")
    parser.add_argument("--output", required=True, metavar="RUN", help="reranked run file")
    parser.add_argument("--output-format", choices=RUN_FORMATS, default="trec")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N", help="pairs per batch (default 64)")
    parser.add_argument("--max-length", type=int, metavar="TOKENS", help="the model's max input length (its config's max_length)")
    parser.add_argument("--device", default="auto", metavar="DEV", help="auto (default: CUDA when present), cpu, cuda, cuda:N")
    parser.add_argument("--amp", choices=AMP_DTYPES, help="autocast dtype (bf16 on CPU or CUDA, fp16 on CUDA)")
    parser.add_argument("--threads", type=int, metavar="N", help="torch CPU threads (default: all cores)")
    parser.add_argument("--eval", metavar="MEASURES", help="with --dataset: evaluate the output (e.g. RR@10,AP,nDCG@10)")


def main(args: argparse.Namespace) -> int:
    from pipeline.data.runs import read_run
    from pipeline.data.topics import read_topics

    if args.index and not args.topics:
        raise ConfigError("--index needs --topics FILE (or give --dataset NAME)")
    if args.eval and not args.dataset:
        raise ConfigError("--eval needs --dataset NAME (for its qrels)")
    options = {"max_length": args.max_length} if args.max_length is not None else {}
    if options:
        from pipeline.rerank.checkpoint import model_class, read_checkpoint_config

        config_class = model_class(read_checkpoint_config(args.model)["model"]).config_class
        if "max_length" not in {f.name for f in dataclasses.fields(config_class)}:
            raise ConfigError(f"--max-length: {config_class.__name__} has no max_length field; set its own length "
                              "fields in a spec instead")
    reranker = reranker_for_checkpoint(args.model, batch_size=args.batch_size, device=args.device, amp=args.amp,
                                       threads=args.threads, index=args.index, **options)
    run = read_run(args.run)
    dataset = None
    if args.dataset:
        from pipeline.data.registry import get_dataset

        dataset = get_dataset(args.dataset)
        topics = dataset.topics()
        shipped = dataset.run()
        if shipped is not None:  # candidates with texts: no index needed for the docids they cover
            run.texts = {d: shipped.texts[d] for hits in run.ranking.values() for d, _ in hits if d in shipped.texts}
        reranker = reranker.bind(dataset)  # the dataset's index, only for candidates still without a text
    else:
        topics = read_topics(args.topics)
    missing = [qid for qid in run.ranking if qid not in topics.queries]
    if missing:
        raise ConfigError(f"{len(missing)} queries of {args.run} are not in the topics (e.g. {missing[0]!r})")
    output = reranker(topics, run)
    output.write(args.output, format=args.output_format, tag=reranker.name)
    logger.info("wrote %s", args.output)
    if args.eval:
        from pipeline.evaluate import evaluate

        for measure, score in evaluate(output, dataset.qrels(), args.eval, rel_level=dataset.rel_level).items():
            print(f"{measure}\t{score:.4f}")
    return 0
