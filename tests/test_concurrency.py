"""Two processes at once on the same stage-cache entry, the same training recipe, the same run file: exactly one
result is published, whole; the other process waits and reuses it. A lock held by a killed process
does not block the next one. Each test starts real processes (`python -c`), released together."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.data.locks import file_lock, lock_holder, lock_path
from pipeline.data.runs import read_run
from support import write_collection

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 120


def start(code: str, tmp_path: Path, name: str, **env) -> subprocess.Popen:
    """`python -c code` in the repo, with IRPIPE_CACHE under tmp_path; it waits for tmp_path/go before its work
    (the `released()` line) so that both processes run the contested part together."""
    prelude = ("import os, sys, time\n"
               f"def released():\n    open({str(tmp_path / f'ready-{name}')!r}, 'w').close()\n"
               f"    while not os.path.exists({str(tmp_path / 'go')!r}): time.sleep(0.01)\n")
    environ = {**os.environ, "IRPIPE_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
               "PYTHONPATH": str(REPO), **env}
    return subprocess.Popen([sys.executable, "-c", prelude + code], cwd=tmp_path, env=environ, text=True,
                            stdout=open(tmp_path / f"{name}.out", "w"), stderr=open(tmp_path / f"{name}.err", "w"))


def together(processes: dict[str, subprocess.Popen], tmp_path: Path) -> dict[str, tuple[int, str, str]]:
    """Release the processes at once, once each is past its imports and waiting (its ready-NAME file: on a loaded
    machine a fixed pause let one process start after the other had finished); each one's (exit status, stdout,
    stderr) once it ends."""
    deadline = time.monotonic() + TIMEOUT
    while not all((tmp_path / f"ready-{name}").exists() for name in processes) and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "go").touch()
    return {name: (process.wait(timeout=TIMEOUT), (tmp_path / f"{name}.out").read_text(),
                   (tmp_path / f"{name}.err").read_text()) for name, process in processes.items()}


def finish(processes: dict[str, subprocess.Popen], tmp_path: Path) -> dict[str, str]:
    outputs = {}
    for name, (code, out, err) in together(processes, tmp_path).items():
        assert code == 0, err[-3000:]
        outputs[name] = out
    return outputs


# -- the stage cache ---------------------------------------------------------------------------------------------

STAGE = """
from pipeline import cache
from pipeline.data.runs import Run
from pipeline.data.topics import Topics
from pipeline.stage import Stage

class Slow(Stage):
    name, cacheable = "slow", True

    def transform(self, topics, run):
        with open("computed", "a") as out:
            out.write(f"{os.getpid()}\\n")
        time.sleep(1.5)
        return Run.from_scores({q: {f"d{i}": float(i) for i in range(500)} for q in topics.queries})

released()
with cache.using(cache.StageCache()):
    run = Slow()(Topics({"q1": "one", "q2": "two"}))
print(run.fingerprint())
"""


def test_two_processes_filling_one_stage_cache_entry_compute_it_once(tmp_path):
    outputs = finish({name: start(STAGE, tmp_path, name) for name in ("a", "b")}, tmp_path)
    assert len((tmp_path / "computed").read_text().split()) == 1  # the other process waited and read it back
    assert outputs["a"] == outputs["b"]
    entries = [p for p in (tmp_path / "cache" / "stages").rglob("*") if p.is_file()]
    assert len(entries) == 1 and entries[0].name.endswith(".json.gz")  # no lock or scratch file left behind


# -- the recipe cache --------------------------------------------------------------------------------------------

RECIPE = """
import torch
torch.set_num_threads(1)
from pipeline.training import recipes
from pipeline.training.recipes import Recipe

trainings = []
def counted(*args, **kwargs):
    trainings.append(args[2])
    return real(*args, **kwargs)
real, recipes.train = recipes.train, counted

recipe = Recipe("hcan", "./train", None, {"epochs": 1, "train_batch_size": 8}, {"embeddings": "random",
                "embedding_dim": 8, "filters": 8, "max_query_length": 12, "max_doc_length": 16}, device="cpu",
                threads=1)
released()
directory = recipe.ensure_trained()
print(len(trainings), directory)
"""


def answer_selection_folder(folder: Path) -> None:
    """Six questions, each with its right answer and three distractors (the answer-selection layout)."""
    facts = [("sky", "blue"), ("grass", "green"), ("snow", "white"), ("coal", "black"), ("blood", "red"),
             ("sun", "yellow")]
    rows = []
    for i, (thing, colour) in enumerate(facts):
        rows.append((f"what colour is the {thing}", f"the {thing} is {colour}", 1, f"t{i} 0 a{i} 1"))
        rows += [(f"what colour is the {thing}", text, 0, f"t{i} 0 f{j} 0") for j, text in
                 enumerate(["a cat sleeps on the mat", "numbers can be added", "rivers flow to the sea"])]
    folder.mkdir(parents=True)
    for name, column in (("a.toks", 0), ("b.toks", 1), ("sim.txt", 2), ("id.txt", 3)):
        (folder / name).write_text("".join(f"{row[column]}\n" for row in rows))
    (folder / "dataset.yaml").write_text("kind: answer-selection\n")


@pytest.mark.slow
def test_two_processes_training_one_recipe_train_it_once(tmp_path):
    answer_selection_folder(tmp_path / "train")
    outputs = finish({name: start(RECIPE, tmp_path, name) for name in ("a", "b")}, tmp_path)
    counts = sorted(int(out.split()[0]) for out in outputs.values())
    folders = {out.split()[1] for out in outputs.values()}
    assert counts == [0, 1], outputs  # one trained; the other waited for it and took it from the cache
    folder = Path(folders.pop())
    assert not folders and json.loads((folder / "config.json").read_text())["training"]["finished"]
    from pipeline.rerank.checkpoint import load_checkpoint

    load_checkpoint(folder)
    assert not lock_path(folder).exists()


# -- the same run file -------------------------------------------------------------------------------------------

WRITER = """
from pipeline.data.runs import Run
run = Run.from_scores({f"q{q}": {f"{TAG}{d}": float(d) for d in range(3000)} for q in range(20)}, tag=TAG)
released()
for _ in range(5):
    run.write("out.trec")
"""


@pytest.mark.slow
def test_two_processes_writing_one_run_file_leave_one_whole_run(tmp_path):
    processes = {tag: start(f"TAG = {tag!r}\n" + WRITER, tmp_path, tag) for tag in ("a", "b")}
    (tmp_path / "go").touch()
    seen = set()
    while any(p.poll() is None for p in processes.values()):  # read it while they write: never torn, never mixed
        if (tmp_path / "out.trec").exists():
            run = read_run(tmp_path / "out.trec")
            writers = {run.tag} | {docid[0] for hits in run.ranking.values() for docid, _ in hits}
            assert run.num_hits() == 20 * 3000 and len(writers) == 1
            seen.add(run.tag)
    finish(processes, tmp_path)
    assert read_run(tmp_path / "out.trec").tag in {"a", "b"} and seen
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no scratch left


# -- two builds of one index ------------------------------------------------------------------------------------

INDEXER = """
from pipeline.cli import main
from pipeline.retrieve import index

def anserini(parts, target, *args):  # Anserini's part without a JVM: an index folder naming its builder, slowly
    with open("built", "a") as out:
        out.write(f"{os.getpid()}\\n")
    target.mkdir()
    (target / "segments_1").write_text(str(os.getpid()))
    time.sleep(1.5)
    return 0, None  # (peak RSS, no document skipped)

index._run_anserini = anserini
index.check_indexed = lambda *args: None  # a fake index: no Lucene reader can count it
released()
"""


def test_two_index_builds_into_one_folder_take_turns_and_the_second_refuses(tmp_path):
    """Two `irpipe index --output idx` at once (before: both succeeded, the later deleting the earlier's index):
    one builds; the other waits for its lock, then finds the index and refuses it without --overwrite."""
    write_collection(tmp_path / "c")
    command = INDEXER + 'sys.exit(main(["-q", "index", "--input", "c/docs.jsonl", "--output", "idx"]))\n'
    results = together({name: start(command, tmp_path, name) for name in ("a", "b")}, tmp_path)
    assert sorted(code for code, _, _ in results.values()) == [0, 2], results
    [builder] = (tmp_path / "built").read_text().split()  # one build
    assert (tmp_path / "idx" / "segments_1").read_text() == builder and (tmp_path / "idx" / "irpipe-index.json").exists()
    [refused] = [err for code, _, err in results.values() if code == 2]
    assert f"building index idx: waiting for pid {builder} on {os.uname().nodename}" in refused
    assert "irpipe index: error: idx already exists: pass --overwrite to replace it" in refused
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no lock or scratch left


def test_two_processes_needing_one_cached_index_build_it_once(tmp_path):
    """A dataset's index in the cache, needed by two processes at once: built once, the other reuses it."""
    write_collection(tmp_path / "c")
    command = INDEXER + "from pipeline.data.registry import get_dataset\nprint(index.dataset_index(get_dataset('c')))\n"
    outputs = finish({name: start(command, tmp_path, name) for name in ("a", "b")}, tmp_path)
    assert len((tmp_path / "built").read_text().split()) == 1 and outputs["a"] == outputs["b"]


# -- the lock itself ---------------------------------------------------------------------------------------------

HOLDER = """
from pipeline.data.locks import file_lock
with file_lock("target", "test"):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_lock_held_by_a_killed_process_is_taken_at_once(tmp_path, how):
    holder = subprocess.Popen([sys.executable, "-c", "import time\n" + HOLDER], cwd=tmp_path, text=True,
                              stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert holder.stdout.readline().strip() == "held"
    assert lock_holder(tmp_path / "target") == f"pid {holder.pid} on {os.uname().nodename}"
    holder.send_signal(how)
    holder.wait(timeout=30)
    start_time = time.monotonic()
    with file_lock(tmp_path / "target", "test"):  # its lock file is still there, naming the dead process
        assert lock_holder(tmp_path / "target") == f"pid {os.getpid()} on {os.uname().nodename}"
    assert time.monotonic() - start_time < 5
    assert not lock_path(tmp_path / "target").exists()


def test_a_second_holder_waits_and_says_for_whom(tmp_path, caplog):
    holder = subprocess.Popen([sys.executable, "-c", "import time\n" + HOLDER.replace("600", "2")], cwd=tmp_path,
                              text=True, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert holder.stdout.readline().strip() == "held"
    start_time = time.monotonic()
    with file_lock(tmp_path / "target", "the thing"):
        waited = time.monotonic() - start_time
    holder.wait(timeout=30)
    assert waited > 0.5
    assert f"the thing: waiting for pid {holder.pid} on {os.uname().nodename}" in caplog.text
