"""A benchmark's record name (eval/benchmarks/NAME.json) is a plain name: a path or a name ending in .json is
argparse's exit 2, before the benchmark does any work."""
from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("module, flag", [
    ("bm25_speed", "--record"), ("lucene_floor", "--record"), ("index_speed", "--record"), ("peak_memory", "--record"),
    ("ray_scale", "--record"), ("store_codecs", "--record"), ("inference_speed", "--output"),
    ("rerank_speed", "--output"),
    ("dev_small_projection", "--rerank")])
@pytest.mark.parametrize("name", ["../README", "/tmp/x", "runs/x", "x.json", ""])
def test_a_record_name_that_is_not_a_plain_name_is_exit_2_before_any_work(module, flag, name, capsys):
    main = importlib.import_module(f"pipeline.benchmarks.{module}").main
    with pytest.raises(SystemExit) as exit_:
        main([flag, name])
    assert exit_.value.code == 2 and "a record's name is letters, digits" in capsys.readouterr().err
