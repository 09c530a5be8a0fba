"""What a result records of how it was obtained (environment, reuse, cold cost, wins and losses), and
`irpipe reproduce`: the pins listed with their measured cost, a selection run in an empty cache, pinned vs measured."""
from __future__ import annotations

import json

import pytest

from pipeline import environment, provenance
from pipeline.reproduce import parse_cost
from pipeline.errors import ConfigError
from support import REPO, irpipe, write_collection

SPEC = "bm25(k1=0.9, b=0.4, hits=10)"


def _experiment(folder, name="tiny-bm25", expected="{AP: 0.9, RR: 1.0}", tolerance=0.2, rest=None):
    """An experiment file on the tiny collection of tests/support.py: by default with a baseline (a second BM25);
    `rest`, the lines after `dataset:` instead of SPEC's and the baseline's."""
    data = write_collection(folder / "data")
    path = folder / "eval" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    rest = rest or (f"pipeline: {SPEC}\nbaseline: bm25(k1=0.1, b=0.1, hits=10)\nmeasures: [AP, RR]\n"
                    f"expected: {expected}\ntolerance: {tolerance}\n")
    path.write_text(f"dataset: {data}\n{rest}")
    return path


@pytest.mark.slow
def test_a_cold_run_records_its_cost_and_a_warm_run_keeps_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    path = _experiment(tmp_path)
    results = tmp_path / "results"
    args = ["run", path, "--results-dir", results, "--output", tmp_path / "run.trec"]
    assert irpipe(capsys, *args)[0] == 0
    cold = json.loads((results / "tiny-bm25.json").read_text())
    cost = dict(cold["cost"])
    assert cold["reused"] == {} and cost.pop("load_average") >= 0
    assert cost == {"seconds": cold["seconds"], "date": cold["date"], "cores": cold["environment"]["cpu"]["cores"]}
    assert cold["environment"]["libraries"]["ir_measures"] and cold["environment"]["cpu"]["model"]
    wins = cold["win_loss"]
    assert wins["measure"] == "AP" and wins["wins"] + wins["losses"] + wins["ties"] == wins["queries"] == 3
    assert len(wins["differences"]) == 3 and wins["differences"] == sorted(wins["differences"], reverse=True)
    assert irpipe(capsys, *args)[0] == 0  # the same cache: the index and both BM25 runs are read back
    warm = json.loads((results / "tiny-bm25.json").read_text())
    assert warm["reused"] == {"stage outputs": 2, "indexes": 1} and warm["cost"] == cold["cost"]


def test_environment_differences_name_what_can_move_a_number():
    pinned = {"libraries": {"torch": "2.13.0", "ir_measures": "0.4.3"}, "cpu": {"flags": ["avx2", "avx512f"]},
              "torch": {"threads": 1, "kernels": "AVX512", "device": "cpu"}, "settings": {}}
    now = {"libraries": {"torch": "2.13.0", "ir_measures": "0.4.3"}, "cpu": {"flags": ["avx2"]},
           "torch": {"threads": 1, "kernels": "AVX2", "device": "cpu"}, "settings": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}
    assert environment.differences(pinned, now) == [
        "CPU vector instructions: without avx512f", "torch kernels: AVX512 -> AVX2",
        "kernel / thread settings: ONEDNN_MAX_CPU_ISA None -> AVX2"]
    assert environment.differences(pinned, pinned) == []
    without_torch = {k: v for k, v in now.items() if k != "torch"}  # a BM25 run: torch's parts are not compared
    assert environment.differences(pinned, without_torch) == ["CPU vector instructions: without avx512f",
                                                              "kernel / thread settings: ONEDNN_MAX_CPU_ISA None -> AVX2"]
    assert environment.differences(None, now) == []


def test_capture_reads_this_machine():
    captured = environment.capture()
    assert captured["cpu"]["cores"] >= 1 and captured["python"].count(".") == 2
    assert set(captured["libraries"]) == set(environment.LIBRARIES)
    assert all(flag.islower() for flag in captured["cpu"]["flags"])


@pytest.mark.parametrize("seconds, klass", [(None, "unmeasured"), (0.2, "seconds"), (59.9, "seconds"),
                                            (60, "minutes"), (3599, "minutes"), (5108, "hours")])
def test_cost_class_comes_from_the_last_cold_run(seconds, klass):
    result = {"seconds": 0.1, **({"cost": {"seconds": seconds}} if seconds is not None else {})}
    assert provenance.cost_class(result) == klass


@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("10m", 600), ("1.5h", 5400)])
def test_max_cost_durations(text, seconds):
    assert parse_cost(text) == seconds


@pytest.mark.parametrize("text", ["", "ten minutes", "10 min", "-5m", "5d"])
def test_a_bad_max_cost_is_refused(text):
    with pytest.raises(ConfigError) as error:
        parse_cost(text)
    assert error.value.field == "--max-cost"


def test_cpu_notes_name_only_pipelines_that_train_the_model(tmp_path):
    table = tmp_path / "cpu.yaml"
    table.write_text("- {model: hcan, moves: true, note: AP 0.69 -> 0.70 with AVX2 kernels}\n"
                     "- {model: mrnn, moves: false, note: bit for bit}\n")
    assert provenance.cpu_notes("hcan(train=trecqa/train, seed=0)", table) == ["hcan: AP 0.69 -> 0.70 with AVX2 kernels"]
    assert provenance.cpu_notes("bm25() % 100 >> hcan(ckpt=models/h)", table) == []  # a given checkpoint: no training
    assert provenance.cpu_notes("mrnn(train=trecqa/train)", table) == []  # measured not to move


def _result(folder, name, cost=None, date="2026-11-27T10:00:00+00:00"):
    (folder / "results").mkdir(exist_ok=True)
    result = {"name": name, "dataset": "x", "measures": {"AP": 0.9}, "checks": {"AP": {"status": "OK"}}, "date": date,
              "seconds": 0.5, **({"cost": {"seconds": cost}} if cost is not None else {})}
    (folder / "results" / f"{name}.json").write_text(json.dumps(result))


def test_reproduce_lists_the_pins_with_their_cost_and_selects_by_it(tmp_path, capsys):
    for name in ("a-cheap", "b-dear", "c-never"):
        _experiment(tmp_path, name)
    _result(tmp_path, "a-cheap", cost=5.0)
    _result(tmp_path, "b-dear", cost=700.0)
    where = ["--eval-dir", tmp_path / "eval", "--results-dir", tmp_path / "results"]
    code, out, _ = irpipe(capsys, "reproduce", *where)
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:4]}
    assert code == 0 and lines["a-cheap"][3:5] == ["seconds", "5.0"] and lines["b-dear"][3:6] == ["minutes", "11.7", "min"]
    assert lines["c-never"][3:6] == ["unmeasured", "never", "run"]
    code, out, _ = irpipe(capsys, "reproduce", "--max-cost", "10m", "--dry-run", *where)
    assert code == 0 and "left out b-dear: costs 11.7 min > 10.0 min" in out
    assert "left out 1 unmeasured (no cold run recorded; run them by name, or --all, to measure them): c-never" \
        in out and "irpipe run " in out and "a-cheap.yaml --check" in out
    assert irpipe(capsys, "reproduce", "nothing-like-it", *where)[0] == 2
    # where the runs write: runs/results (untracked) unless --record writes the recorded results
    assert "a-cheap.yaml --check   #" in irpipe(capsys, "reproduce", "a-cheap", "--dry-run", *where)[1]
    out = irpipe(capsys, "reproduce", "a-cheap", "--dry-run", "--record", *where)[1]
    assert f"a-cheap.yaml --check --results-dir {tmp_path / 'results'}   #" in out
    out = irpipe(capsys, "reproduce", "a-cheap", "--dry-run", "--record", "--eval-dir", tmp_path / "eval")[1]
    assert "a-cheap.yaml --check --record   #" in out


def test_a_whole_name_picks_that_pin_alone_a_part_or_a_glob_every_pin_it_matches(tmp_path, capsys):
    for name in ("trecqa-hcan", "trecqa-hcan-sm-only", "wikiqa-hcan"):
        _experiment(tmp_path, name)
    where = ["--eval-dir", tmp_path / "eval", "--results-dir", tmp_path / "results", "--dry-run"]

    def picked(*names):
        out = irpipe(capsys, "reproduce", *names, *where)[1]
        return sorted(line.split("/")[-1].split(".yaml")[0] for line in out.splitlines() if "irpipe run " in line)

    assert picked("trecqa-hcan") == ["trecqa-hcan"]  # not trecqa-hcan-sm-only, which it is a part of
    assert picked("hcan") == ["trecqa-hcan", "trecqa-hcan-sm-only", "wikiqa-hcan"]
    assert picked("trecqa-hcan*") == ["trecqa-hcan", "trecqa-hcan-sm-only"]
    assert picked("trecqa-hcan", "wikiqa") == ["trecqa-hcan", "wikiqa-hcan"]


@pytest.mark.slow
def test_reproduce_runs_in_an_empty_cache_and_a_fail_sets_the_exit_status(tmp_path, capsys):
    _experiment(tmp_path, "tiny-ok")
    _experiment(tmp_path, "tiny-wrong", expected="{AP: 0.2}", tolerance=0.001)
    where = ["--eval-dir", tmp_path / "eval", "--results-dir", tmp_path / "results", "--record"]
    code, out, _ = irpipe(capsys, "reproduce", "tiny-*", *where)
    assert code == 1, out
    rows = [line.split() for line in out.splitlines() if line.startswith("tiny-")]
    assert [row[:2] + [row[5]] for row in rows] == [["tiny-ok", "AP", "OK"], ["tiny-ok", "RR", "OK"],
                                                    ["tiny-wrong", "AP", "FAIL"]]
    assert all(row[-1] == "(cold)" for row in rows)  # a fresh cache each: nothing reused, so the cost is recorded
    assert "1 OK, 0 OKISH, 1 FAIL, 0 ERROR of 2 experiments" in out
    recorded = json.loads((tmp_path / "results" / "tiny-ok.json").read_text())
    assert recorded["cost"]["seconds"] == recorded["seconds"]


def test_a_pin_another_process_re_ran_meanwhile_is_skipped_just_before_its_turn(shared_data, tmp_path, monkeypatch):
    """Two `reproduce --record` processes with overlapping names: the second finishing a pin first must stop the first
    from running it again (`needed`, checked against the record just before each pin starts)."""
    from pipeline.reproduce import pins as all_pins, run_selection

    monkeypatch.setenv("IRPIPE_MIRROR", str(shared_data))
    found = {pin.name: pin for pin in all_pins(REPO / "eval", REPO / "eval" / "results")}
    selected = [found["dl20-bm25-top100"], found["dl19-bm25-top100"]]
    said = []
    rows = run_selection(selected, tmp_path / "results", warm=False, echo=said.append,
                         needed=lambda pin: pin.name != "dl20-bm25-top100")
    assert said[0] == "[1/2] dl20-bm25-top100: re-run cold here meanwhile (another process), skipped"
    assert [(pin.name, bool(error)) for pin, _, error in rows] == [("dl19-bm25-top100", False)]
    assert rows[0][1]["checks"]["nDCG@10"]["status"] == "OK"


def test_a_result_rewritten_with_the_same_bytes_and_date_is_seen_as_new(tmp_path):
    """A run that ends within the second of the last one writes the same date: the file, not its date, says whether
    the run wrote a result (a fast pin run twice was an ERROR, 'exit 0', now and then)."""
    from pipeline.data.files import atomic_write
    from pipeline.reproduce import _file_stamp

    written = tmp_path / "x.json"
    assert _file_stamp(written) is None
    written.write_text('{"date": "2026-12-05T05:30:10+00:00"}')
    before = _file_stamp(written)
    with atomic_write(written) as out:
        out.write('{"date": "2026-12-05T05:30:10+00:00"}')
    assert _file_stamp(written) not in (None, before) and _file_stamp(written) == _file_stamp(written)


def _made_pin(folder, command: str):
    """A pin whose BM25 reads an index its make: builds (paths relative to the folder reproduce runs in)."""
    return _experiment(folder, "tiny-made", rest="pipeline: bm25(hits=10, index=indexes/tiny)\nmeasures: [AP]\n"
                                                 "expected: {AP: 0.9}\ntolerance: 0.2\n"
                                                 f"make:\n  indexes/tiny: {command}\n")


@pytest.mark.slow
def test_reproduce_makes_a_missing_make_path_first_and_counts_its_seconds(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _made_pin(tmp_path, f"irpipe index --dataset {tmp_path / 'data'} --output indexes/tiny")
    where = ["--eval-dir", tmp_path / "eval", "--results-dir", tmp_path / "results", "--record"]
    out = irpipe(capsys, "reproduce", "tiny-made", *where, "--dry-run")[1]
    assert f"irpipe index --dataset {tmp_path / 'data'} --output indexes/tiny && IRPIPE_CACHE=" in out
    code, out, _ = irpipe(capsys, "reproduce", "tiny-made", *where)
    assert code == 0 and "make indexes/tiny: irpipe index" in out and (tmp_path / "indexes" / "tiny").is_dir()
    result = json.loads((tmp_path / "results" / "tiny-made.json").read_text())
    entry = json.loads((tmp_path / "eval" / "benchmarks" / "reproduce-cold.json").read_text())["pins"]["tiny-made"]
    assert entry["seconds"] > result["cost"]["seconds"] == result["seconds"]  # the index build counted in the record
    out = irpipe(capsys, "reproduce", "tiny-made", *where, "--again")[1]  # there now: nothing to make
    assert "make indexes/tiny" not in out and "1 OK, 0 OKISH, 0 FAIL, 0 ERROR" in out


def test_a_make_that_is_not_irpipe_or_fails_is_the_pins_error(tmp_path, monkeypatch):
    from pipeline.reproduce import pins as all_pins, run_selection

    monkeypatch.chdir(tmp_path)
    _made_pin(tmp_path, "touch indexes/tiny")
    said = []
    rows = run_selection(all_pins(tmp_path / "eval", tmp_path / "results"), tmp_path / "results", False, said.append)
    assert rows[0][1] is None and "`touch indexes/tiny` is not an irpipe command; make it by hand" in rows[0][2]
    _made_pin(tmp_path, "irpipe index --dataset no-such-dataset --output indexes/tiny")
    rows = run_selection(all_pins(tmp_path / "eval", tmp_path / "results"), tmp_path / "results", False, said.append)
    assert rows[0][1] is None and rows[0][2].startswith("make: indexes/tiny: exit 2: ")
