"""The inference benchmark's ranking comparison of a mode with fp32 (bench/inference_speed.py
`swaps`, `adjacent_gap`): what it counts as a swapped pair and the fp32 gap it reports for it."""
from __future__ import annotations

from bench.inference_speed import adjacent_gap, swaps
from pipeline.data.runs import Run


def test_swaps_counts_reordered_pairs_of_either_top_k_with_their_widest_fp32_gap():
    fp32 = {"q": {"a": 3.0, "b": 2.9, "c": 2.0, "d": 1.0}}
    mode = {"q": {"a": 3.0, "b": 3.1, "c": 2.0, "d": 2.5}}  # b over a (gap 0.1), d over c (gap 1.0), d at rank 3
    assert swaps(Run.from_scores(mode), Run.from_scores(fp32), fp32, depth=4) == (2, 1.0)
    # top 2 of either run: a, b (fp32) and b, a (mode): only the a/b swap; d's rise past c is below the cut
    count, widest = swaps(Run.from_scores(mode), Run.from_scores(fp32), fp32, depth=2)
    assert (count, round(widest, 6)) == (1, 0.1)
    assert swaps(Run.from_scores(fp32), Run.from_scores(fp32), fp32) == (0, 0.0)


def test_a_document_entering_the_top_k_is_compared_with_those_it_passed():
    fp32 = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    mode = {"q": {"a": 3.0, "b": 0.5, "c": 1.0}}  # c enters the top 2 over b
    count, widest = swaps(Run.from_scores(mode), Run.from_scores(fp32), fp32, depth=2)
    assert (count, round(widest, 6)) == (1, 1.0)


def test_adjacent_gap_is_the_median_over_neighbours_in_the_top_k():
    run = Run.from_scores({"q": {"a": 4.0, "b": 3.0, "c": 2.5, "d": 0.0}, "r": {"x": 1.0, "y": 0.9}})
    assert round(adjacent_gap(run, depth=3), 6) == 0.5  # gaps 1.0, 0.5 (q's top 3) and 0.1 (r)


def test_kept_scores_are_written_once_and_reused(tmp_path):
    from bench.inference_speed import saved_scores

    calls = []
    function = lambda pairs: calls.append(pairs) or [float(p) for p in pairs]  # noqa: E731
    path = tmp_path / "dl19" / "fp32.json"
    assert saved_scores(function, path)([1, 2]) == [1.0, 2.0] and path.is_file()
    assert saved_scores(function, path)([1, 2]) == [1.0, 2.0] and len(calls) == 1   # reused, not run again
    assert saved_scores(function, None)([3]) == [3.0] and len(calls) == 2


def test_none_names_no_modes_as_the_help_says():
    from bench.inference_speed import parse_args

    args = parse_args(["--modes", "none", "--quality-modes", "none"])
    assert (args.modes, args.quality_modes) == ([], [])
    assert parse_args(["--quality-modes"]).quality_modes == []                       # the same as no value
    assert parse_args(["--quality-modes", "fp32", "int8-channel"]).quality_modes == ["fp32", "int8-channel"]


def test_none_beside_a_mode_is_refused_with_exit_2(capsys):
    import pytest

    from bench.inference_speed import parse_args

    with pytest.raises(SystemExit) as stopped:
        parse_args(["--quality-modes", "none", "fp32"])
    assert stopped.value.code == 2 and "'none' means no modes" in capsys.readouterr().err
