"""A cold run longer than a session: `irpipe reproduce` keeps a pin's cold cache between attempts, so that a run
killed part-way (a session's end, a reboot that keeps the disk) resumes where it stopped and its cost is still the
cost of the whole work.

Each cold run of a pin gets a folder of its own under the user's cache, keyed by the pin's recipe and the software
(pipeline/cold_runs.py `recipe_key`, `software_key`), so that only an attempt of the same recipe in the same
environment resumes:

    $IRPIPE_CACHE/cold-runs/<name>-<recipe>-<software>/
        cache/          the child's IRPIPE_CACHE, empty at the first attempt: datasets, indexes, stage outputs, trained
                        models (a training resumes from its last saved epoch: pipeline/training/loop.py)
        attempts.json   {"pin", "recipe", "software", "attempts": [{"start", "seconds", "load_average"}]}, the
                        running attempt's seconds rewritten (atomically) every HEARTBEAT seconds
        stderr.txt      the running attempt's error output
        running.lock    locked (flock) while an attempt runs: a second process leaves the folder alone

Everything in `cache/` was made by this cold run's own attempts, whose seconds the ledger holds, so the finished
result counts as cold: `finished_result` sets its cost to the sum of the attempts (an interrupted attempt counted to
its last heartbeat, so at most HEARTBEAT seconds short), records them under `resumed` with what the last attempt read
back from the earlier ones, and empties `reused` (nothing came from outside the cold run). A run that ends with a
result removes its folder; one that ends without (an error, a kill) leaves it for the next attempt; one whose ledger
cannot be read is refused (`damaged`). Folders of the same pin for another recipe or software can never resume:
`stale` names them for removal.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

from pipeline.data.files import atomic_write, cache_root, parse_json

ROOT = "cold-runs"  # under the user's irpipe cache
LEDGER = "attempts.json"
LOCK = "running.lock"  # held (flock) by the process running an attempt: a second one is refused, a killed one frees it
HEARTBEAT = 10.0  # seconds between rewrites of the running attempt's seconds
BUSY = 75  # the exit status run_attempt gives when another process holds the folder (EX_TEMPFAIL)


def folder(name: str, recipe: str, software: str) -> Path:
    """The cold-run folder of pin `name` at these keys (under the irpipe cache of the process asking)."""
    return cache_root() / ROOT / f"{name}-{recipe}-{software}"


def ledger(where: Path) -> dict:
    """The folder's record of attempts ({} when none was started there or it is unreadable)."""
    try:
        found = parse_json((Path(where) / LEDGER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) and isinstance(found.get("attempts"), list) else {}


def damaged(where: Path) -> bool:
    """Whether the folder's ledger is there but cannot be read: the seconds of its earlier attempts are unknown."""
    return (Path(where) / LEDGER).exists() and not ledger(where)


def earlier_seconds(where: Path) -> tuple[int, float]:
    """How many attempts the folder holds and their seconds."""
    return _attempts(ledger(where))


def _attempts(record: dict) -> tuple[int, float]:
    attempts = record.get("attempts", [])
    return len(attempts), sum(float(attempt.get("seconds", 0.0)) for attempt in attempts)


def stale(name: str, keep: Path) -> list[Path]:
    """The cold-run folders of pin `name` other than `keep`, made for another recipe or software, never to resume (but
    one a process is running an attempt in now)."""
    root = cache_root() / ROOT
    if not root.is_dir():
        return []
    return sorted(path for path in root.iterdir()
                  if path != Path(keep) and path.is_dir() and ledger(path).get("pin") == name and not running(path))


def running(where: Path) -> bool:
    """Whether a process holds the folder's lock: an attempt running there now."""
    try:
        with open(Path(where) / LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def run_attempt(command: list[str], environment: dict, where: Path, name: str, recipe: str,
                software: str) -> tuple[int, str]:
    """Run `command` as one attempt of the cold run in `where` (its cache/ as IRPIPE_CACHE), its seconds added to the
    ledger as it runs; (the exit status, the last line of its error output)."""
    where = Path(where)
    (where / "cache").mkdir(parents=True, exist_ok=True)
    with open(where / LOCK, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return BUSY, f"its cold run in {where} is running in another process; this one left it alone"
        return _attempt(command, environment, where, {"pin": name, "recipe": recipe, "software": software,
                                                      "attempts": ledger(where).get("attempts", [])})


def _attempt(command: list[str], environment: dict, where: Path, record: dict) -> tuple[int, str]:
    attempt = {"start": datetime.now(timezone.utc).replace(microsecond=0).isoformat(), "seconds": 0.0,
               "load_average": None}
    record["attempts"].append(attempt)
    start = time.perf_counter()

    def beat():
        attempt["seconds"] = round(time.perf_counter() - start, 2)
        attempt["load_average"] = round(os.getloadavg()[0], 1)
        _write(where, record)

    beat()
    with open(where / "stderr.txt", "w", encoding="utf-8") as errors:
        child = subprocess.Popen(command, env={**environment, "IRPIPE_CACHE": str(where / "cache")},
                                 stdout=subprocess.DEVNULL, stderr=errors, text=True)
        while True:
            try:
                code = child.wait(timeout=HEARTBEAT)
                break
            except subprocess.TimeoutExpired:
                beat()
    beat()
    lines = (where / "stderr.txt").read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return code, (lines or ["no output"])[-1]


def under_way(names) -> str:
    """A line naming the cold runs of the pins `names` that are running now or wait to resume (their attempts and
    seconds so far), or "" when there is none."""
    root, names = cache_root() / ROOT, set(names)
    records = {path: ledger(path) for path in root.iterdir() if path.is_dir()} if root.is_dir() else {}
    found = sorted((record["pin"], *_attempts(record), running(path)) for path, record in records.items()
                   if record.get("pin") in names)
    return ("" if not found else f"under way in {root} (the next cold run of each resumes it): "
            + ", ".join(f"{name} ({'running now, ' if now else ''}{attempts} attempt(s), {seconds / 3600:.2f} h so far)"
                        for name, attempts, seconds, now in found))


def finished_result(result: dict, where: Path) -> dict:
    """`result` (the last attempt's, just written) as the cold run of all the folder's attempts: unchanged when the
    run took one attempt; else its cost the attempts' seconds (the last one's as the result measured them)."""
    attempts = ledger(where).get("attempts", [])
    if len(attempts) < 2 or not isinstance(result.get("reused"), dict):
        return result
    earlier = [round(float(attempt.get("seconds", 0.0)), 2) for attempt in attempts[:-1]]
    seconds = round(sum(earlier) + result["seconds"], 2)
    cost = {"seconds": seconds, "date": result["date"], "cores": os.cpu_count(),
            "load_average": round(os.getloadavg()[0], 1), "attempts": len(attempts)}
    resumed = {"attempts": len(attempts), "seconds": earlier + [result["seconds"]],
               "reused": result["reused"]}  # what the last attempt read back from the earlier ones
    return {**result, "reused": {}, "cost": cost, "resumed": resumed}


def finish(result: dict, where: Path, written: Path) -> dict:
    """The ended cold run's result: made the run of all the folder's attempts (`finished_result`, rewritten in place
    at `written` when it took several), and its folder removed."""
    whole = finished_result(result, where)
    if whole is not result:
        with atomic_write(written) as out:
            json.dump(whole, out, indent=2)
            out.write("\n")
    remove(where)
    return whole


def remove(where: Path) -> None:
    shutil.rmtree(where, ignore_errors=True)


def _write(where: Path, record: dict) -> None:
    with atomic_write(Path(where) / LEDGER) as out:
        json.dump(record, out, indent=1)
        out.write("\n")
