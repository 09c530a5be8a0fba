"""Numbers in prose come from results: the Markdown tables between results markers (README.md, docs/, eval/) are
what `irpipe leaderboard --prose` makes of eval/results, and a table that says otherwise fails."""
from __future__ import annotations

import json

import pytest

from pipeline.errors import InputError
from pipeline.prose import marked_files, rewrite
from support import REPO, irpipe

RESULTS = {
    "floor": {"name": "floor", "measures": {"AP": 0.64841, "RR": 0.71734}},
    "model": {"name": "model", "measures": {"AP": 0.62143, "RR": 0.70131}, "sd": {"AP": 0.02251, "RR": 0.029},
              "seeds": {"0": {"AP": 0.6446, "RR": 0.7347}, "1": {"AP": 0.6198, "RR": 0.6843},
                        "2": {"AP": 0.5996, "RR": 0.6847}}},
    "job": {"name": "job", "measures": {"AP": 0.3235, "RR": 0.8353},
            "baseline": {"measures": {"AP": 0.2476, "RR": 0.7024}, "pvalues": {"AP": 1.26e-05, "RR": 0.0372}},
            "beside": {"bi": {"measures": {"AP": 0.315, "RR": 0.7612}, "pvalues": {"AP": 0.000312, "RR": None}}}},
}


def _marked(body: str, table: str = "| stale |") -> str:
    return f"Intro.\n\n<!-- results\n{body}\n-->\n{table}\n<!-- /results -->\n\nAfter.\n"


def _table(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("|")]


def test_an_experiments_table_has_a_row_per_experiment_with_mean_and_sd(tmp_path):
    text = rewrite(_marked("table: experiments\nmeasures: [AP, RR]\nrows: {floor: IDF floor, model: \"MRNN, distance\"}"
                           "\nbold: [model]"), tmp_path / "x.md", RESULTS)
    assert _table(text) == ["| configuration | AP | RR | file |", "| --- | --- | --- | --- |",
                            "| IDF floor | 0.6484 | 0.7173 | floor.yaml |",
                            "| **MRNN, distance** | **0.6214 ± 0.0225** | **0.7013 ± 0.0290** | **model.yaml** |"]
    assert text.startswith("Intro.\n\n<!-- results\n") and text.endswith("\n<!-- /results -->\n\nAfter.\n")
    assert rewrite(text, tmp_path / "x.md", RESULTS) == text  # made again: the same


def test_a_seeds_table_and_a_comparison_table(tmp_path):
    seeds = rewrite(_marked("table: seeds\nexperiment: model\ncolumns: {kept: {0: '3', 2: '4', mean: ''}}"),
                    tmp_path / "x.md", RESULTS)
    assert _table(seeds) == ["| seed | AP | RR | kept |", "| --- | ---: | ---: | --- |", "| 0 | 0.6446 | 0.7347 | 3 |",
                             "| 1 | 0.6198 | 0.6843 |  |", "| 2 | 0.5996 | 0.6847 | 4 |",
                             "| **mean ± sd** | **0.6214 ± 0.0225** | **0.7013 ± 0.0290** |  |"]
    comparison = rewrite(_marked("table: comparison\nexperiment: job\nlabels: {baseline: BM25, job: ADDAX}"),
                         tmp_path / "x.md", RESULTS)
    assert _table(comparison)[2:] == ["| BM25 | 0.2476 | 0.7024 |  |", "| ADDAX | 0.3235 | 0.8353 | 1.3e-05 / 0.037 |",
                                      "| bi | 0.3150 | 0.7612 | 0.00031 /  |"]


def test_a_seeded_comparison_names_its_test_and_marks_seed_0s_pvalues_pending(tmp_path):
    seeded = {"name": "job", "measures": {"AP": 0.3235, "RR": 0.8353}, "seeds": {"0": {}, "1": {}},
              "baseline": {"measures": {"AP": 0.2476, "RR": 0.7024}, "pvalues": {"AP": 0.00412, "RR": None},
                           "test": "two-sided paired t-test over per-query seed means", "pending": {"RR": 0.0372}}}
    comparison = rewrite(_marked("table: comparison\nexperiment: job\nlabels: {baseline: BM25, job: ADDAX}"),
                         tmp_path / "x.md", {"job": seeded})
    assert _table(comparison) == [
        "| run | AP | RR | p, two-sided paired t-test over per-query seed means (AP / RR) |",
        "| --- | --- | --- | --- |",
        "| BM25 | 0.2476 | 0.7024 |  |", "| ADDAX | 0.3235 | 0.8353 | 0.0041 / 0.037 (seed-0 only, pending re-run) |"]


@pytest.mark.parametrize("body, field, line", [
    ("table: experiments\nmeasures: [AP]\nrows: {nowhere: x}", "experiment", 3),
    ("table: experiments\nmeasures: [nDCG@10]\nrows: {floor: x}", "measures", 3),
    ("table: experiments\nrows: {floor: x}", "measures", 3),
    ("table: seeds\nexperiment: floor", "experiment", 3),
    ("table: comparison\nexperiment: model", "table", 3),
    ("table: pie\nexperiment: model", "table", 3),
    ("table: [experiments", None, 4),  # a YAML error: the marker's line that holds it
])
def test_a_bad_marker_names_the_file_and_line(tmp_path, body, field, line):
    with pytest.raises(InputError) as error:
        rewrite(_marked(body), tmp_path / "x.md", RESULTS)
    assert error.value.field == field and error.value.line == line and "x.md" in str(error.value)


def test_a_marker_without_its_end_is_refused(tmp_path):
    with pytest.raises(InputError, match="closing"):
        rewrite("<!-- results\ntable: seeds\n-->\n| a |\n", tmp_path / "x.md", RESULTS)


def test_the_check_fails_on_a_table_that_differs_from_the_results(tmp_path, capsys):
    (tmp_path / "eval" / "results").mkdir(parents=True)
    for name, result in RESULTS.items():
        (tmp_path / "eval" / "results" / f"{name}.json").write_text(json.dumps(result))
    page = tmp_path / "README.md"
    page.write_text(_marked("table: experiments\nmeasures: [AP]\nrows: {floor: floor}"))
    where = ["--root", tmp_path, "--results-dir", tmp_path / "eval" / "results"]
    code, out, _ = irpipe(capsys, "leaderboard", "--prose", "--check", *where)
    assert code == 1 and f"{page}: its results tables differ" in out and "| stale |" in page.read_text()
    assert irpipe(capsys, "leaderboard", "--prose", *where)[0] == 0
    assert "| floor | 0.6484 | floor.yaml |" in page.read_text()
    assert irpipe(capsys, "leaderboard", "--prose", "--check", *where)[0] == 0


@pytest.mark.parametrize("command", [["leaderboard", "--prose", "--check"], ["leaderboard", "--output"]])
def test_a_damaged_result_file_is_exit_2_naming_its_file_and_line(tmp_path, capsys, command):
    """Both readers of eval/results (the prose tables and the leaderboard) refuse a file that is not JSON."""
    results = tmp_path / "eval" / "results"
    results.mkdir(parents=True)
    (results / "floor.json").write_text(json.dumps(RESULTS["floor"]))
    (results / "broken.json").write_text('{"name": "broken",\n "measures": {"AP": 0.5,}}\n')
    (tmp_path / "README.md").write_text(_marked("table: experiments\nmeasures: [AP]\nrows: {floor: floor}"))
    argv = [*command, tmp_path / "LEADERBOARD.md"] if command[-1] == "--output" else [*command, "--root", tmp_path]
    code, _, err = irpipe(capsys, *argv, "--results-dir", results)
    assert code == 2 and f"{results / 'broken.json'}:2" in err and "not valid JSON" in err and "Traceback" not in err


def test_the_repository_tables_are_the_results(capsys):
    """README.md, docs/*.md and eval/*.md: every marked table is what the committed results say."""
    assert marked_files(REPO), "no results markers found"
    code, out, _ = irpipe(capsys, "leaderboard", "--prose", "--check", "--root", REPO, "--results-dir",
                          REPO / "eval" / "results")
    assert code == 0, out + "(run: irpipe leaderboard --prose)"


@pytest.mark.parametrize("argv, said", [
    (["--check"], "--check works only with --prose"), (["--root", "x"], "--root works only with --prose"),
    (["--screenshot", "x.png"], "--screenshot works only with --html"),
    (["--prose", "--html"], "--prose and --html write different things")])
def test_a_leaderboard_flag_that_would_do_nothing_is_exit_2_and_writes_nothing(argv, said, capsys, tmp_path):
    """`--check` without `--prose` once rewrote eval/LEADERBOARD.md and exited 0: a check that checked nothing."""
    code, _, err = irpipe(capsys, "leaderboard", "--output", str(tmp_path / "board.md"), *argv)
    assert code == 2 and said in err and not (tmp_path / "board.md").exists()
