"""diff-idf dictionaries against the formula by hand; keyword extraction; keyword-augmented BM25 (planted
documents, the boost as it says, weight 0 = plain BM25); the spec grammar; `irpipe keywords`."""
from __future__ import annotations

import json
import math

import pytest

from pipeline.cli import main
from pipeline.data.topics import Topics
from pipeline.errors import ConfigError, InputError
from pipeline.stages.bm25 import BM25
from pipeline.retrieve.index import build_index
from pipeline.retrieve.keyword_dictionary import Keyword, KeywordDictionary, build_dictionary, diff_idf
from pipeline.retrieve.keywords import KeywordExtractor
from pipeline.stages.keywords import BM25KW, Keywords
from pipeline.retrieve.lucene import LuceneIndex
from pipeline.spec import parse

# -- the dictionary ----------------------------------------------------------------------------------------------
THREE_DOMAINS = [("sport", "goal match"), ("sport", "goal team"), ("sport", "goal match fans"), ("sport", "team"),
                 ("money", "stock match"), ("money", "stock bank"),
                 ("tech", "chip code"), ("tech", "chip match"), ("tech", "code")]


def test_diff_idf_equals_the_formula_by_hand():
    dictionary = build_dictionary(THREE_DOMAINS, "zh", threshold=-100, min_df=1)
    # goal: in 3 of the 4 sport documents, in none of the other 5
    assert dictionary.entries["goal"] == Keyword("goal", "sport", math.log(5 / (0 + 1)) - math.log(4 / (3 + 1)), 3, 4, 0, 5)
    assert dictionary.entries["stock"].score == pytest.approx(math.log(7 / (0 + 1)) - math.log(2 / (2 + 1)))
    # match: sport 2/4 vs 2/5 elsewhere, money 1/2 vs 3/7, tech 1/3 vs 3/6 -> money's score is the best and is kept
    scores = {"sport": math.log(5 / (2 + 1)) - math.log(4 / (2 + 1)), "money": math.log(7 / (3 + 1)) - math.log(2 / (1 + 1)),
              "tech": math.log(6 / (3 + 1)) - math.log(3 / (1 + 1))}
    assert scores["tech"] == pytest.approx(0.0) and max(scores, key=scores.get) == "money"
    assert dictionary.entries["match"] == Keyword("match", "money", scores["money"], 1, 2, 3, 7)
    assert diff_idf(2, 4, 2, 5) == pytest.approx(scores["sport"])


@pytest.mark.slow
def test_threshold_top_k_and_min_df():
    dictionary = build_dictionary(THREE_DOMAINS, "zh", threshold=1.0, min_df=2)
    # team: log(5 / 1) - log(4 / 3) = 1.32 > 1; match (sport): log(5 / 3) - log(4 / 3) = 0.22; fans, bank: df 1
    assert sorted(dictionary.entries) == ["chip", "code", "goal", "stock", "team"]
    top1 = build_dictionary(THREE_DOMAINS, "zh", threshold=-100, min_df=1, top_k=1)
    assert sorted((e.domain, e.word) for e in top1) == [("money", "stock"), ("sport", "goal"), ("tech", "chip")]


@pytest.mark.slow
def test_a_word_spread_evenly_over_domains_scores_about_zero():
    documents = [(domain, f"{domain}word common" if i % 2 == 0 else f"{domain}word")
                 for domain in ("alpha", "beta", "gamma") for i in range(100)]
    dictionary = build_dictionary(documents, "zh", threshold=-100)
    common = dictionary.entries["common"]
    assert (common.df_domain, common.docs_domain, common.df_rest, common.docs_rest) == (50, 100, 100, 200)
    assert common.score == pytest.approx(math.log(200 / 101) - math.log(100 / 51)) and abs(common.score) < 0.01
    assert dictionary.entries["betaword"].score == pytest.approx(math.log(200 / 1) - math.log(100 / 101))


def test_stop_words_numbers_and_punctuation_never_become_keywords():
    documents = [("news", "2008年什么的股票！！"), ("news", "2008年什么的股票？"), ("news", "三 股票 ..."),
                 ("games", "游戏玩家"), ("games", "游戏玩家"), ("games", "新游戏")]
    dictionary = build_dictionary(documents, "zh", threshold=-100, min_df=1)
    assert {"股票", "游戏", "玩家"} <= set(dictionary.entries)
    assert not set(dictionary.entries) & {"2008", "三", "什么", "的", "年", "！", "！！", "？", "...", "."}


def test_dictionary_tsv_round_trip_and_errors(tmp_path):
    dictionary = build_dictionary(THREE_DOMAINS, "zh", threshold=0.5, min_df=1, settings={"corpus": "hand"})
    path = dictionary.save(tmp_path / "d.tsv")
    loaded = KeywordDictionary.load(path)
    assert list(loaded) == [Keyword(e.word, e.domain, round(e.score, 6), *[getattr(e, c) for c in
                            ("df_domain", "docs_domain", "df_rest", "docs_rest")]) for e in dictionary]
    assert loaded.settings["corpus"] == "hand" and loaded.language == "zh" and loaded.digest() == dictionary.digest()
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3] + [lines[3].replace("\t2\t", "\tx\t", 1)]) + "\n")
    with pytest.raises(InputError) as error:
        KeywordDictionary.load(path)
    assert error.value.line == 4 and str(path) in str(error.value)


# -- extraction --------------------------------------------------------------------------------------------------
def _dictionary(rows, language="zh") -> KeywordDictionary:
    return KeywordDictionary([Keyword(word, domain, score, 1, 1, 1, 1) for word, domain, score in rows], language)


ZH = _dictionary([("英雄", "game", 3.3), ("联盟", "sports", 2.67), ("初婚未育", "society", 4.0), ("股票", "stocks", 5.0)])


def test_keywords_of_a_text_ranked_by_score():
    extractor = KeywordExtractor(ZH)
    assert [k.word for k in extractor.keywords("英雄联盟什么英雄最好")] == ["英雄", "联盟"]
    assert [k.word for k in extractor.keywords("开初婚未育证明怎么弄？")] == ["初婚未育"]  # one token thanks to jieba's user words
    assert extractor.keywords("今天天气不错") == ()


@pytest.mark.slow
def test_a_rewritten_dictionary_file_is_read_again(tmp_path):
    import os

    from pipeline.retrieve.keywords import extractor_for

    path = _dictionary([("英雄", "game", 3.3)]).save(tmp_path / "d.tsv")
    assert [k.word for k in extractor_for(str(path)).keywords("英雄联盟")] == ["英雄"]
    _dictionary([("联盟", "sports", 2.0)]).save(path)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert [k.word for k in extractor_for(str(path)).keywords("英雄联盟")] == ["联盟"]


@pytest.mark.slow
def test_keywords_stage_attaches_keywords_to_topics(zh_file):
    """The stages after `keywords()` see each query's keywords; the topics it was given are left as they were."""
    topics = Topics({"1": "英雄联盟什么英雄最好", "2": "今天天气不错"}, {"2": {"note": "kept"}})
    stage = Keywords(zh_file).bind()
    assert len(stage(topics)) == 0
    annotated = stage.annotate(topics)
    assert annotated.extra == {"1": {"keywords": ["英雄", "联盟"]}, "2": {"note": "kept", "keywords": []}}
    assert topics.extra == {"2": {"note": "kept"}}


def test_the_stages_after_keywords_see_them(zh_file):
    """`keywords(...) >> s`: s (here a stage that records its topics) gets the annotated topics; the caller's
    topics stay as they were."""
    from pipeline.data.runs import Run
    from pipeline.stage import Stage

    seen = []

    class Record(Stage):
        def transform(self, topics, run):
            seen.append(topics.extra)
            return run if run is not None else Run({})

    topics = Topics({"1": "英雄联盟什么英雄最好"})
    (Keywords(zh_file) >> Record())(topics)
    assert seen == [{"1": {"keywords": ["英雄", "联盟"]}}] and topics.extra == {}


# -- retrieval ---------------------------------------------------------------------------------------------------
ZH_DOCS = [("d1", "英雄联盟哪个英雄最厉害"), ("d2", "今天股票大涨了吗"), ("d3", "初婚未育证明去哪里开"),
           ("d4", "联盟"), ("d5", "什么最好"), ("d6", "今天天气怎么样")]


@pytest.fixture(scope="module")
def zh_file(tmp_path_factory) -> str:
    return str(ZH.save(tmp_path_factory.mktemp("kw") / "zh.tsv"))


@pytest.fixture(scope="module", params=["bigram", "jieba"])
def zh_index(request, tmp_path_factory):
    index = tmp_path_factory.mktemp("zh") / request.param
    build_index(({"id": d, "contents": t} for d, t in ZH_DOCS), index, "test", language="zh",
                segmenter="jieba" if request.param == "jieba" else None)
    return str(index)


@pytest.mark.slow
def test_chinese_retrieval_returns_the_planted_document(zh_index, zh_file):
    topics = Topics({"q": "初婚未育证明怎么开", "s": "股票涨了"})
    for stage in (BM25(zh_index, hits=3), BM25KW(zh_file, index=zh_index, hits=3)):
        run = stage(topics)
        assert run["q"][0][0] == "d3" and run["s"][0][0] == "d2"


def test_augmented_query_is_the_query_plus_exactly_its_keywords(zh_index, zh_file):
    index = LuceneIndex(zh_index)
    assert BM25KW(zh_file, weight=0.5).splitter(index)("英雄联盟什么英雄最好") == [("英雄联盟什么英雄最好", 1.0), ("英雄 联盟", 0.5)]
    assert BM25KW(zh_file).splitter(index)("今天天气不错") == [("今天天气不错", 1.0)]


@pytest.mark.parametrize("weight", [0.5, 2.0])
def test_weighted_variant_changes_scores_as_the_boost_says(zh_index, zh_file, weight):
    topics = Topics({"q": "联盟什么最好"})  # keyword: 联盟 (d4 holds only it); d5 holds only the rest
    plain = dict(BM25(zh_index, hits=10)(topics)["q"])
    boosted = dict(BM25KW(zh_file, weight=weight, index=zh_index, hits=10)(topics)["q"])
    assert boosted["d4"] == pytest.approx((1 + weight) * plain["d4"], abs=2e-4)  # tf 1 in the query + weight
    assert boosted["d5"] == pytest.approx(plain["d5"], abs=2e-4)


def test_weight_zero_is_plain_bm25(zh_index, zh_file):
    topics = Topics({"a": "英雄联盟什么英雄最好", "b": "今天股票怎么样", "c": "初婚未育"})
    plain = BM25(zh_index, hits=10)(topics)
    zero = BM25KW(zh_file, weight=0.0, index=zh_index, hits=10)(topics)
    for qid in topics:
        assert [d for d, _ in zero[qid]] == [d for d, _ in plain[qid]]
        assert [s for _, s in zero[qid]] == pytest.approx([s for _, s in plain[qid]], abs=1e-4)


EN_DOCS = [("p1", "The Denver Broncos won Super Bowl 50 against the Carolina Panthers."),
           ("p2", "The NFL team of the AFC plays in the National Football League."),
           ("p3", "Chloroplasts carry out photosynthesis in plant cells."),
           ("p4", "A team of engineers represented the museum at the fair.")]


@pytest.fixture(scope="module")
def en_index(tmp_path_factory):
    index = tmp_path_factory.mktemp("en") / "index"
    build_index(({"id": d, "contents": t} for d, t in EN_DOCS), index, "test")
    return str(index)


@pytest.mark.slow
def test_english_keywords_are_analyzed_terms(en_index, tmp_path):
    dictionary = build_dictionary([("football", EN_DOCS[0][1]), ("football", EN_DOCS[1][1]), ("football", "Bowl games"),
                                   ("biology", EN_DOCS[2][1]), ("biology", "plant cells")], "en", threshold=0.5, min_df=2)
    assert {"bowl", "plant", "cell"} <= set(dictionary.entries) and "the" not in dictionary
    path = dictionary.save(tmp_path / "en.tsv")
    weigh = BM25KW(str(path), weight=1.0).weigher(LuceneIndex(en_index))
    assert weigh("Which team won Super Bowl 50?") == {"which": 1, "team": 1, "won": 1, "super": 1, "bowl": 2, "50": 1}
    run = BM25KW(str(path), index=en_index, hits=2)(Topics({"q": "Who won the Super Bowl?"}))
    assert run["q"][0][0] == "p1"


def test_english_weight_zero_is_plain_bm25(en_index, tmp_path):
    path = _dictionary([("team", "x", 2.0), ("bowl", "y", 3.0)], "en").save(tmp_path / "en.tsv")
    topics = Topics({"a": "Which NFL team won Super Bowl 50?", "b": "team of engineers"})
    plain = BM25(en_index, hits=10)(topics)
    zero = BM25KW(str(path), weight=0.0, index=en_index, hits=10)(topics)
    assert {q: [d for d, _ in h] for q, h in zero.ranking.items()} == {q: [d for d, _ in h] for q, h in plain.ranking.items()}


def test_language_mismatch_is_an_error(en_index, zh_file):
    from pipeline.errors import ConfigError

    with pytest.raises(ConfigError, match="use a dictionary in the index's language"):
        BM25KW(zh_file, index=en_index)(Topics({"q": "team"}))


def test_spec_grammar_builds_the_same_stages():
    stage = parse("bm25kw(dict=thucnews, weight=0.5, hits=100) >> exclude()")
    assert stage[0] == BM25KW("thucnews", weight=0.5, hits=100)
    assert repr(stage) == "bm25kw(dict=thucnews, weight=0.5, k1=0.9, b=0.4, hits=100) >> exclude()"
    assert parse(repr(stage)) == stage
    assert parse("keywords(dict=squad-dev)") == Keywords("squad-dev")
    with pytest.raises(ConfigError, match="bm25kw: weight=-1; expected a number >= 0"):
        BM25KW("thucnews", weight=-1)


# -- irpipe keywords -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cli_build_and_extract(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t, "label": d}, ensure_ascii=False) + "\n" for d, t in THREE_DOMAINS))
    out = tmp_path / "dict.tsv"
    assert main(["-q", "keywords", "build", "--corpus", str(corpus), "--domain-field", "label", "--language", "zh",
                 "--threshold", "0", "--min-df", "1", "--output", str(out)]) == 0
    assert KeywordDictionary.load(out).entries["goal"].domain == "sport"
    capsys.readouterr()
    assert main(["-q", "keywords", "extract", "--dict", str(out), "a goal for the stock market"]) == 0
    assert capsys.readouterr().out.split("\t")[1].split() == ["stock(money:2.35)", "goal(sport:1.61)"]


@pytest.mark.slow
def test_cli_errors_name_the_file_line_and_field(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"text": "a", "domain": "x"}\n{"text": "b"}\n')
    assert main(["-q", "keywords", "build", "--corpus", str(corpus), "--language", "zh", "--output",
                 str(tmp_path / "d.tsv")]) == 2
    assert f"{corpus}:2 [domain]" in capsys.readouterr().err and not (tmp_path / "d.tsv").exists()
    assert main(["-q", "keywords", "build", "--corpus", "thucnew", "--output", str(tmp_path / "d.tsv")]) == 2
    assert "Did you mean: thucnews" in capsys.readouterr().err
