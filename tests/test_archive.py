"""eval/archive/: experiment files out of the pins (docs/reproducing.md, what is pinned, what is archived). Each
says why and keeps its last result; none is a pin, a leaderboard row or a page row; every citation of an
experiment file resolves, an archived one's through eval/archive/."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.experiment import Experiment
from pipeline.reproduce import pins
from support import REPO, irpipe

EVAL = REPO / "eval"
ARCHIVED = sorted((EVAL / "archive").glob("*.yaml"))
# the files that cite experiment files: the docs, the notes beside the pins and the pins' own descriptions
CITING = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted(EVAL.glob("*.md")),
          *sorted((EVAL / "archive").glob("*.md")), *sorted(EVAL.glob("*.yaml")), *ARCHIVED]
CITED = re.compile(r"(?<![\w/.-])eval/((?:archive/)?[a-z0-9][\w.-]*?\.yaml)\b")  # NAME, X: placeholders
SUPERSEDED_BY = re.compile(r"eval/([a-z0-9][\w.-]*?)\.yaml")


def test_the_archive_is_found():
    assert len(ARCHIVED) >= 10


@pytest.mark.parametrize("path", ARCHIVED, ids=[p.stem for p in ARCHIVED])
def test_an_archived_file_says_why_naming_the_pin_that_supersedes_it_and_keeps_its_last_result(path):
    experiment = Experiment.load(path)
    assert experiment.archived and "\n" not in experiment.archived.strip()
    assert path.read_text().startswith("archived:"), "the reason is the file's first line"
    named = SUPERSEDED_BY.findall(experiment.archived)
    current = {pin.name for pin in pins(EVAL, EVAL / "results")}
    assert named and named[0] in current, f"{path.name}: the reason names no current pin: {experiment.archived}"
    assert experiment.expected, "an archived file keeps the scores it pinned"
    assert (EVAL / "archive" / "results" / f"{experiment.name}.json").is_file()
    assert not (EVAL / f"{path.name}").exists() and not (EVAL / "results" / f"{experiment.name}.json").exists()


def test_no_archived_experiment_is_a_pin_a_leaderboard_row_or_a_page_row():
    names = {Experiment.load(path).name for path in ARCHIVED}
    assert not names & {pin.name for pin in pins(EVAL, EVAL / "results")}
    leaderboard, page = (EVAL / "LEADERBOARD.md").read_text(), (EVAL / "reproduction.html").read_text()
    for name in names:
        assert f"**{name}**" not in leaderboard and f'data-experiment="{name}"' not in page


def test_every_experiment_file_a_doc_or_a_pin_cites_exists():
    broken = [f"{path.relative_to(REPO)}: eval/{cited}" for path in CITING
              for cited in CITED.findall(path.read_text(encoding="utf-8")) if not (EVAL / cited).is_file()]
    assert not broken, "point them to eval/archive/NAME.yaml or reword: " + "; ".join(broken)


def test_a_file_that_says_archived_is_no_pin_wherever_it_lies_and_the_archive_folder_is_not_read(tmp_path):
    pin = "dataset: x\npipeline: bm25()\nmeasures: [AP]\nexpected: {AP: 0.5}\n"
    (tmp_path / "kept.yaml").write_text(pin)
    (tmp_path / "old.yaml").write_text('archived: "superseded by eval/kept.yaml (AP 0.5 against 0.4)"\n' + pin)
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "older.yaml").write_text('archived: "superseded by eval/kept.yaml"\n' + pin)
    assert [p.name for p in pins(tmp_path, tmp_path / "results")] == ["kept"]


def test_an_archived_reason_that_is_not_a_string_names_the_file_and_the_field(tmp_path, capsys):
    path = tmp_path / "old.yaml"
    path.write_text("archived: [superseded]\ndataset: x\npipeline: bm25()\nmeasures: [AP]\n")
    with pytest.raises(InputError) as raised:
        Experiment.load(path)
    assert raised.value.field == "archived" and str(path) in str(raised.value)
    code, _, err = irpipe(capsys, "run", path)
    assert code == 2 and "archived must be a one-line reason" in err and "Traceback" not in err


def test_reproduce_counts_the_archive_and_says_why_an_archived_name_is_no_pin(capsys):
    folders = ["--eval-dir", EVAL, "--results-dir", EVAL / "results"]
    code, out, _ = irpipe(capsys, "reproduce", *folders)
    assert code == 0 and f"\n{len(ARCHIVED)} archived, not listed: {EVAL / 'archive'}/" in out
    assert "trecqa-hcan-frozen" not in out
    code, out, err = irpipe(capsys, "reproduce", "trecqa-hcan-frozen", "--dry-run", *folders)
    reason = Experiment.load(EVAL / "archive" / "trecqa-hcan-frozen.yaml").archived
    assert code == 2 and not out and "no pinned experiment matches 'trecqa-hcan-frozen'" in err
    assert f"archived: {EVAL / 'archive' / 'trecqa-hcan-frozen.yaml'} ({reason})" in err
    assert f"--results-dir {EVAL / 'archive' / 'results'} --check" in err and "Traceback" not in err
