"""jieba segmentation: normalisation, word filter, user words as units, our own cache folder, lazy import."""
from __future__ import annotations

import subprocess
import sys

import pytest

from pipeline.retrieve.segment import Segmenter, fold_width_and_case, is_number, is_word


def test_normalisation_folds_width_and_case():
    assert fold_width_and_case("ｉＰｈｏｎｅ６ｓ怎么样？") == "iphone6s怎么样?"


def test_words_drop_whitespace_and_punctuation():
    words = Segmenter().words("重疾险和寿险有什么区别？ iPhone 6s！！")
    assert words == ["重疾险", "和", "寿险", "有", "什么", "区别", "iphone", "6s"]


@pytest.mark.slow
def test_user_word_is_cut_as_one_token():
    plain = Segmenter().words("初婚未育证明怎么开")
    assert plain[:2] == ["初婚", "未育"]  # jieba's own dictionary splits it
    assert Segmenter(["初婚未育"]).words("初婚未育证明怎么开")[0] == "初婚未育"
    assert Segmenter().words("初婚未育证明怎么开") == plain  # a user dictionary never changes the default one


def test_numbers_and_punctuation():
    assert [is_number(t) for t in ("2008", "1.54%", "三", "十一", "6s", "考研")] == [True, True, True, True, False, False]
    assert [is_word(t) for t in ("？", "！！", " ", "+", "a", "考研")] == [False, False, False, False, True, True]


def test_jieba_cache_goes_to_the_irpipe_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path))
    segmenter = Segmenter()
    assert segmenter._tokenizer.tmp_dir == str(tmp_path / "jieba")
    assert (tmp_path / "jieba" / "jieba.cache").is_file()


def test_importing_the_cli_does_not_import_jieba():
    code = "import sys, pipeline.cli; pipeline.cli.build_parser(); print('jieba' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
