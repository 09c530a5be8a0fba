"""The reproduction page (`irpipe leaderboard --html`, eval/reproduction.html): its structure read back with an HTML
parser (a section per dataset, a row per pinned experiment with its scores, reference, command and copy button,
cost, date, environment and win/loss plot), the committed page current, and the page in headless Chromium."""
from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pipeline.experiment import Experiment
from pipeline import html_page
from pipeline.html_page import ANSWERS, best_pin, render_page
from pipeline.leaderboard import load_references
from pipeline.reproduce import Pin, pins
from support import REPO, irpipe

PAGE = REPO / "eval" / "reproduction.html"
VOID = {"meta", "br", "rect", "line", "input", "img", "link"}


class Node:
    def __init__(self, tag: str, attrs: dict, parent: "Node | None"):
        self.tag, self.attrs, self.parent, self.children, self.text = tag, attrs, parent, [], ""

    def all(self, tag: str, **attrs) -> list["Node"]:
        found = []
        for child in self.children:
            if child.tag == tag and all(child.attrs.get(k.rstrip("_")) == v for k, v in attrs.items()):
                found.append(child)
            found += child.all(tag, **attrs)
        return found

    def content(self) -> str:
        return self.text + "".join(child.content() for child in self.children)


class TreeBuilder(HTMLParser):
    """The page as a tree of Nodes; an end tag that does not close the open element fails the test."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.node = Node("#root", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.node)
        self.node.children.append(node)
        if tag not in VOID:
            self.node = node

    def handle_startendtag(self, tag, attrs):
        self.node.children.append(Node(tag, dict(attrs), self.node))

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        assert self.node.tag == tag, f"</{tag}> closes <{self.node.tag}>"
        self.node = self.node.parent

    def handle_data(self, data):
        self.node.text += data


def parse(text: str) -> Node:
    builder = TreeBuilder()
    builder.feed(text)
    builder.close()
    assert builder.node is builder.root, f"<{builder.node.tag}> never closed"
    return builder.root


def test_the_committed_page_is_current(tmp_path, capsys):
    """eval/reproduction.html is what `irpipe leaderboard --html` makes of the committed eval/ files."""
    output = tmp_path / "page.html"
    assert irpipe(capsys, "leaderboard", "--html", output, "--eval-dir", REPO / "eval", "--results-dir",
                  REPO / "eval" / "results", "--references", REPO / "eval" / "references.yaml")[0] == 0
    assert output.read_text() == PAGE.read_text(), "run: irpipe leaderboard --html"


def test_the_page_has_a_row_per_pinned_experiment_with_its_parts():
    tree = parse(PAGE.read_text(encoding="utf-8"))
    found = pins(REPO / "eval", REPO / "eval" / "results")
    sections = [section for section in tree.all("section") if section.attrs["id"] not in ("answers", "training")]
    assert {s.attrs["data-dataset"] for s in sections} == {(p.result or {}).get("dataset") or p.experiment.dataset
                                                          for p in found}
    assert {a.attrs["href"][1:] for a in tree.all("nav")[0].all("a")} == {s.attrs["id"] for s in sections}
    rows = {row.attrs["data-experiment"]: row for row in tree.all("tr") if "data-experiment" in row.attrs}
    assert sorted(rows) == sorted(p.name for p in found)
    for pin in found:
        row, result = rows[pin.name], pin.result or {}
        command = f"irpipe run eval/{pin.name}.yaml --check"
        buttons = row.all("button", class_="copy")
        assert [b.attrs["data-command"] for b in buttons] == [command] and command in row.content()
        measures = {cell.attrs["data-measure"]: cell.content() for cell in row.all("td", class_="num")
                    if "data-measure" in cell.attrs}
        for measure, check in (result.get("checks") or {}).items():
            assert f"{result['measures'][measure]:.4f}" in measures[measure]
            assert f"pinned {check['expected']:.4f}" in measures[measure] and check["status"] in measures[measure]
        cost = row.all("td", class_="cost")[0]
        assert cost.all("span")[0].attrs["data-cost"] in ("seconds", "minutes", "hours", "unmeasured")
        date = result["date"][:10] if result.get("date") else "undated" if result else "never run"
        assert date in cost.content()
        assert len(cost.all("details")) == 1
        plots = row.all("svg", class_="winloss")
        assert len(plots) == (1 if pin.experiment.baseline and result.get("win_loss") else 0)


def test_every_column_of_a_dataset_table_holds_a_score():
    """A measure is a column where some pin measured it: no column of 'not run' alone (TREC DL's RR@10 is run as
    RR(rel=2)@10, and the file's name for it is not a second column)."""
    tree = parse(PAGE.read_text(encoding="utf-8"))
    for section in tree.all("section"):
        if section.attrs["id"] in ("answers", "training"):
            continue
        table = section.all("table", class_="pins")[0]
        header = [cell.content() for cell in table.all("th")]
        measures = header[1:header.index("published / peer")]
        scored = {cell.attrs["data-measure"] for cell in table.all("td", class_="num") if "data-measure" in cell.attrs}
        assert set(measures) <= scored, (section.attrs["id"], set(measures) - scored)


def test_a_model_that_moves_with_the_cpu_is_said_once_a_row_with_every_measurement_in_its_title():
    from pipeline import provenance

    tree = parse(PAGE.read_text(encoding="utf-8"))
    rows = {row.attrs["data-experiment"]: row for row in tree.all("tr") if "data-experiment" in row.attrs}
    many = 0
    for pin in pins(REPO / "eval", REPO / "eval" / "results"):
        notes = provenance.cpu_notes(pin.experiment.pipeline)
        spans = rows[pin.name].all("span", class_="cpu")
        assert len(spans) == len({note.split(": ")[0] for note in notes}), pin.name
        assert sum(span.attrs["title"].count("\n") + 1 for span in spans) == len(notes), pin.name
        many += any("measurements)" in span.content() for span in spans)
    assert many  # HCAN's three TrecQA measurements make one line


def test_each_reference_stands_beside_the_experiments_it_names():
    references = load_references(REPO / "eval" / "references.yaml")
    named = {name for entries in references.values() for entry in entries for name in entry.get("for", [])}
    assert named and all((REPO / "eval" / f"{name}.yaml").is_file() for name in named)
    rows = {row.attrs["data-experiment"]: row.content() for row in parse(PAGE.read_text()).all("tr")
            if "data-experiment" in row.attrs}
    for entries in references.values():
        for entry in entries:
            for name in entry.get("for", []):
                if name in rows:  # a pinned experiment
                    assert entry["system"] in rows[name] and entry["source"] in rows[name]


def _pin(tmp_path, result: dict) -> Pin:
    path = tmp_path / "x-rerank.yaml"
    path.write_text("dataset: x\npipeline: bm25() % 10 >> overlap()\nbaseline: bm25() % 10\nmeasures: [AP]\n"
                    "expected: {AP: 0.5}\ntolerance: 0.01\n")
    return Pin(Experiment.load(path), path, result)


def test_the_win_loss_plot_draws_a_bar_per_query_that_moved(tmp_path):
    result = {"dataset": "x", "measures": {"AP": 0.52}, "checks": {"AP": {"expected": 0.5, "status": "OKISH"}},
              "tolerance": 0.01, "win_loss": {"measure": "AP", "queries": 5, "wins": 2, "losses": 1, "ties": 2,
                                              "differences": [0.5, 0.25, 0.0, 0.0, -0.125]}}
    tree = parse(render_page([_pin(tmp_path, result)], {}))
    svg = tree.all("svg", class_="winloss")[0]
    bars = svg.all("rect")
    assert [b.attrs["fill"] for b in bars] == ["#2a9d4b", "#2a9d4b", "#c8323c"]
    heights = [float(b.attrs["height"]) for b in bars]
    assert heights[0] / heights[1] == pytest.approx(2, abs=0.02) and heights[0] / heights[2] == pytest.approx(4, abs=0.1)
    assert "2 better, 1 worse, 2 tied of 5 queries" in svg.attrs["aria-label"]
    assert "; p" not in svg.attrs["aria-label"]  # no baseline in the result: no p-value
    cell = tree.all("td", class_="num")[0].content()
    assert "0.5200" in cell and "pinned 0.5000" in cell and "OKISH" in cell


@pytest.mark.parametrize("baseline, label", [
    ({"pvalues": {"AP": 0.0123}}, "; p 0.012 (two-sided paired t-test)"),
    ({"pvalues": {"AP": 0.0123}, "test": "two-sided paired t-test over per-query seed means"},
     "; p 0.012 (two-sided paired t-test over per-query seed means)"),
    ({"pvalues": {"AP": None}, "pending": {"AP": 0.141}}, "; p 0.14 (seed-0 only, pending re-run)"),
    ({"pvalues": {"AP": 0.0}}, "; p < 1e-300 (two-sided paired t-test)"),  # scipy's underflow is not a p of 0
])
def test_the_win_loss_label_gives_the_pvalue_and_its_test(tmp_path, baseline, label):
    result = {"dataset": "x", "measures": {"AP": 0.52}, "baseline": {"measures": {"AP": 0.5}, **baseline},
              "win_loss": {"measure": "AP", "queries": 2, "wins": 1, "losses": 1, "ties": 0,
                           "differences": [0.1, -0.05]}}
    svg = parse(render_page([_pin(tmp_path, result)], {})).all("svg", class_="winloss")[0]
    assert svg.attrs["aria-label"] == "AP: 1 better, 1 worse, 0 tied of 2 queries" + label


def test_an_experiment_never_run_is_a_row_that_says_so(tmp_path):
    tree = parse(render_page([_pin(tmp_path, None)], {}))
    row = tree.all("tr", **{"data-experiment": "x-rerank"})[0]
    assert "not run" in row.content() and "never run" in row.content() and "unmeasured" in row.content()


def test_the_page_opens_with_the_answers_each_the_best_pin_of_its_question():
    """Above the tables, a row per question: the pin with the highest score of the question's measure among those
    on its dataset whose pipeline uses its model (found here by sorting, not by the page's code), its score, its
    command and a link to its row."""
    tree = parse(PAGE.read_text(encoding="utf-8"))
    sections = tree.all("section")
    assert [s.attrs["id"] for s in sections[:2]] == ["answers", "training"]
    assert all(s.attrs.get("data-dataset") for s in sections[2:])
    rows = sections[0].all("tr")[1:]
    assert [row.attrs["data-question"] for row in rows] == [question for question, *_ in ANSWERS]
    row_ids = {row.attrs["id"] for row in tree.all("tr") if "data-experiment" in row.attrs}
    found = pins(REPO / "eval", REPO / "eval" / "results")
    for row, (question, dataset, model, measure) in zip(rows, ANSWERS):
        candidates = sorted(((pin.result["measures"][measure], pin.name) for pin in found
                             if (pin.result or {}).get("dataset") == dataset and measure in pin.result["measures"]
                             and (model is None or f"{model}(" in pin.experiment.pipeline)), reverse=True)
        assert candidates, f"{question}: no pin answers it"
        score, name = candidates[0]
        assert row.attrs["data-best"] == name
        assert f"{score:.4f}" in row.all("td", class_="num")[0].content()
        assert [b.attrs["data-command"] for b in row.all("button", class_="copy")] == [f"irpipe run eval/{name}.yaml --check"]
        assert row.all("a")[0].attrs["href"][1:] in row_ids
        assert row.all("span")[-1].attrs["data-cost"] in ("seconds", "minutes", "hours", "unmeasured")


def test_the_answer_is_the_best_pipeline_using_the_model_beside_its_own_or_the_datasets_published_number(
        tmp_path, monkeypatch):
    def pin(name: str, pipeline: str, dataset: str, ap: float) -> Pin:
        path = tmp_path / f"{name}.yaml"
        path.write_text(f"dataset: {dataset}\npipeline: {pipeline}\nmeasures: [AP]\nexpected: {{AP: {ap}}}\n")
        return Pin(Experiment.load(path), path, {"dataset": dataset, "measures": {"AP": ap}})

    found = [pin("first-stage", "bm25() % 10", "x", 0.9), pin("weak", "bm25() % 10 >> overlap()", "x", 0.4),
             pin("strong", "bm25() % 10 >> overlap(idf=true)", "x", 0.6), pin("elsewhere", "overlap()", "y", 0.99)]
    assert best_pin(found, "x", "overlap", "AP").name == "strong"
    assert best_pin(found, "x", None, "AP").name == "first-stage"
    assert best_pin(found, "x", "hcan", "AP") is None and best_pin(found, "x", "overlap", "nDCG@10") is None
    references = {"x": [{"system": "paper", "scores": {"AP": 0.7}, "source": "the paper", "for": ["strong"]},
                        {"system": "peer", "scores": {"AP": 0.5}, "source": "a peer"},
                        {"system": "other measure", "scores": {"P@1": 0.5}, "source": "elsewhere"}]}
    monkeypatch.setattr(html_page, "ANSWERS", [("overlap on x", "x", "overlap", "AP"), ("any on x", "x", None, "AP"),
                                               ("hcan on x", "x", "hcan", "AP")])
    rows = parse(render_page(found, references)).all("section", id="answers")[0].all("tr")[1:]
    assert [row.attrs.get("data-best") for row in rows] == ["strong", "first-stage", None]
    claimed, unclaimed, missing = (row.content() for row in rows)
    assert "paper: AP 0.7000" in claimed and "peer" not in claimed
    assert "paper: AP 0.7000" in unclaimed and "peer: AP 0.5000" in unclaimed and "other measure" not in unclaimed
    assert "no pin on x reports AP" in missing


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium: the one on PATH, else Debian's, installed by this setup where the machine allows it (root,
    with apt-get and its package sources), else the test is skipped with the reason."""
    from pipeline.browser import BROWSERS

    def found():
        return any(shutil.which(name) for name in BROWSERS)

    why = "no headless Chromium here, and not root with apt-get to install it (apt-get install chromium)"
    if not found() and os.geteuid() == 0 and shutil.which("apt-get"):
        try:
            apt = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "chromium"], text=True,
                                 capture_output=True, timeout=300,
                                 env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
            why = "apt-get install chromium failed: " + (apt.stderr.strip().splitlines() or ["no output"])[-1]
        except subprocess.TimeoutExpired:
            why = "apt-get install chromium took over 5 minutes"
    if not found():
        pytest.skip(why)


@pytest.mark.slow
def test_the_page_loads_in_chromium_without_console_errors_and_a_broken_one_does_not(tmp_path, chromium):
    from pipeline.browser import check_in_browser

    assert check_in_browser(PAGE, tmp_path / "page.png") == []
    assert (tmp_path / "page.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    broken = tmp_path / "broken.html"
    broken.write_text(PAGE.read_text().replace("</body>", "<script>notDefined();</script></body>"))
    errors = check_in_browser(broken, tmp_path / "broken.png")
    assert any("notDefined is not defined" in error for error in errors)



def test_a_pin_against_its_own_untrained_start_is_shown_start_beside_trained():
    """The training section: a row per measure of every pin whose baseline is its pipeline with epochs=0, the start's
    and the trained model's means as the result holds them; a baseline that is another stage is not such a pin."""
    tree = parse(PAGE.read_text(encoding="utf-8"))
    found = pins(REPO / "eval", REPO / "eval" / "results")
    starts = {pin.name: pin for pin in found if pin.result and html_page.against_start(pin.experiment)}
    assert "trecqa-mrnn-contextual-identity" in starts
    rows = tree.all("section", id="training")[0].all("tr")[1:]
    assert {row.attrs["data-trained"] for row in rows} == set(starts)
    for row in rows:
        result = starts[row.attrs["data-trained"]].result
        measure = row.attrs["data-measure"]
        start, trained, delta = (cell.content() for cell in row.all("td", class_="num")[:3])
        assert start.startswith(f"{result['baseline']['measures'][measure]:.4f} ± ")
        assert trained.startswith(f"{result['measures'][measure]:.4f} ± ")


@pytest.mark.parametrize("pipeline, baseline, expected", [
    ("mrnn(train=trecqa/train, epochs=10, seed={seed})", "mrnn(train=trecqa/train, epochs=0, seed={seed})", True),
    ("mrnn(train=trecqa/train, seed={seed})", "mrnn(seed={seed}, epochs=0, train=trecqa/train)", True),
    ("bm25() >> hcan(train=trecqa/train)", "bm25() >> hcan(train=trecqa/train, epochs=0)", True),
    ("mrnn(train=trecqa/train, epochs=10, seed={seed})", "mrnn(train=trecqa/train, epochs=0, seed=1)", False),
    ("mrnn(train=trecqa/train, epochs=10)", "overlap(idf=true)", False),
    ("mrnn(train=trecqa/train, epochs=10)", None, False)])
def test_a_baseline_is_the_start_only_when_it_is_the_same_pipeline_untrained(pipeline, baseline, expected):
    experiment = type("E", (), {"pipeline": pipeline, "baseline": baseline})()
    assert html_page.against_start(experiment) is expected


def test_the_cost_cell_says_a_cold_run_was_resumed_over_several_attempts():
    def cost(result):
        return html_page._cost(Pin(experiment=None, path=Path("x.yaml"), result=result))

    assert cost({"cost": {"seconds": 5400.0, "attempts": 2}}) == ('<span data-cost="hours">hours (1.50 h, 2 attempts)'
                                                                 '</span>')
    assert cost({"cost": {"seconds": 90.0}}) == '<span data-cost="minutes">minutes (1.5 min)</span>'
    assert cost({"seconds": 3.0}) == '<span data-cost="unmeasured">unmeasured</span>'
