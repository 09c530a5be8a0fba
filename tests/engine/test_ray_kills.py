"""`irpipe encode --engine ray` killed mid-job, on a local cluster of 2 workers: a worker killed mid-encode (Ray
restarts it, its shard is encoded again) and the driver killed (SIGKILL) mid-encode, then the same command run
again. Each time the store is, file for file and byte for byte, the store of an uninterrupted local encode.

Slow (a Ray cluster, about 3 minutes on 2 shared cores): run with IRPIPE_SLOW_FAULTS=1, output in eval/FAULTS.md.
The kills wait on conditions (a shard file written, the manifest listing two shards), polled with generous
timeouts, never on sleeps that a loaded machine can outrun."""
from __future__ import annotations

import filecmp
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipeline.cli import main
from support import REPO, save_tiny_bert

ray = pytest.importorskip("ray", reason="the ray engine's tests need the `ray` package (irpipe's install brings it)")
pytestmark = pytest.mark.skipif(os.environ.get("IRPIPE_SLOW_FAULTS", "") in ("", "0"),
                                reason="slow fault tests (a Ray cluster, minutes on 2 cores): IRPIPE_SLOW_FAULTS=1 "
                                       "pytest tests/engine/test_ray_kills.py (output recorded in eval/FAULTS.md)")

SHARD_SIZE, DOCUMENTS = 8, 640  # 80 shards: seconds of work, long enough to be killed in the middle


@pytest.fixture(scope="module")
def cluster():
    """One local cluster for the module, as the engine starts one (2 CPUs, loopback only): its address."""
    from pipeline.engine import EngineOptions
    from pipeline.engine.cluster import connect, disconnect

    connect(EngineOptions(kind="ray", workers=2))
    yield ray.get_runtime_context().gcs_address
    disconnect()


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> dict:
    """A tiny BERT, DOCUMENTS question-answer pairs of our own, and their store encoded locally (uninterrupted)."""
    folder = tmp_path_factory.mktemp("encode")
    bert = save_tiny_bert(folder / "bert", layers=1)
    data = folder / "qa"
    data.mkdir()
    rows = [(1 - i % 2, f"question {i // 2}", f"answer number {i}: " + " ".join(f"w{(i * j) % 503}" for j in range(40)))
            for i in range(DOCUMENTS)]
    (data / "pairs.tsv").write_text("".join(f"{label}\t{a}\t{b}\n" for label, a, b in rows))
    (data / "dataset.yaml").write_text("kind: pairs\nfiles: {pairs: pairs.tsv}\n")
    argv = ["encode", "--model", "biencoder", "--set", f"bert={bert}", "--dataset", str(data), "--shard-size",
            str(SHARD_SIZE), "--batch-size", "8"]
    assert main(["-q", *argv, "--output", str(folder / "local")]) == 0
    return {"argv": argv, "local": folder / "local"}


def assert_same_store(store: Path, reference: Path) -> None:
    """Every shard file byte for byte the same; the manifests the same but for the command that made each (its
    --output and engine flags differ)."""
    names = sorted(p.name for p in reference.iterdir() if not p.name.startswith("."))
    assert sorted(p.name for p in store.iterdir() if not p.name.startswith(".")) == names
    shards = [name for name in names if name != "manifest.json"]
    assert len(shards) == 2 * DOCUMENTS // SHARD_SIZE
    assert filecmp.cmpfiles(reference, store, shards, shallow=False)[1:] == ([], [])
    manifests = [{k: v for k, v in json.loads((folder / "manifest.json").read_text()).items() if k != "command"}
                 for folder in (store, reference)]
    assert manifests[0] == manifests[1]


def _listed(store: Path) -> int:
    try:
        return len(json.loads((store / "manifest.json").read_text())["shards"])
    except (OSError, ValueError):
        return 0


def test_a_worker_killed_mid_encode_changes_nothing(cluster, work, tmp_path, caplog):
    """One actor killed (ray.kill, restart allowed) once the store holds a shard: the same store."""
    store, killed = tmp_path / "ray", {}

    def kill_one_worker():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            actors = [a for a in ray.util.list_named_actors(all_namespaces=True)
                      if a["name"].startswith("irpipe-encode")]
            if actors and _listed(store):
                killed["listed"] = _listed(store)
                ray.kill(ray.get_actor(actors[0]["name"], namespace=actors[0]["namespace"]), no_restart=False)
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    assert main([*work["argv"], "--output", str(store), "--engine", "ray", "--workers", "2",
                 "--ray-address", cluster]) == 0
    killer.join()
    assert 0 < killed["listed"] < DOCUMENTS // SHARD_SIZE, killed  # killed mid-encode
    assert re.search(r"worker \d was restarted", caplog.text)
    assert_same_store(store, work["local"])


def test_the_driver_killed_mid_encode_then_the_same_command_finishes_it(cluster, work, tmp_path, caplog):
    """The driver (`irpipe encode`) SIGKILLed once the manifest lists 2 shards; the same command again skips what is
    stored and ends with the same store."""
    store = tmp_path / "ray"
    argv = [*work["argv"], "--output", str(store), "--engine", "ray", "--workers", "2", "--ray-address", cluster]
    first = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "-q", *argv],
                             env=os.environ | {"PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while _listed(store) < 2 and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    err = first.communicate(timeout=120)[1]
    listed = _listed(store)
    assert 2 <= listed < DOCUMENTS // SHARD_SIZE, (listed, err[-2000:])  # killed mid-encode
    assert main(argv) == 0
    stored = int(re.search(r"(\d+) documents already stored", caplog.text).group(1))
    assert stored >= listed * SHARD_SIZE
    assert_same_store(store, work["local"])
