"""The encoding benchmark's passages and its table (bench/encode_peers.py)."""
from __future__ import annotations

from bench.encode_peers import markdown, passages


def test_the_passages_are_distinct_in_the_runs_order_each_with_its_query(shared_data, monkeypatch):
    monkeypatch.setenv("IRPIPE_MIRROR", str(shared_data))
    texts, qids, queries = passages(150)
    assert len(texts) == len(set(texts)) == len(qids) == 150
    assert qids[0] == qids[99] != qids[100] and set(queries) == set(qids)      # the first query's 100, then the next


def test_the_table_has_a_row_per_mode_with_its_ratio_to_st():
    row = {"passages_per_s": 20.0, "speedup_vs_st": 1.4, "gflops": 40.1, "share_of_fp32_peak": 0.51,
           "max_abs_cosine_vs_st": 2.4e-07}
    table = markdown({"cpu": "X", "threads": 1, "passages": 400, "repeats": 3, "load_average_start": [0.1],
                      "speed": {"st": row | {"speedup_vs_st": 1.0}, "irpipe": row}})
    assert "| irpipe | 20.0 | 1.4 | 40.1 (0.51) | 2.4e-07 |" in table and "| st | 20.0 | 1.0 |" in table


def test_the_docs_table_is_the_record_as_printed():
    import json

    from bench import REPO

    record = json.loads((REPO / "eval" / "benchmarks" / "encode-peers-1t.json").read_text())
    table = markdown(record).split("\n", 2)[2]
    assert table in (REPO / "docs" / "inference.md").read_text(), "regenerate docs/inference.md's encode table"
