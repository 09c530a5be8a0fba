"""Cache keys from content: whatever the kind of input -- a file, a folder, a dataset.yaml, a BEIR or MS
MARCO folder, `--corpus`, an index folder, Topics and Runs made in Python -- two contents never share a cached index,
a stage output or a recipe, and the same content (copied to another path) always does; the digests behind the keys
are read once per file version (pipeline/data/digests.py)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cache import StageCache, using
from pipeline.data.digests import content_digest
from pipeline.data.files import json_digest
from pipeline.data.registry import get_dataset
from pipeline.data.runs import Run
from pipeline.data.sets.local import local_dataset_from_files
from pipeline.data.topics import Topics
from pipeline.stages.bm25 import BM25
from pipeline.stages.rerank import Overlap
from pipeline.training.identity import RecipeIdentity
from support import DOCS, QRELS, TOPICS, irpipe

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
OTHER_TEXT = "a whale in the deep sea"  # one document's text in the second content of each kind


def _jsonl(docs) -> str:
    return "".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in docs)


def write_folder_corpus_dataset(folder: Path, docs=DOCS, spec: str = "name: mine\n", qrels: str = QRELS) -> Path:
    """A dataset.yaml folder whose corpus is a folder of two JSONL files."""
    (folder / "docs").mkdir(parents=True)
    (folder / "topics.tsv").write_text(TOPICS)
    (folder / "qrels.txt").write_text(qrels)
    (folder / "docs" / "part-1.jsonl").write_text(_jsonl(docs[:3]))
    (folder / "docs" / "part-2.jsonl").write_text(_jsonl(docs[3:]))
    (folder / "dataset.yaml").write_text(spec + "files:\n  topics: topics.tsv\n  qrels: qrels.txt\n  corpus: docs\n")
    return folder


def _other(docs=DOCS):
    return [(docs[0][0], OTHER_TEXT), *docs[1:]]


RENAMED = [("x" + docid[1:], text) for docid, text in DOCS]  # other documents: other ids
RENAMED_QRELS = QRELS.replace(" 0 d", " 0 x")


def _edit_line(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


# each kind: (folder, other content?) -> the dataset read from it
def _file(folder: Path, other: bool):
    folder.mkdir(parents=True)
    corpus = _jsonl(_other() if other else DOCS)
    for name, text in (("topics.tsv", TOPICS), ("qrels.txt", QRELS), ("docs.jsonl", corpus)):
        (folder / name).write_text(text)
    return local_dataset_from_files({"topics": folder / "topics.tsv", "qrels": folder / "qrels.txt",
                                     "corpus": folder / "docs.jsonl"})


def _corpus_folder_on_the_command_line(folder: Path, other: bool):
    write_folder_corpus_dataset(folder, _other() if other else DOCS)
    return local_dataset_from_files({"topics": folder / "topics.tsv", "qrels": folder / "qrels.txt",
                                     "corpus": folder / "docs"})


def _dataset_yaml(folder: Path, other: bool):
    return get_dataset(str(write_folder_corpus_dataset(folder, _other() if other else DOCS)))


def _beir(folder: Path, other: bool):
    shutil.copytree(FIXTURES / "beir-tiny", folder / "beir-tiny")
    if other:
        _edit_line(folder / "beir-tiny" / "corpus.jsonl", "the sky is blue on a clear day", OTHER_TEXT)
    return get_dataset(str(folder / "beir-tiny"))


def _msmarco(folder: Path, other: bool):
    shutil.copytree(FIXTURES / "msmarco-passage-tiny", folder / "msmarco")
    if other:
        _edit_line(folder / "msmarco" / "collection.tsv", "the sky is blue on a clear day", OTHER_TEXT)
    return get_dataset(str(folder / "msmarco"))


KINDS = {"file": _file, "--corpus DIR": _corpus_folder_on_the_command_line, "dataset.yaml": _dataset_yaml,
         "BEIR folder": _beir, "MS MARCO folder": _msmarco}


def keys(dataset) -> tuple[str, str]:
    """(the cached index's folder name, the key of a recipe trained on the dataset)."""
    return dataset.index_key, RecipeIdentity.resolve("hcan", dataset, None, {"epochs": 1}).key()


@pytest.mark.parametrize("make", KINDS.values(), ids=KINDS.keys())
def test_two_contents_never_share_an_index_or_a_recipe_and_one_content_always_does(make, tmp_path, cache):
    first, copy, other = (make(tmp_path / where, other) for where, other in
                          (("first", False), ("copy", False), ("other", True)))
    assert first.name == copy.name == other.name  # the name alone tells them apart nowhere
    index_key, recipe_key = keys(first)
    assert keys(copy) == (index_key, recipe_key)
    other_index, other_recipe = keys(other)
    assert other_index != index_key and other_recipe != recipe_key


@pytest.mark.slow
@pytest.mark.parametrize("make", KINDS.values(), ids=KINDS.keys())
def test_two_contents_never_share_a_stage_output_and_one_content_always_does(make, tmp_path, cache):
    """BM25 on each: the copy's run is read back (no new index, no new stage output), the other content's is its own."""
    def entries() -> tuple[int, int]:
        return len(list((cache / "indexes").iterdir())), len(list((cache / "stages").rglob("*.json.gz")))

    runs, counts = {}, {}
    for where, other in (("first", False), ("copy", False), ("other", True)):
        runs[where] = BM25(hits=10).run(make(tmp_path / where, other)).ranking
        counts[where] = entries()
    assert runs["copy"] == runs["first"] and counts["copy"] == counts["first"] == (1, 1)
    assert runs["other"] != runs["first"] and counts["other"] == (2, 2)


def test_how_a_dataset_yaml_reads_its_files_keys_the_index_and_the_recipe(tmp_path, cache):
    plain = keys(_dataset_yaml(tmp_path / "plain", False))
    chinese = keys(get_dataset(str(write_folder_corpus_dataset(tmp_path / "zh", spec="name: mine\nlanguage: zh\n"))))
    graded = keys(get_dataset(str(write_folder_corpus_dataset(tmp_path / "graded", spec="name: mine\nrel_level: 2\n"))))
    assert chinese[0] != plain[0] and chinese[1] != plain[1]  # another analyzer: another index
    assert graded[0] == plain[0] and graded[1] != plain[1]  # the same documents; other relevant labels to train on


@pytest.mark.slow
def test_dataset_folders_with_other_folder_corpora_get_their_own_index_and_run(tmp_path, cache, capsys):
    """The issue's case: two dataset.yaml folders, each with a corpus folder. Before, both corpora had the digest of
    an empty build record: the second reused the first's index and cached run, listed its documents and scored AP
    0.0000 'from cache'."""
    runs = {}
    for name, docs, qrels in (("first", DOCS, QRELS), ("other", RENAMED, RENAMED_QRELS), ("copy", DOCS, QRELS)):
        folder = write_folder_corpus_dataset(tmp_path / name, docs, qrels=qrels)
        runs[name] = tmp_path / f"{name}.trec"
        code, out, err = irpipe(capsys, "run", "bm25() % 10", "--dataset", folder, "--output", runs[name],
                                "--eval", "AP")
        assert code == 0, err
        assert "AP  0.0000" not in out
    hits = {name: [line.split()[:5] for line in run.read_text().splitlines()] for name, run in runs.items()}
    assert hits["other"] and all(docid.startswith("x") for _, _, docid, _, _ in hits["other"])
    assert hits["copy"] == hits["first"]
    assert len(list((cache / "indexes").iterdir())) == 2  # the copy's content is the first's: its index reused


@pytest.fixture(scope="module")
def two_indexes(tmp_path_factory) -> tuple[Path, Path]:
    """Two Lucene indexes of other documents, without irpipe's build record (as Anserini or Pyserini build them)."""
    from pipeline.data.files import INDEX_METADATA
    from pipeline.retrieve.index import build_index

    root = tmp_path_factory.mktemp("bare-indexes")
    indexes = []
    for name, docs in (("first", DOCS), ("other", RENAMED)):
        build_index(({"id": d, "contents": t} for d, t in docs), root / name, source=name, threads=1)
        (root / name / INDEX_METADATA).unlink()
        indexes.append(root / name)
    return tuple(indexes)


@pytest.mark.slow
def test_an_index_folder_replaced_in_place_is_searched_anew(two_indexes, tmp_path, cache):
    """`--index DIR` (and `bm25(index=DIR)`) keyed by the index's content: before, by its build record, the same
    empty one for every index without one, so the replaced index's cached run came back. One process a search, as
    a process keeps an index it opened (pipeline/retrieve/index.py `open_index`)."""
    first, other = two_indexes
    searched, topics, qrels = tmp_path / "index", tmp_path / "topics.tsv", tmp_path / "qrels.txt"
    topics.write_text(TOPICS)
    qrels.write_text(QRELS)
    listed = []
    for source in (first, other):
        shutil.rmtree(searched, ignore_errors=True)
        shutil.copytree(source, searched)
        output = tmp_path / f"{source.name}.trec"
        command = ["run", "bm25() % 10", "--topics", topics, "--qrels", qrels, "--index", searched, "--output", output]
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", "-q", *map(str, command)], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        listed.append({line.split()[2] for line in output.read_text().splitlines()})
    assert listed[0] and not listed[0] & listed[1]


@pytest.mark.slow  # its two indexes
def test_a_dataset_yaml_index_folder_keys_recipes_by_its_content(two_indexes, tmp_path, cache):
    def dataset(where: str, index: Path):
        folder = tmp_path / where
        folder.mkdir()
        (folder / "topics.tsv").write_text(TOPICS)
        (folder / "qrels.txt").write_text(QRELS)
        shutil.copytree(index, folder / "index")
        (folder / "dataset.yaml").write_text("name: mine\nfiles:\n  topics: topics.tsv\n  qrels: qrels.txt\n"
                                             "  index: index\n")
        return get_dataset(str(folder))

    first, copy, other = dataset("first", two_indexes[0]), dataset("copy", two_indexes[0]), dataset("o", two_indexes[1])
    assert keys(first)[1] == keys(copy)[1] != keys(other)[1]


def test_topics_and_runs_made_in_python_key_stage_outputs_by_content(tmp_path):
    """A reranker's cached output is keyed by the topics' and the run's content, whoever made them."""
    def run(texts: dict) -> Run:
        return Run({"1": [("d1", 2.0), ("d2", 1.0)]}, texts)

    blue, other = {"d1": "the sky is blue", "d2": "blue sky"}, {"d1": "the sky is blue", "d2": "grass"}
    stage = Overlap(idf=False)
    with using(StageCache(tmp_path / "stages")) as stage_cache:
        outputs = [stage(Topics(topics), run(texts)).ranking for topics, texts in
                   (({"1": "blue sky"}, blue), ({"1": "blue sky"}, dict(blue)), ({"1": "blue sky"}, other),
                    ({"1": "green grass"}, blue))]
    assert (stage_cache.misses, stage_cache.hits) == (3, 1)  # the second call's content is the first's
    assert outputs[0] == outputs[1] and outputs[2] != outputs[0] and outputs[3] != outputs[0]


def test_a_file_digest_is_read_once_per_version_and_again_after_any_write(tmp_path, cache):
    file = tmp_path / "docs.jsonl"
    file.write_text("one\n")
    digest = content_digest(file)
    assert content_digest(tmp_path) != content_digest(file)
    record = cache / "digests" / f"{json_digest(str(file.resolve()))}.json"  # the file's, not its folder's
    remembered = json.loads(record.read_text())
    remembered["files"][""][-1] = "remembered"
    record.write_text(json.dumps(remembered))
    assert content_digest(file) == "remembered"  # an unchanged stamp: the record is read back, the file is not
    stat = file.stat()
    file.write_text("two\n")  # the same size and mtime: only the ctime and the bytes say it changed
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert content_digest(file) not in ("remembered", digest)
    record.write_text("{damaged")
    assert content_digest(file) not in ("remembered", digest)  # a damaged record is read again, not trusted


def test_a_folder_digest_follows_its_files_names_and_contents_but_not_hidden_files(tmp_path, cache):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.jsonl").write_text("one\n")
    digest = content_digest(folder)
    (folder / ".DS_Store").write_text("hidden")
    assert content_digest(folder) == digest  # the corpus readers skip it too
    (folder / "a.jsonl").rename(folder / "b.jsonl")
    assert content_digest(folder) != digest  # another name: another order of documents
    (folder / "b.jsonl").rename(folder / "a.jsonl")
    assert content_digest(folder) == digest
    (folder / "sub").mkdir()
    (folder / "sub" / "c.jsonl").write_text("")
    assert content_digest(folder) != digest


def test_a_cache_that_cannot_keep_the_record_costs_a_reading_not_a_failure(tmp_path, cache):
    file = tmp_path / "docs.jsonl"
    file.write_text("one\n")
    cache.mkdir()
    (cache / "digests").write_text("a file where the records' folder would be")
    assert content_digest(file) == hashlib.sha256(b"one\n").hexdigest()
