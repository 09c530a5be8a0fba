"""A benchmark's record name (eval/benchmarks/NAME.json) is a plain name: a path or a name ending in .json is
argparse's exit 2, before the benchmark does any work; so is a count below 1."""
from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("module, flag", [
    ("bm25_speed", "--record"), ("lucene_floor", "--record"), ("index_speed", "--record"), ("peak_memory", "--record"),
    ("ray_scale", "--record"), ("store_codecs", "--record"), ("inference_speed", "--output"),
    ("rerank_speed", "--output"), ("mrnn_start", "--record"), ("digest_speed", "--record"),
    ("dev_small_projection", "--rerank"), ("cpu_peers", "--output"), ("cpu_peers", "--quality-from"),
    ("encode_peers", "--output")])
@pytest.mark.parametrize("name", ["../README", "/tmp/x", "runs/x", "x.json", ""])
def test_a_record_name_that_is_not_a_plain_name_is_exit_2_before_any_work(module, flag, name, capsys):
    main = importlib.import_module(f"bench.{module}").main
    with pytest.raises(SystemExit) as exit_:
        main([flag, name])
    assert exit_.value.code == 2 and "a record's name is letters, digits" in capsys.readouterr().err


@pytest.mark.parametrize("module, flag", [("bm25_speed", "--queries"), ("lucene_floor", "--queries"),
                                          ("lucene_floor", "--hits"), ("mrnn_start", "--queries"),
                                          ("mrnn_start", "--filters"), ("digest_speed", "--docs"),
                                          ("digest_speed", "--files"), ("cpu_peers", "--pairs"),
                                          ("cpu_peers", "--quality-queries"), ("encode_peers", "--passages"),
                                          ("encode_peers", "--repeats")])
@pytest.mark.parametrize("value", ["0", "-1", "ten"])
def test_a_count_below_one_is_exit_2_before_any_work(module, flag, value, capsys):
    """`--queries -1` would otherwise drop the last topic silently (a slice); 0 hits is no search at all."""
    main = importlib.import_module(f"bench.{module}").main
    with pytest.raises(SystemExit) as exit_:
        main([flag, value])
    assert exit_.value.code == 2 and "expected a whole number of at least 1" in capsys.readouterr().err
