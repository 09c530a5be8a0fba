"""A cold run that ends without a result (killed at a session's end) resumes at the next `irpipe reproduce` in the
cache it left, and its cost is the seconds of every attempt (pipeline/cold_attempts.py)."""
from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from pipeline import cold_attempts, cold_runs
from pipeline.reproduce import dry_run, pins, run_one
from test_reproduce import _experiment


def _pin(tmp_path, name="tiny-bm25"):
    """The pin of tests/test_reproduce.py's tiny experiment file, written there if it is not yet."""
    if not (tmp_path / "eval" / f"{name}.yaml").exists():
        _experiment(tmp_path, name)
    return next(pin for pin in pins(tmp_path / "eval", tmp_path / "results") if pin.name == name)


def _folder(pin):
    return cold_attempts.folder(pin.name, cold_runs.recipe_key(pin.path), cold_runs.current_software())


@pytest.mark.slow
def test_an_attempt_that_ended_without_a_result_is_resumed_and_every_attempt_is_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "user-cache"))
    pin = _pin(tmp_path)
    where = _folder(pin)
    # a first attempt that did the work (index, both BM25 runs) but ended before writing the pin's result
    elsewhere = [sys.executable, "-m", "pipeline.cli", "-q", "run", str(pin.path), "--results-dir",
                 str(tmp_path / "lost")]
    code, _ = cold_attempts.run_attempt(elsewhere, {}, where, pin.name, "r", "s")
    first = cold_attempts.ledger(where)["attempts"][0]["seconds"]
    assert code == 0 and first > 0 and not (tmp_path / "results").exists()
    assert "resumes its cold run after 1 attempt(s) of " in dry_run([pin], warm=False)

    said = []
    result, error = run_one(pin, tmp_path / "results", warm=False, echo=said.append)
    assert not error and said == [f"    resuming its cold run in {where}: 1 earlier attempt(s), "
                                  f"{first:.1f} s"]
    assert result["reused"] == {} and cold_runs.is_cold(result)  # nothing came from outside the cold run
    assert result["resumed"] == {"attempts": 2, "seconds": [first, result["seconds"]],
                                 "reused": {"stage outputs": 2, "indexes": 1}}  # what the 2nd read of the 1st's work
    assert result["cost"]["seconds"] == round(first + result["seconds"], 2) and result["cost"]["attempts"] == 2
    assert json.loads((tmp_path / "results" / "tiny-bm25.json").read_text()) == result
    assert not where.exists()  # ended with a result: nothing left to resume
    entry = cold_runs.entry(pin.path, result)
    assert entry["seconds"] == result["cost"]["seconds"] and entry["attempts"] == 2


@pytest.mark.slow
def test_a_cold_run_in_one_attempt_is_unchanged_and_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "user-cache"))
    pin = _pin(tmp_path)
    result, error = run_one(pin, tmp_path / "results", warm=False, echo=print)
    assert not error and "resumed" not in result and result["cost"]["seconds"] == result["seconds"]
    assert "attempts" not in result["cost"] and not any((tmp_path / "user-cache" / cold_attempts.ROOT).iterdir())


def test_a_run_that_fails_keeps_its_folder_to_resume_and_another_recipes_folder_is_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "user-cache"))
    pin = _pin(tmp_path)
    old = cold_attempts.folder(pin.name, "another-recipe", "s")
    cold_attempts.run_attempt([sys.executable, "-c", "pass"], {}, old, pin.name, "another-recipe", "s")
    pin.path.write_text(pin.path.read_text().replace("dataset: ", "dataset: /no/such/"))
    said = []
    broken = _pin(tmp_path)  # its recipe changed: another folder
    result, error = run_one(broken, tmp_path / "results", warm=False, echo=said.append)
    assert result is None and error.startswith("exit 2: ")
    assert f"(its work so far is kept in {_folder(broken)}: the next cold run of it resumes there)" in error
    assert said == [f"    removed {old}: a cold run of another recipe or software, never to resume"]
    assert not old.exists() and cold_attempts.earlier_seconds(_folder(broken))[0] == 1


def test_a_folder_whose_ledger_cannot_be_read_is_refused_naming_it_and_kept(tmp_path, monkeypatch):
    """Its cache holds work whose seconds are unknown: run from it, the result would be neither cold nor recorded."""
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "user-cache"))
    pin = _pin(tmp_path)
    where = _folder(pin)
    (where / "cache").mkdir(parents=True)
    (where / cold_attempts.LEDGER).write_text('{"pin": "tiny-bm25", "attempts": [{"sec')
    result, error = run_one(pin, tmp_path / "results", warm=False, echo=print)
    assert result is None and f"ledger {where / cold_attempts.LEDGER} cannot be read" in error
    assert error.endswith(f"remove {where} to start the cold run over") and (where / "cache").is_dir()
    assert not (tmp_path / "results").exists()


def test_the_running_attempts_seconds_are_on_disk_while_it_runs(tmp_path, monkeypatch):
    """A kill at any instant loses at most a heartbeat of the attempt's seconds."""
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "user-cache"))
    monkeypatch.setattr(cold_attempts, "HEARTBEAT", 0.1)
    where = tmp_path / "cold"
    running = threading.Thread(target=cold_attempts.run_attempt,
                               args=([sys.executable, "-c", "import time; time.sleep(3)"], {}, where, "p", "r", "s"))
    running.start()
    time.sleep(2)
    seen = cold_attempts.ledger(where)["attempts"][0]["seconds"]
    running.join()
    assert 1.0 <= seen < 3 and cold_attempts.ledger(where)["attempts"][0]["seconds"] >= 3
    assert cold_attempts.ledger(where)["pin"] == "p" and (where / "cache").is_dir()


def test_a_second_process_leaves_a_running_cold_run_alone_and_the_list_says_what_is_under_way(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "user-cache"))
    where = cold_attempts.folder("p", "r", "s")
    cold_attempts.run_attempt([sys.executable, "-c", "pass"], {}, where, "p", "r", "s")
    with open(where / cold_attempts.LOCK, "w") as held:  # as the process running an attempt holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, said = cold_attempts.run_attempt([sys.executable, "-c", "pass"], {}, where, "p", "r", "s")
    assert code == cold_attempts.BUSY and said == (f"its cold run in {where} is running in another process; this one "
                                                   "left it alone")
    attempts, seconds = cold_attempts.earlier_seconds(where)
    assert attempts == 1  # the refused one added nothing
    assert cold_attempts.under_way(["p", "q"]) == (
        f"under way in {where.parent} (the next cold run of each resumes it): p (1 attempt(s), "
        f"{seconds / 3600:.2f} h so far)")
    assert cold_attempts.under_way(["q"]) == ""
    with open(where / cold_attempts.LOCK, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert "p (running now, 1 attempt(s), " in cold_attempts.under_way(["p"])
    with open(where / cold_attempts.LOCK, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert cold_attempts.stale("p", keep=tmp_path / "another") == []  # running: not removed under its process
    assert cold_attempts.stale("p", keep=tmp_path / "another") == [where]


def test_a_pin_whose_cold_run_another_process_is_running_is_skipped(tmp_path, monkeypatch):
    """Two `reproduce --record` processes side by side share the pins: each passes over the one the other runs."""
    import fcntl

    from pipeline.reproduce import run_selection

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "user-cache"))
    pin = _pin(tmp_path)
    where = _folder(pin)
    where.mkdir(parents=True)
    said = []
    with open(where / cold_attempts.LOCK, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        rows = run_selection([pin], tmp_path / "results", warm=False, echo=said.append)
        assert dry_run([pin], warm=False).endswith("# unmeasured, its cold run is running in another process")
    assert rows == [] and said == ["[1/1] tiny-bm25: its cold run is running in another process, skipped"]
