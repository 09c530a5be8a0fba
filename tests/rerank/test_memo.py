import torch

from pipeline.rerank.memo import TextMemo


def counting(calls):
    def compute(missing):
        calls.append(list(missing))
        return [torch.full((len(row), 2), float(sum(row))) for row in missing]  # (L, 2) float32: 8 bytes a token
    return compute


def test_each_text_is_computed_once_and_returned_in_row_order():
    calls, memo = [], TextMemo()
    rows = [(1, 2), (3,), (1, 2)]
    first = memo.lookup(rows, counting(calls))
    again = memo.lookup(rows[::-1], counting(calls))
    assert calls == [[(1, 2)], [(3,)]]                                   # each alone; the repeats: memory
    assert [t[0, 0].item() for t in first] == [3.0, 3.0, 3.0] and first[1].shape == (1, 2)
    assert [t.shape[0] for t in again] == [2, 1, 2] and memo.nbytes == 3 * 8


def test_beyond_its_bound_the_least_recently_used_text_goes_first():
    calls, memo = [], TextMemo(max_bytes=2 * 16)                          # room for two 2-token texts
    memo.lookup([(1, 1), (2, 2)], counting(calls))
    memo.lookup([(1, 1)], counting(calls))                               # (1, 1) is now the most recently used
    memo.lookup([(3, 3)], counting(calls))                               # drops (2, 2)
    assert [row for row, _ in memo.items()] == [(1, 1), (3, 3)] and memo.nbytes == 32
    values = memo.lookup([(2, 2), (1, 1)], counting(calls))             # (2, 2) computed again, the same value
    assert calls[-1] == [(2, 2)] and values[0][0, 0].item() == 4.0 and values[1][0, 0].item() == 2.0
    memo.clear()
    assert len(memo) == 0 and memo.nbytes == 0


def test_a_batch_larger_than_the_bound_still_gets_all_its_values():
    memo = TextMemo(max_bytes=8)
    values = memo.lookup([(1,), (2,), (3,)], counting([]))
    assert [v[0, 0].item() for v in values] == [1.0, 2.0, 3.0] and len(memo) == 1


def test_a_remembered_value_owns_its_storage():
    base = torch.zeros(4, 10)
    [value] = TextMemo().lookup([(7,)], lambda missing: [base[0, :1]])
    assert value.untyped_storage().nbytes() == 4 and value.data_ptr() != base.data_ptr()


def test_a_plan_keeps_a_text_until_its_last_lookup_and_a_text_looked_up_once_not_at_all():
    calls, memo = [], TextMemo()
    lookups = [[(1,), (2,)], [(1,), (3,)], [(4,), (1,), (1,)]]          # (1,) in three lookups, the others in one
    memo.expect(lookups)
    for rows, kept in zip(lookups, [[(1,)], [(1,)], []]):
        memo.lookup(rows, counting(calls))
        assert [row for row, _ in memo.items()] == kept
    assert calls == [[(1,)], [(2,)], [(3,)], [(4,)]] and memo.nbytes == 0  # (1,) computed once
    memo.clear()                                                         # the plan ends: every text kept again
    memo.lookup([(5,)], counting(calls))
    assert len(memo) == 1


def test_a_text_is_computed_alone_so_its_value_does_not_depend_on_the_texts_missing_beside_it():
    """A compute that, like a padded GEMM, gives a row other bits in a batch of another shape: the remembered value
    is the text's alone whichever texts were looked up with it."""
    def padded(missing):
        width = max(len(row) for row in missing)
        return [torch.tensor([float(sum(row)) + 1e-3 * (len(missing) - 1) + 1e-4 * width]) for row in missing]

    alone = TextMemo().lookup([(5,)], padded)[0]
    beside = TextMemo().lookup([(1, 2, 3), (5,), (9, 9)], padded)[1]
    assert torch.equal(alone, beside)
