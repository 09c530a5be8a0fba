"""The ray engine on a local cluster of 2 workers (one per module): BM25 search, HCAN and monobert reranking and
`irpipe encode` write byte-identical outputs to local runs; a worker killed mid-run changes nothing; an interrupted
job, run again, skips the shards it had finished; shards that arrive out of order are merged in order as they come."""
from __future__ import annotations

import filecmp
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.cli import main
from support import REPO, needs_shared_data, save_tiny_bert

ray = pytest.importorskip("ray", reason="the ray engine's tests need the `ray` package (irpipe's install brings it)")
pytestmark = needs_shared_data

RAY = ["--engine", "ray", "--workers", "2"]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local cluster for the module, started as the engine starts one: 2 CPUs (one per worker), loopback only,
    no dashboard. Yields its address and this process's crash-signal handlers from before and after joining it."""
    from pipeline.engine import EngineOptions
    from pipeline.engine.cluster import connect, disconnect, signal_handlers

    before = signal_handlers()
    connect(EngineOptions(kind="ray", workers=2))
    yield SimpleNamespace(address=ray.get_runtime_context().gcs_address, before=before, after=signal_handlers())
    handler = slice(0, 8)
    kept = {n: a[handler] for n, a in signal_handlers().items()}  # the JVM's, once a test searched here
    disconnect()
    assert {n: a[handler] for n, a in signal_handlers().items()} == kept


@pytest.mark.slow
def test_joining_ray_leaves_this_process_its_signal_handlers(cluster):
    """ray.init installs Ray's crash handler for SIGSEGV & co. and SIGTERM; a JVM in this process (Lucene) handles
    SIGSEGV itself, so the engine puts the old handlers back (the test suite segfaulted at random without it)."""
    handler = slice(0, 8)  # struct sigaction starts with the handler's address (the rest holds undefined bytes)
    assert {n: a[handler] for n, a in cluster.after.items()} == {n: a[handler] for n, a in cluster.before.items()}


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Job folders (the driver's) under this test's own cache."""
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def wikiqa_subset(tmp_path_factory) -> tuple[Path, list[str], list[str]]:
    """The first 20 WikiQA test queries' candidates (about 190 pairs, texts shipped by the dataset) as a run file,
    with their query and candidate texts."""
    from pipeline.data.registry import get_dataset

    dataset = get_dataset("wikiqa/test")
    run, topics = dataset.run(), dataset.topics()
    qids = list(run.ranking)[:20]
    run.ranking = {qid: run.ranking[qid] for qid in qids}
    path = tmp_path_factory.mktemp("runs") / "wikiqa-20.trec"
    run.write(path)
    docs = [run.texts[d] for qid in qids for d, _ in run.ranking[qid]]
    return path, [topics[qid] for qid in qids], docs


def _hcan(folder: Path, queries: list[str], docs: list[str]) -> Path:
    import torch

    from pipeline.rerank.checkpoint import save_checkpoint
    from pipeline.rerank.models.hcan import HCAN, HCANConfig

    torch.manual_seed(0)
    config = HCANConfig(embeddings="random", embedding_dim=8, filters=6, sm_hidden=10, max_query_length=12,
                        max_doc_length=40, dropout=0.0)
    return save_checkpoint(HCAN.from_training_data(config, queries, docs), folder)


def _monobert(folder: Path, bert: Path | None = None) -> Path:
    """monobert on `bert` (default: all-MiniLM-L6-v2's real weights, ~50 pairs/s a core) with a seeded head."""
    import torch

    from pipeline.rerank.checkpoint import save_checkpoint
    from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig

    torch.manual_seed(0)
    config = MonoBERTConfig(**({"bert": str(bert)} if bert else {}), max_length=128)
    return save_checkpoint(MonoBERT(config), folder)


def _rerank(model: Path, run: Path, output: Path, *extra: str) -> list[str]:
    argv = ["rerank", "--model", str(model), "--run", str(run), "--dataset", "wikiqa/test", "--output", str(output),
            "--batch-size", "8", "--no-cache", *extra]  # each engine computes: the stage cache keys no engine
    assert main(argv) == 0
    return output.read_text().splitlines()


@pytest.mark.slow
def test_bm25_search_is_identical(cacm_index, tmp_path):
    local, on_ray = tmp_path / "local.trec", tmp_path / "ray.trec"
    for output, extra in ((local, []), (on_ray, [*RAY, "--shard-queries", "16"])):
        assert main(["search", "--dataset", "cacm", "--index", str(cacm_index), "--output", str(output), *extra]) == 0
    assert filecmp.cmp(local, on_ray, shallow=False) and len(local.read_text().splitlines()) > 50_000


@pytest.mark.slow
def test_keyword_bm25_runs_on_the_cluster_too(cacm_index, tmp_path, caplog):
    """bm25kw is a retriever like bm25: on the ray engine its shards run on the workers, with the same run."""
    from pipeline.retrieve.keyword_dictionary import Keyword, KeywordDictionary

    dictionary = KeywordDictionary([Keyword(word, "cs", 2.0, 1, 1, 1, 1) for word in ("algorithm", "comput")], "en")
    path = str(dictionary.save(tmp_path / "cs.tsv"))
    outputs = {name: tmp_path / name / "bm25kw.trec" for name in ("ray", "local")}  # one name: one run tag
    for name, extra in (("ray", [*RAY, "--shard-queries", "32"]), ("local", [])):
        assert main(["run", f"bm25kw(dict={path}, index={cacm_index}, hits=100)", "--dataset", "cacm",
                     "--output", str(outputs[name]), "--no-cache", "--results-dir", str(tmp_path / "results"),
                     *extra]) == 0
    assert filecmp.cmp(outputs["ray"], outputs["local"], shallow=False)
    assert "bm25kw: 2 shards" in caplog.text


@pytest.mark.slow
def test_an_experiment_file_runs_on_its_engine(cacm_index, tmp_path, caplog):
    """`engine: ray` in the file; `--engine local` on the command line overrides it: the same run file."""
    experiment = tmp_path / "cacm-ray.yaml"
    experiment.write_text(f"dataset: cacm\npipeline: bm25(index={cacm_index}, hits=100)\nmeasures: [AP]\n"
                          "engine: ray\n")
    outputs = {name: tmp_path / f"{name}.trec" for name in ("ray", "local")}
    for name, extra in (("ray", ["--shard-queries", "32"]), ("local", ["--engine", "local"])):
        assert main(["run", str(experiment), "--output", str(outputs[name]), "--no-cache", "--results-dir",
                     str(tmp_path / "results"), *extra]) == 0
    assert filecmp.cmp(outputs["ray"], outputs["local"], shallow=False)
    assert caplog.text.count("bm25: 2 shards, 0 done before") == 1  # the file's engine ran once, the override not


def test_shards_merge_in_order_as_they_arrive(tmp_path):
    """InOrder merges shard i the moment 0..i are in, whatever order they come in, reading back in its turn a
    shard an earlier run finished."""
    import random

    from pipeline.engine.jobs import InOrder, JobFolder

    job = JobFolder("merge", [], root=tmp_path)
    for number in (3, 6):  # finished by an earlier run
        job.save(number, {"shard": number})
    for seed in range(20):
        merged, arrivals = [], [n for n in range(10) if n not in (3, 6)]
        random.Random(seed).shuffle(arrivals)
        merge = InOrder(lambda number, result: merged.append((number, result["shard"])), job.load)
        merge.skip(3)
        merge.skip(6)
        for count, number in enumerate(arrivals, start=1):
            merge.add(number, {"shard": number})
            ready = next(n for n in range(11) if n not in arrivals[:count] + [3, 6])  # the first not yet in
            assert [n for n, _ in merged] == list(range(ready))  # merged as far as it can go, no further
        merge.finish(10)
        assert merged == [(n, n) for n in range(10)]
    with pytest.raises(RuntimeError, match="merged 1 of 3 shards; still waiting: \\[2\\]"):
        merge = InOrder(lambda number, result: None, job.load)
        merge.add(0, {})
        merge.add(2, {})
        merge.finish(3)


@pytest.mark.slow
def test_a_slow_shard_arriving_late_changes_nothing(cacm_index, cacm_topics_file, tmp_path):
    """Shard 1 of 8 held back 3 s on its worker: the later shards come before it (the other worker takes them) and
    are merged as their turn comes; the run is the local run, to the last bit of every score, and so is its file."""
    from pipeline.data.topics import read_topics
    from pipeline.engine import EngineOptions
    from pipeline.retrieve.on_cluster import search_on_cluster
    from pipeline.stages.bm25 import BM25

    topics = read_topics(cacm_topics_file)
    slow = list(topics.queries)[8:16]

    class SlowShardBM25(BM25):  # defined here: Ray sends it to the workers by value
        def transform(self, shard, run):
            if set(shard.queries) == set(slow):
                time.sleep(3)
            return super().transform(shard, run)

    local = BM25(str(cacm_index), hits=200).bind()(topics)
    on_ray, stats = search_on_cluster(SlowShardBM25(str(cacm_index), hits=200), topics,
                                      EngineOptions("ray", workers=2, shard_queries=8))
    assert len(topics) == 64 and stats["arrived"].index(1) > stats["arrived"].index(2)  # out of order
    assert sorted(stats["arrived"]) == list(range(8)) and stats["tail_seconds"] < 5  # no merge after the last
    assert [worker["niceness"] for worker in stats["workers"]] == [0, 0]  # not Ray's 15: see cluster.WORKER_NICENESS
    local.write(tmp_path / "local.trec")
    on_ray.write(tmp_path / "ray.trec")
    assert filecmp.cmp(tmp_path / "local.trec", tmp_path / "ray.trec", shallow=False)
    assert on_ray.ranking == local.ranking and on_ray.tag == local.tag and list(on_ray.ranking) == list(topics.queries)


@pytest.mark.slow
def test_two_shards_go_to_two_workers(cacm_index, cacm_topics_file):
    """Shards are handed out round robin: with 2 shards and 2 workers each works one (the first worker took both
    before, as it was given its IN_FLIGHT shards before the second got any). Each reports its peak memory."""
    from pipeline.data.topics import read_topics
    from pipeline.engine import EngineOptions
    from pipeline.retrieve.on_cluster import search_on_cluster
    from pipeline.stages.bm25 import BM25

    topics = read_topics(cacm_topics_file)
    _, stats = search_on_cluster(BM25(str(cacm_index), hits=10), topics, EngineOptions("ray", workers=2,
                                                                                       shard_queries=32))
    assert len(topics) == 64 and [worker["shards"] for worker in stats["workers"]] == [1, 1]
    assert all(worker["peak_rss_mib"] > 100 for worker in stats["workers"])  # each worker's own (its JVM's too)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["hcan", "monobert"])
def test_rerank_is_identical(model, wikiqa_subset, tmp_path):
    run, queries, docs = wikiqa_subset
    checkpoint = _hcan(tmp_path / "hcan", queries, docs) if model == "hcan" else \
        _monobert(tmp_path / "monobert", save_tiny_bert(tmp_path / "tiny-bert"))
    local = _rerank(checkpoint, run, tmp_path / "local.trec")
    on_ray = _rerank(checkpoint, run, tmp_path / "ray.trec", *RAY, "--shard-pairs", "20")  # 24 pairs: 3 batches
    assert on_ray == local and len(local) == len(run.read_text().splitlines())
    assert len({line.split()[4] for line in local}) > len(local) // 2  # real, distinct scores
    assert not list((tmp_path / "cache" / "jobs").iterdir())  # a finished job's folder is removed


@pytest.mark.slow
def test_encode_is_identical(wikiqa_subset, tmp_path):
    run, _, _ = wikiqa_subset
    bert = save_tiny_bert(tmp_path / "tiny-bert")
    stores = {}
    for name, extra in (("local", []), ("ray", RAY)):
        stores[name] = tmp_path / name
        assert main(["encode", "--model", "biencoder", "--set", f"bert={bert}", "--run", str(run), "--dataset",
                     "wikiqa/test", "--output", str(stores[name]), "--shard-size", "40", "--batch-size", "8", *extra]) == 0
    files = sorted(p.name for p in stores["local"].iterdir())
    assert files == sorted(p.name for p in stores["ray"].iterdir()) and len(files) == 1 + 2 * 5  # 5 shards
    match, mismatch, errors = filecmp.cmpfiles(stores["local"], stores["ray"], files, shallow=False)
    assert (mismatch, errors) == ([], [])


@pytest.mark.slow
def test_a_second_encode_into_the_same_store_waits_for_the_first(wikiqa_subset, tmp_path, caplog):
    """`irpipe encode --engine ray` takes the store's lock, as a local encode does: while another process holds it,
    the encode waits (and says for whom), then writes the whole store."""
    run, _, _ = wikiqa_subset
    bert, store = save_tiny_bert(tmp_path / "tiny-bert"), tmp_path / "store"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pipeline.rerank.store import store_lock\n"
                               f"with store_lock({str(store)!r}):\n    print('held', flush=True)\n    time.sleep(3)"],
                              text=True, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert holder.stdout.readline().strip() == "held"
    assert main(["encode", "--model", "biencoder", "--set", f"bert={bert}", "--run", str(run), "--dataset",
                 "wikiqa/test", "--output", str(store), "--shard-size", "40", "--batch-size", "8", *RAY]) == 0
    holder.wait(timeout=30)
    assert f"encoding store {store}: waiting for pid {holder.pid}" in caplog.text
    assert len(list(store.glob("shard-*.bin"))) == 5


def _job_size(log: str) -> tuple[int, int]:
    """(shards, shards done before) of the last job the log announced: whole batches of one query's pairs make
    its shards (pipeline/rerank/on_cluster.py batch_shards), so their count is the engine's to say."""
    total, skipped = re.findall(r"(\d+) shards, (\d+) done before \(skipped\)", log)[-1]
    return int(total), int(skipped)


def _job_shards(cache: Path) -> int:
    return len(list(cache.glob("jobs/*/shard-*.json")))


@pytest.mark.slow
def test_a_killed_worker_changes_nothing(wikiqa_subset, tmp_path, caplog):
    """One actor killed (ray.kill) once the job has finished a shard: Ray restarts it, its shards are retried."""
    run, _, _ = wikiqa_subset
    checkpoint = _monobert(tmp_path / "monobert")
    local = _rerank(checkpoint, run, tmp_path / "local.trec")
    killed = {}

    def kill_one_worker():
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            actors = [a for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("irpipe-monobert-")]
            if actors and _job_shards(tmp_path / "cache"):
                killed["shards done"] = _job_shards(tmp_path / "cache")
                ray.kill(ray.get_actor(actors[0]["name"], namespace=actors[0]["namespace"]), no_restart=False)
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    on_ray = _rerank(checkpoint, run, tmp_path / "ray.trec", *RAY, "--shard-pairs", "8")
    killer.join()
    assert on_ray == local
    assert 0 < killed["shards done"] < _job_size(caplog.text)[0]
    assert re.search(r"worker \d was restarted", caplog.text)


@pytest.mark.slow
def test_an_interrupted_job_resumes(wikiqa_subset, tmp_path, cluster, caplog):
    """A rerank killed (SIGKILL) after some shards, then run again: it skips them and ends identical."""
    run, _, _ = wikiqa_subset
    checkpoint = _monobert(tmp_path / "monobert")
    local = _rerank(checkpoint, run, tmp_path / "local.trec")
    argv = ["rerank", "--model", str(checkpoint), "--run", str(run), "--dataset", "wikiqa/test", "--output",
            str(tmp_path / "ray.trec"), "--batch-size", "8", *RAY, "--shard-pairs", "8", "--ray-address", cluster.address,
            "--amp", "none", "--no-cache"]  # fp32 in the subprocess too, on any CPU (conftest's fp32 patch reaches
    # this process only); --no-cache: the stage cache keys no engine, and the local run above is in it
    env = os.environ | {"PYTHONPATH": str(REPO)}
    first = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "-q", *argv], env=env)
    deadline = time.time() + 120
    while _job_shards(tmp_path / "cache") < 2 and first.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    first.kill()
    first.wait()
    finished = _job_shards(tmp_path / "cache")
    assert 2 <= finished and not (tmp_path / "ray.trec").exists()
    assert main(argv) == 0
    shards, skipped = _job_size(caplog.text)
    assert finished < shards and skipped >= finished
    assert (tmp_path / "ray.trec").read_text().splitlines() == local


@pytest.mark.slow
def test_a_search_worker_does_not_import_torch():
    """What a search worker's actor unpickles (the task, the BM25 stage) and runs: no torch, whose import was 2.3 s
    of every search worker's start."""
    loaded = subprocess.run([sys.executable, "-c", "import sys, pipeline.engine.cluster, pipeline.retrieve.on_cluster, "
                             "pipeline.stages.bm25; print('torch' in sys.modules)"],
                            cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"
