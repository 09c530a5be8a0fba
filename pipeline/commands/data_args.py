"""The data arguments every command that takes a dataset shares: a dataset, or files of your own.

    add_data_args(parser)                    --dataset NAME|DIR  --topics FILE  --qrels FILE
                                             --corpus FILE | --index DIR | --run FILE
    add_data_args(parser, prefix="dev")      --dev NAME|DIR  --dev-topics FILE  --dev-qrels FILE  ...
    dataset = dataset_from_args(args)        # (or dataset_from_args(args, prefix="dev"))

`--dataset` takes a registered name, `irds:<id>`, a name given with `irpipe datasets add`, or a dataset folder's
path (with a dataset.yaml, a BEIR folder or the MS MARCO passage files; `DIR:SPLIT` picks a BEIR or MS MARCO
split). Files alone make a dataset of their own (`--topics` is then needed); files beside `--dataset` replace
those parts of it (e.g. `--dataset dl19-passage --run my-candidates.trec`; a topics file also narrows the
dataset's qrels to its queries). Formats are detected as the readers
do: topics TREC SGML / TSV / JSONL (ours or BEIR's), qrels TREC or BEIR, runs TREC / MS MARCO, corpora JSONL
(Pyserini's or BEIR's) / TSV / TREC SGML. `--topics` also takes the name of a registered dataset's topics, as
Pyserini's does (`--topics msmarco-passage-dev-subset`): that dataset, with the other files given replacing its
parts. The result has the interface of a registered dataset (`topics()`, `qrels()`, `run()`, `docs()`,
`rel_level`, `name`, `provides`, `files` with checksums for recipe keys).
"""
from __future__ import annotations

import argparse
import difflib
import os

from pipeline.data.paths import require_file
from pipeline.errors import ConfigError, MissingResourceError
from pipeline.log import logger

FILE_ARGS = {"topics": "topics file (TREC SGML, TSV qid<TAB>query, JSONL, BEIR queries.jsonl), or a topics name: "
                       "Pyserini's (msmarco-passage-dev-subset, dl19-passage, dl20) or a registered dataset's",
             "qrels": "qrels file (TREC: qid iter docid relevance; or BEIR's query-id corpus-id score, with its header)",
             "corpus": "documents (JSONL, BEIR corpus.jsonl, TSV id<TAB>text, TREC SGML); indexed on first use",
             "index": "a Lucene index of the documents",
             "run": "candidate run file (TREC or MS MARCO)"}
PARTS = tuple(FILE_ARGS)


def _flag(prefix: str | None, key: str) -> str:
    return f"--{prefix}-{key}" if prefix else f"--{key}"


def _dest(prefix: str | None, key: str) -> str:
    return f"{prefix}_{key}" if prefix else key


def add_data_args(parser: argparse.ArgumentParser, prefix: str | None = None, parts: tuple[str, ...] = PARTS,
                  what: str = "data") -> None:
    """Add `--PREFIX NAME|DIR` (`--dataset` without a prefix) and a file argument for each of `parts` (a subset
    of topics, qrels, corpus, index, run: what the command can use)."""
    group = parser.add_argument_group(f"{what}: a dataset, or files of your own")
    group.add_argument(f"--{prefix or 'dataset'}", dest=_dest(prefix, "dataset") if prefix else "dataset",
                       metavar="NAME|DIR", help="registered dataset, irds:<id>, a name from `irpipe datasets add`, "
                                                "or a dataset folder (a dataset.yaml, a BEIR folder or the MS MARCO "
                                                "passage files); DIR:SPLIT picks a split (BEIR: test by default, "
                                                "MS MARCO: dev.small)")
    for key in parts:
        metavar = {"index": "DIR", "topics": "FILE|NAME"}.get(key, "FILE")
        group.add_argument(_flag(prefix, key), dest=_dest(prefix, key), metavar=metavar, help=FILE_ARGS[key])


def dataset_from_args(args: argparse.Namespace, prefix: str | None = None, required: bool = True):
    """The dataset the arguments name (see the module docstring); None when none is given and not `required`."""
    from pipeline.data.registry import get_dataset
    from pipeline.data.sets.local import WithFiles, local_dataset_from_files

    name = getattr(args, _dest(prefix, "dataset") if prefix else "dataset", None)
    files = {key: getattr(args, _dest(prefix, key), None) for key in PARTS}
    files = {key: path for key, path in files.items() if path}
    if "topics" in files and not os.path.lexists(files["topics"]):
        named = _named_topics(files.pop("topics"), prefix)
        if name:
            raise ConfigError(f"{_flag(prefix, 'topics')} {named} names a dataset's topics: give it without "
                              f"{_flag(None, prefix or 'dataset')} {name}, or give a topics file")
        name = named
    for key, path in files.items():
        if not os.path.lexists(path):
            what = "no Lucene index" if key == "index" else "no such file"
            if key == "index" and "/" not in path:
                what += " (Pyserini's prebuilt indexes are not downloaded here: build one with `irpipe index`)"
            raise MissingResourceError(f"{_flag(prefix, key)} {path}: {what}")
        # before any read: a FIFO, a device, a symlink loop refused (an index is a folder, a corpus may be one)
        require_file(path, folder=key == "index" or (key == "corpus" and os.path.isdir(path)))
    if not name and not files:
        if required:
            raise ConfigError(f"give {_flag(None, prefix or 'dataset')} NAME|DIR, or files of your own: "
                              f"{_flag(prefix, 'topics')} FILE (with {_flag(prefix, 'qrels')}, "
                              f"{_flag(prefix, 'corpus')}, {_flag(prefix, 'index')} or {_flag(prefix, 'run')})")
        return None
    if not name and "topics" not in files:
        raise ConfigError(f"files of your own need {_flag(prefix, 'topics')} FILE (or name a dataset)")
    if not name:
        return local_dataset_from_files(files)
    dataset = get_dataset(name)
    if not files:
        return dataset
    return WithFiles(dataset, local_dataset_from_files(files, name=f"{dataset.name}+files"))


def _named_topics(value: str, prefix: str | None) -> str:
    """The registered dataset whose topics `--topics VALUE` names (Pyserini's name for them, or the dataset's own
    name), for a VALUE that is no file; an error saying neither when it is none."""
    from pipeline.data.registry import dataset_names, pyserini_topics

    named = pyserini_topics()
    if value in named:
        dataset, note = named[value]
        logger.info("%s %s: the topics of %s%s", _flag(prefix, "topics"), value, dataset, f" ({note})" if note else "")
        return dataset
    if value in dataset_names():
        return value
    close = difflib.get_close_matches(value, [*named, *dataset_names()], n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else f"Pyserini's names known here: {', '.join(sorted(named))}"
    raise MissingResourceError(f"{_flag(prefix, 'topics')} {value}: no such file, nor the name of topics irpipe has "
                               f"({hint}; or a registered dataset's name, `irpipe datasets list`)")
