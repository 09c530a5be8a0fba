"""`compile=true` (pipeline/rerank/scoring.py `compiled`): the model's forward through torch.compile scores a real
(tiny, seeded) monobert as the eager model does, batches of other lengths compile no new graph beyond the dynamic
one, the option keys the stage's output apart, and a late-interaction model refuses it."""
from __future__ import annotations

import pytest
import torch

import pipeline as ir
from pipeline.errors import ConfigError
from pipeline.rerank.models.monobert import MonoBERT, MonoBERTConfig
from pipeline.rerank.pairs import pairs_of
from pipeline.rerank.scoring import Runtime, compiled, predict

CPU = torch.device("cpu")


@pytest.mark.slow
def test_a_compiled_model_scores_as_the_eager_one_in_fp32(tiny_qa, tiny_bert):
    run = tiny_qa.run()
    pairs = pairs_of(tiny_qa.topics(), run, run.texts)
    torch.manual_seed(0)
    model = MonoBERT(MonoBERTConfig(bert=str(tiny_bert), max_length=48)).eval()
    eager = predict(model, pairs, amp="none").scores
    fast = compiled(model)
    assert fast is model and isinstance(fast, MonoBERT)  # the same module: every method and attribute as before
    scores = predict(fast, pairs, amp="none", batch_size=3).scores  # batches of 3 and 2 pairs: other shapes
    assert scores == pytest.approx(eager, abs=1e-5)
    again = predict(fast, list(reversed(pairs)), amp="none", batch_size=3).scores[::-1]
    assert again == scores  # the compiled graph is a function of the pair too: order and neighbours do not matter


def test_compile_is_a_runtime_option_that_keys_the_output_apart_and_late_interaction_refuses_it(tmp_path):
    assert Runtime(compile=True).compile and not Runtime().compile
    plain, fast = ir.monobert(ckpt=str(tmp_path)), ir.monobert(ckpt=str(tmp_path), compile=True)
    assert "compile" not in plain.config() and fast.config()["compile"] is True and plain != fast
    assert "compile=True" in repr(fast)
    with pytest.raises(ConfigError, match="late interaction.*compile=true would change nothing"):
        ir.addax(ckpt=str(tmp_path), compile=True)
    for wrong in ("maybe", 1, None):  # a runtime flag is a boolean, as a model or training option is
        with pytest.raises(ConfigError, match=f"compile={wrong!r}; expected true or false"):
            ir.monobert(ckpt=str(tmp_path), compile=wrong)
