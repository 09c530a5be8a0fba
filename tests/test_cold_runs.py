"""The cold re-run record (pipeline/cold_runs.py): only a run that read nothing from the cache enters it; a pin is
done here while its experiment file and the environment are the ones it was run on; `irpipe reproduce --record`
skips the pins done and says how much is left."""
from __future__ import annotations

import json

import pytest

from pipeline import cold_runs, environment
from support import irpipe, write_collection


def _pin_file(folder, name, expected="{AP: 0.9}", tolerance=0.2):
    data = write_collection(folder / "data")
    path = folder / "eval" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"dataset: {data}\npipeline: bm25(hits=10)\nmeasures: [AP]\nexpected: {expected}\n"
                    f"tolerance: {tolerance}\n")
    return path


def _result(status="OK", seconds=4.0, reused=None, captured=None):
    """A result as `irpipe run` writes it (pipeline/provenance.py record): cold when nothing was reused."""
    date = "2026-12-02T10:00:00+00:00"
    result = {"checks": {"AP": {"expected": 0.9, "score": 0.91234, "status": status}}, "seconds": seconds,
              "date": date, "reused": reused or {}, "environment": captured or environment.capture()}
    result["cost"] = ({"seconds": seconds, "date": date, "cores": 2, "load_average": 1.5} if not reused
                      else {"seconds": 99.0, "date": "2026-11-27T10:00:00+00:00"})  # a warm run keeps the old cost
    return result


def test_only_a_cold_run_enters_the_record_with_its_totals(tmp_path):
    record = tmp_path / "eval" / cold_runs.RECORD_NAME
    first, second = _pin_file(tmp_path, "a"), _pin_file(tmp_path, "b")
    cold_runs.update(record, "b", second, _result("FAIL", seconds=6.0))
    written = cold_runs.update(record, "a", first, _result("OK", seconds=4.0))
    assert list(written["pins"]) == ["a", "b"] and written["total_seconds"] == 10.0
    assert written["counts"] == {"OK": 1, "OKISH": 0, "FAIL": 1}
    entry = written["pins"]["a"]
    assert entry["checks"] == {"AP": {"pinned": 0.9, "measured": 0.9123, "status": "OK"}}
    assert entry["recipe"] == cold_runs.recipe_key(first) and entry["environment"] == cold_runs.current_software()
    assert json.loads(record.read_text()) == written
    warm = cold_runs.update(record, "a", first, _result("FAIL", reused={"indexes": 1}))
    assert warm["pins"]["a"] == entry and json.loads(record.read_text()) == written  # a warm run changes nothing


def test_a_changed_file_or_environment_makes_a_pin_due_again(tmp_path):
    path = _pin_file(tmp_path, "a")
    record = cold_runs.update(tmp_path / "record.json", "a", path, _result())
    here = cold_runs.current_software()
    assert cold_runs.done_here(record, "a", path, here)
    assert cold_runs.state(record, "a", path, here) == f"2026-12-02 OK {cold_runs.isa(environment.capture())}"
    other = environment.capture()
    other["libraries"] = {**other["libraries"], "torch": "0.0.1"}
    assert not cold_runs.done_here(record, "a", path, cold_runs.software_key(other))
    path.write_text(path.read_text().replace("0.9", "0.8"))  # another expected score: another recipe
    assert not cold_runs.done_here(record, "a", path, here) and cold_runs.state(record, "a", path, here) == "stale"


def test_new_words_in_a_description_keep_a_pin_done(tmp_path):
    """The recipe is what the file runs and expects: numbers written into its description after a run do not make
    it due again; an entry keyed by the file's bytes (recorded before) counts while the file is unchanged."""
    import hashlib

    path = _pin_file(tmp_path, "a")
    record = cold_runs.update(tmp_path / "record.json", "a", path, _result())
    here = cold_runs.current_software()
    path.write_text(path.read_text() + "description: re-run cold here, AP 0.9123\n")
    assert cold_runs.done_here(record, "a", path, here)
    record["pins"]["a"]["recipe"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]  # an entry of the old kind
    assert cold_runs.done_here(record, "a", path, here)
    path.write_text(path.read_text().replace("AP 0.9123", "AP 0.9124"))
    assert cold_runs.done_here(record, "a", path, here) is False  # its bytes changed: the old key no longer holds
    record["pins"]["a"]["recipe"] = cold_runs.recipe_key(path)
    assert cold_runs.done_here(record, "a", path, here)


def test_the_software_key_holds_the_libraries_and_kernel_settings_not_the_commit_cpu_or_threads():
    captured = environment.capture()
    elsewhere = {**captured, "git": {"commit": "0000000", "dirty": True}, "torch": {"threads": 1},
                 "cpu": {"model": "Intel(R) Xeon(R)", "cores": 16, "flags": ["avx2", "avx512f", "amx_tile"]},
                 "settings": {**captured["settings"], "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "3"}}
    assert cold_runs.software_key(elsewhere) == cold_runs.software_key(captured)
    assert cold_runs.isa(elsewhere) == "AMX" and cold_runs.isa({"cpu": {"flags": ["avx", "avx2", "fma"]}}) == "AVX2"
    other_torch = {**captured, "libraries": {**captured["libraries"], "torch": "0.0.1"}}
    assert cold_runs.software_key(other_torch) != cold_runs.software_key(captured)
    narrower = {**captured, "settings": {**captured["settings"], "ATEN_CPU_CAPABILITY": "default"}}
    assert cold_runs.software_key(narrower) != cold_runs.software_key(captured)


def test_reproduce_with_record_skips_the_pins_done_here_and_says_what_is_left(tmp_path, capsys):
    done, due = _pin_file(tmp_path, "done-pin"), _pin_file(tmp_path, "due-pin")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "due-pin.json").write_text(json.dumps({**_result(seconds=30.0), "name": "due-pin"}))
    cold_runs.update(tmp_path / "eval" / cold_runs.RECORD_NAME, "done-pin", done, _result())
    where = ["--eval-dir", tmp_path / "eval", "--results-dir", tmp_path / "results"]
    code, out, _ = irpipe(capsys, "reproduce", "--all", "--record", "--dry-run", *where)
    assert code == 0 and "skipped 1, re-run cold here" in out and ": done-pin (2026-12-02)" in out
    assert "this selection: 1 of 2 pins done, 1 left: 0.01 h by the cold costs measured for 1 of them" in out
    assert "due-pin.yaml --check" in out and "done-pin.yaml --check" not in out
    out = irpipe(capsys, "reproduce", "--all", "--record", "--again", "--dry-run", *where)[1]
    assert "done-pin.yaml --check" in out and "skipped" not in out
    out = irpipe(capsys, "reproduce", "--all", "--dry-run", *where)[1]  # a check, not the record: runs them all
    assert "done-pin.yaml --check" in out and "skipped" not in out
    listed = irpipe(capsys, "reproduce", *where)[1]
    rows = {line.split()[0]: line for line in listed.splitlines()}
    done_cpu = cold_runs.isa(environment.capture())
    assert rows["done-pin"].endswith(f"2026-12-02 OK {done_cpu}") and "2026-12-02 OK" not in rows["due-pin"]
    assert "cold re-run here: 1 of 2 pins done, 1 left" in listed


def test_many_skipped_pins_are_counted_past_the_first_few(tmp_path, capsys):
    names = [f"pin-{number}" for number in range(7)]
    for name in names:
        cold_runs.update(tmp_path / "eval" / cold_runs.RECORD_NAME, name, _pin_file(tmp_path, name), _result())
    where = ["--eval-dir", tmp_path / "eval", "--results-dir", tmp_path / "results"]
    out = irpipe(capsys, "reproduce", "--all", "--record", "--dry-run", *where)[1]
    skipped = next(line for line in out.splitlines() if line.startswith("skipped 7,"))
    assert skipped.count("(2026-12-02)") == 5 and skipped.endswith(" and 2 more (the list without flags dates each)")
    assert "this selection: 7 of 7 pins done, none left\n" in out and "nothing selected" in out


def test_what_is_left_adds_up_only_measured_cold_costs(tmp_path, capsys):
    """A last run that read its trained models back took seconds that say nothing of a cold run: such a pin, like one
    never run, is counted apart, not summed into the hours left."""
    for name in ("cold", "warm", "never"):
        _pin_file(tmp_path, name)
    (tmp_path / "results").mkdir()
    warm = {**_result(seconds=9.0, reused={"trained models": 3}), "name": "warm"}
    del warm["cost"]  # never measured cold: its only run read the models back
    (tmp_path / "results" / "warm.json").write_text(json.dumps(warm))
    (tmp_path / "results" / "cold.json").write_text(json.dumps({**_result(seconds=7200.0), "name": "cold"}))
    listed = irpipe(capsys, "reproduce", "--eval-dir", tmp_path / "eval", "--results-dir", tmp_path / "results")[1]
    assert ("cold re-run here: 0 of 3 pins done, 3 left: 2.00 h by the cold costs measured for 1 of them; 2 with none "
            "measured (1 last run from cached work or before costs were recorded, 1 never run") in listed


@pytest.mark.slow
def test_a_cold_reproduce_records_each_pin_and_the_next_one_resumes(tmp_path, capsys):
    _pin_file(tmp_path, "tiny-ok")
    _pin_file(tmp_path, "tiny-wrong", expected="{AP: 0.2}", tolerance=0.001)
    where = ["--eval-dir", tmp_path / "eval", "--results-dir", tmp_path / "results", "--record"]
    assert irpipe(capsys, "reproduce", "tiny-*", *where)[0] == 1
    record = json.loads((tmp_path / "eval" / cold_runs.RECORD_NAME).read_text())
    assert {name: entry["status"] for name, entry in record["pins"].items()} == {"tiny-ok": "OK", "tiny-wrong": "FAIL"}
    assert record["total_seconds"] == pytest.approx(sum(e["seconds"] for e in record["pins"].values()))
    code, out, _ = irpipe(capsys, "reproduce", "tiny-*", *where)
    assert code == 0 and "skipped 2," in out and "tiny-ok (" in out and "tiny-wrong (" in out
    assert "nothing selected" in out


def test_a_deterministic_training_pin_is_done_here_after_its_run(tmp_path):
    """A run with deterministic=true sets CUBLAS_WORKSPACE_CONFIG in its own process, so its captured environment
    holds it; the machine asked before the next run does not. The key leaves it out: the pin counts as done."""
    captured = environment.capture()
    captured["settings"] = {**captured["settings"], "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    path = _pin_file(tmp_path, "a")
    record = cold_runs.update(tmp_path / "record.json", "a", path, _result(captured=captured))
    assert cold_runs.done_here(record, "a", path, cold_runs.current_software())
    captured["settings"]["ONEDNN_MAX_CPU_ISA"] = "AVX2"  # a kernel choice the user made: another environment
    assert cold_runs.software_key(captured) != cold_runs.current_software()


def test_reproduce_merge_takes_another_checkouts_newer_cold_runs_of_its_pins_and_their_results(tmp_path, capsys,
                                                                                            monkeypatch):
    here, there = tmp_path / "here", tmp_path / "there"
    paths = {folder: {name: _pin_file(folder, name) for name in ("a", "b")} for folder in (here, there)}
    older, newer = _result(seconds=4.0), _result(seconds=7.0)
    newer["cost"]["date"] = newer["date"] = "2026-12-03T10:00:00+00:00"
    cold_runs.update(here / "eval" / cold_runs.RECORD_NAME, "a", paths[here]["a"], older)
    cold_runs.update(there / "eval" / cold_runs.RECORD_NAME, "a", paths[there]["a"], newer)
    cold_runs.update(there / "eval" / cold_runs.RECORD_NAME, "b", paths[there]["b"], older)
    archived_here = _pin_file(there, "c")  # a pin there, archived here since: its cold run is not taken
    cold_runs.update(there / "eval" / cold_runs.RECORD_NAME, "c", archived_here, older)
    (there / "results").mkdir()
    (there / "results" / "a.json").write_text('{"name": "a", "from": "there"}\n')
    monkeypatch.chdir(here)
    code, out, _ = irpipe(capsys, "reproduce", "--results-dir", "results", "--merge", there)
    assert code == 0 and f"{there}: took 2 cold run(s): a, b" in out
    assert f"{there}: left 1 that are no pins here (archived or removed): c" in out
    record = json.loads((here / "eval" / cold_runs.RECORD_NAME).read_text())
    assert record["pins"]["a"]["seconds"] == 7.0 and record["total_seconds"] == 11.0 and record["counts"]["OK"] == 2
    assert json.loads((here / "results" / "a.json").read_text())["from"] == "there"  # b had no result: none copied
    assert not (here / "results" / "b.json").exists()
    assert f"{there}: took 0 cold run(s)\n" in irpipe(capsys, "reproduce", "--results-dir", "results", "--merge", there)[1]
    code, _, err = irpipe(capsys, "reproduce", "--merge", tmp_path / "nowhere")
    assert code == 2 and "nowhere/eval/benchmarks/reproduce-cold.json [--merge]: no other checkout's" in err
    assert irpipe(capsys, "reproduce", "--merge", here)[0] == 2  # its own record
