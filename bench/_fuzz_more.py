"""More fuzzed readers (see _fuzz_cases.py): dataset folders (dataset.yaml with its files, answer selection, BEIR,
MS MARCO), dataset.yaml itself, experiment files, pipeline specs, measures, and checkpoints' config.json."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import yaml
from hypothesis import strategies as st

from bench._fuzz_cases import ACCEPTED, IDS, NASTY, REFUSED, TEXTS, Case, Reader, mutated

_TOPICS, _QRELS, _RUN = "q1\tfirst query\nq2\tsecond one\n", "q1 0 d1 1\nq2 0 d2 0\n", "q1 Q0 d1 1 2.5 t\nq2 Q0 d2 1 1 t\n"
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 5), st.floats(allow_nan=True), st.text(max_size=6),
                    st.sampled_from(["topics.tsv", "qrels.txt", "run.trec", "trec", "pairs", "answer-selection",
                                     "corpus", "tsv", "msmarco", "..", "", "bm25()", "AP", "nDCG@10", "local"]))


def _values(keys: list[str]) -> st.SearchStrategy:
    return st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(keys) | st.text(max_size=4), inner, max_size=3), max_leaves=8)


def _yaml(mapping) -> str:
    return yaml.safe_dump(mapping, allow_unicode=True)


def _twice(draw, mapping: dict) -> Case | None:
    """A YAML file of `mapping` with one of its keys written again (a case to refuse), or None (not drawn)."""
    if draw(st.integers(0, 3)):
        return None
    key = draw(st.sampled_from(sorted(mapping)))
    return Case({"x.yaml": _yaml(mapping) + _yaml({key: mapping[key]})}, REFUSED)


# -- dataset.yaml ------------------------------------------------------------------------------------------------

_SPEC_KEYS = ["name", "description", "kind", "rel_level", "language", "files", "run_texts", "topics", "qrels",
              "run", "corpus", "index", "pairs", "questions", "path", "format"]


@st.composite
def _dataset_yaml(draw):
    files = {"topics.tsv": _TOPICS, "qrels.txt": _QRELS, "run.trec": _RUN}
    if draw(st.booleans()):
        spec = {"name": draw(IDS), "rel_level": draw(st.integers(1, 3)),
                "files": {"topics": "topics.tsv", "qrels": {"path": "qrels.txt"}, "run": "run.trec"}}
        twice = _twice(draw, spec)
        if twice is not None:
            return Case({**files, "dataset.yaml": twice.files["x.yaml"]}, REFUSED)
        return Case({**files, "dataset.yaml": _yaml(spec)}, _DATASET_EXPECTED)
    spec = draw(st.dictionaries(st.sampled_from(_SPEC_KEYS), _values(_SPEC_KEYS), max_size=5))
    return Case({**files, "dataset.yaml": _yaml(spec)})


_DATASET_EXPECTED = ({"q1": "first query", "q2": "second one"}, {"q1": {"d1": 1}, "q2": {"d2": 0}},
                     {"q1": [("d1", 2.5)], "q2": [("d2", 1.0)]})


def _read_dataset(folder: Path):
    """Every part a dataset folder provides, read: (topics, qrels, run) as plain data."""
    from pipeline.data.sets.local import load_dataset_folder

    dataset = load_dataset_folder(folder)
    parts = []
    for part in ("topics", "qrels", "run"):
        value = getattr(dataset, part)() if part in dataset.provides else None
        parts.append(value.queries if part == "topics" else value.ranking if part == "run" and value else value)
    return tuple(parts)


def _dataset_ids(result) -> list:
    topics, qrels, run = result
    return [*(topics or {}), *(t for q, docs in (qrels or {}).items() for t in (q, *docs)),
            *(t for q, hits in (run or {}).items() for t in (q, *(d for d, _ in hits)))]


# -- dataset folders of their own layout: answer selection, BEIR, MS MARCO --------------------------------------

@st.composite
def _folder(draw):
    kind = draw(st.sampled_from(["answer-selection", "beir", "msmarco"]))
    queries = draw(st.dictionaries(IDS, TEXTS, min_size=1, max_size=3))
    docs = draw(st.lists(IDS, min_size=1, max_size=3, unique=True))
    if kind == "answer-selection":
        rows = [(q, t, d, draw(st.sampled_from("01"))) for q, t in queries.items() for d in docs]
        files = {"a.toks": "".join(f"{t.strip()}\n" for _, t, _, _ in rows),
                 "b.toks": "".join(f"answer {d}\n" for _, _, d, _ in rows),
                 "sim.txt": "".join(f"{label}\n" for *_, label in rows),
                 "id.txt": "".join(f"{q} 0 {d} {label}\n" for q, _, d, label in rows),
                 "dataset.yaml": "kind: answer-selection\n"}
        qrels = {q: {d: int(label) for q2, _, d, label in rows if q2 == q} for q in queries}
        run = {q: [(d, -float(i + 1)) for i, d in enumerate(docs)] for q in queries}
        return Case(files, ({q: t.strip() for q, t in queries.items()}, qrels, run))
    if kind == "beir":
        files = {"corpus.jsonl": "".join(json.dumps({"_id": d, "title": "", "text": f"text {d}"}) + "\n" for d in docs),
                 "queries.jsonl": "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()),
                 "qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{docs[0]}\t1\n" for q in queries)}
        return Case(files, ({q: t.strip() for q, t in queries.items()}, {q: {docs[0]: 1} for q in queries}, None))
    files = {"queries.dev.small.tsv": "".join(f"{q}\t{t}\n" for q, t in queries.items()),
             "top1000.dev.tsv": "".join(f"{q}\t{d}\t{t}\tpassage {d}\n" for q, t in queries.items() for d in docs)}
    run = {q: [(d, -float(i + 1)) for i, d in enumerate(docs)] for q in queries}
    return Case(files, ({q: t.strip() for q, t in queries.items()}, None, run))


def _read_folder(folder: Path):
    """A folder as `--dataset DIR` takes it, every part it provides read."""
    from pipeline.data.sets.beir import is_beir_folder, load_beir_folder
    from pipeline.data.sets.msmarco_folder import is_msmarco_folder, load_msmarco_folder

    if (folder / "dataset.yaml").is_file():
        return _read_dataset(folder)
    dataset = (load_beir_folder(folder) if is_beir_folder(folder) else
               load_msmarco_folder(folder) if is_msmarco_folder(folder) else None)
    if dataset is None:  # no layout: refused as `--dataset DIR` refuses it
        from pipeline.data.registry import load_folder

        load_folder(folder)
    topics, qrels = dataset.topics().queries, dataset.qrels() if "qrels" in dataset.files else None
    run = dataset.run()
    if "corpus" in dataset.files:
        list(dataset.docs())
    return topics, qrels, run.ranking if run is not None else None


# -- experiment files, pipeline specs, measures ------------------------------------------------------------------

_EXPERIMENT_KEYS = ["name", "dataset", "pipeline", "measures", "expected", "tolerance", "rel_level", "queries",
                    "output_format", "description", "ci", "baseline", "seeds", "engine", "beside"]
_SPECS = ["bm25()", "bm25(k1=1.2, b=0.75) % 10 >> overlap()", "fusion(bm25(), bm25(rm3=true), k=60)",
          "bm25() % 100 >> monobert(ckpt=models/m)", "bm25(hits=20) >> exclude()"]
_MEASURES = ["AP", "RR@10", "P@10", "nDCG@10", "R@1000", "AP(rel=2)", "map", "ndcg_cut.10", "P.5,10", "recip_rank",
             "Success@1", "NumRet", "NumRel", "Rprec", "Bpref", "Judged@10", "P", "official"]


@st.composite
def _experiment(draw):
    valid = {"dataset": "tiny", "pipeline": draw(st.sampled_from(_SPECS)),
             "measures": draw(st.lists(st.sampled_from(_MEASURES[:12]), min_size=1, max_size=3))}
    if draw(st.booleans()):
        return _twice(draw, valid) or Case({"x.yaml": _yaml(valid)}, ACCEPTED)
    extra = draw(st.dictionaries(st.sampled_from(_EXPERIMENT_KEYS), _values(_EXPERIMENT_KEYS), max_size=4))
    return Case({"x.yaml": _yaml(valid | extra)})


def _read_experiment(folder: Path):
    from pipeline.experiment import Experiment

    experiment = Experiment.load(folder / "x.yaml")
    return experiment.name


_SPEC_TOKENS = ["bm25", "overlap", "fusion", "monobert", "exclude", "keywords", "bm25kw", "(", ")", ",", "=", ">>",
                "%", "+", " ", "k1", "b", "hits", "k", "rm3", "method", "weights", "norm", "ckpt", "0.5", "-1", "0",
                "10", "1e309", "nan", "true", "none", "'x'", '"', "[", "]", "weighted", "zscore"]


@st.composite
def _spec(draw):
    if draw(st.booleans()):
        return Case({"spec.txt": draw(st.sampled_from(_SPECS))}, ACCEPTED)
    if draw(st.integers(0, 3)) == 0:  # long (a file name holds 255 bytes) or nested to the bound, or past it
        from pipeline.spec import MAX_DEPTH

        fused = "fusion(" + ", ".join(draw(st.lists(st.sampled_from(_SPECS[:3]), min_size=2, max_size=12))) + ")"
        depth = draw(st.integers(1, 300))
        nested = "(" * depth + draw(st.sampled_from(_SPECS)) + ")" * depth
        return draw(st.sampled_from([Case({"spec.txt": fused}, ACCEPTED),
                                     Case({"spec.txt": nested}, ACCEPTED if depth <= MAX_DEPTH - 2 else
                                          REFUSED if depth >= MAX_DEPTH else None)]))  # 2: a spec's own brackets
    tokens = draw(st.lists(st.sampled_from(_SPEC_TOKENS) | st.sampled_from(NASTY), min_size=1, max_size=12))
    return Case({"spec.txt": "".join(tokens)})


class RoundTrip(AssertionError):
    """A spec whose repr reads back as another pipeline."""


def _read_spec(folder: Path):
    """The pipeline of the spec, and its repr read back: the same pipeline (`repr` prints the spec grammar)."""
    import pipeline.stages  # noqa: F401 -- the stages register before the spec is parsed
    from pipeline.data.paths import names_file
    from pipeline.spec import parse

    text = (folder / "spec.txt").read_text(encoding="utf-8", errors="surrogatepass")
    names_file(text)  # as `irpipe run` asks whether it names an experiment file: a spec of any length is no file
    shown = repr(parse(text))
    again = repr(parse(shown))
    if again != shown:
        raise RoundTrip(f"{shown!r} reads back as {again!r}")
    return shown


@st.composite
def _measure(draw):
    if draw(st.booleans()):
        return Case({"m.txt": " ".join(draw(st.lists(st.sampled_from(_MEASURES), min_size=1, max_size=3)))}, ACCEPTED)
    name = draw(st.sampled_from([*_MEASURES, "ERR", "nDCG", "infAP", "SetP", "P_", "ndcg_cut.", "success.", "R",
                                 "RBP", "ERR@10", "ERR"]))
    parameters = draw(st.sampled_from(["", "(rel=0)", "(rel=2)", "(rel=-1)", "(p=2)", "(gains={0:0,1:1})",
                                       "(judged_only=True)", "(rel=2147483648)"]))
    cutoff = draw(st.sampled_from(["", "@0", "@1", "@-1", "@10", "@100000000000000000000", "0", "5", "5,10"]))
    text = name + parameters + cutoff
    return Case({"m.txt": text + draw(st.sampled_from(["", " ", ",", *NASTY[:12]]))})


def _read_measures(folder: Path):
    """The measures parsed, and evaluated on a run of two queries (the evaluator's own code runs on them)."""
    from pipeline.evaluation import evaluate

    text = (folder / "m.txt").read_text(encoding="utf-8", errors="surrogatepass")
    run = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d3": 1.0}}
    return evaluate(run, {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}, text, rel_level=1)


# -- checkpoints' config.json ------------------------------------------------------------------------------------

@st.composite
def _checkpoint(draw):
    from pipeline.rerank import models
    from pipeline.rerank.checkpoint import FORMAT

    name = draw(st.sampled_from(models.model_names()))
    config = dataclasses.asdict(models.model_class(name).config_class())
    text = json.dumps({"format": FORMAT, "model": name, "config": config}, indent=1)
    if draw(st.booleans()):
        return Case({"config.json": text}, json.loads(text)["config"])
    if draw(st.booleans()):
        field = draw(st.sampled_from(sorted(config)))
        config[field] = draw(_LEAVES | st.lists(st.integers(), max_size=2) | st.floats())
        text = json.dumps({"format": FORMAT, "model": name, "config": config}, indent=1)
    elif draw(st.booleans()):  # a value nested past the JSON bound (or to it)
        depth = draw(st.sampled_from([3, 99, 101, 1000, 5000]))
        text = text.replace('"config": {', '"config": {"deep": ' + "[" * depth + "]" * depth + ", ", 1)
    return Case({"config.json": text})


def _read_checkpoint(folder: Path):
    from pipeline.rerank.checkpoint import checkpoint_config, checkpoint_model_class, read_checkpoint_config

    data = read_checkpoint_config(folder)
    where = folder / "config.json"
    config = checkpoint_config(checkpoint_model_class(data["model"], where).config_class, data["config"], where)
    return json.loads(json.dumps(dataclasses.asdict(config)))  # as config.json holds it: lists, not tuples


def more_readers() -> list[Reader]:
    return [Reader("dataset.yaml", mutated(_dataset_yaml()), _read_dataset, _dataset_ids),
            Reader("dataset folders", mutated(_folder()), _read_folder, _dataset_ids),
            Reader("experiment files", mutated(_experiment()), _read_experiment),
            Reader("pipeline specs", _spec(), _read_spec),
            Reader("measures", _measure(), _read_measures),
            Reader("checkpoint config.json", mutated(_checkpoint()), _read_checkpoint)]
