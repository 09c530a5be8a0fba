"""The dataset registry: every registered dataset read from the mirror (counts, first and last items, in the
ir_datasets style), the cache -> mirror -> download layers (downloads from a local HTTP server only), and the CLI."""
from __future__ import annotations

import hashlib
import http.server
import io
import json
import re
import socket
import tarfile
import threading
import urllib.request
import zipfile
from functools import partial
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.data import registry
from pipeline.data.registry import LabelledPair, dataset_names, get_dataset
from pipeline.data.sets import base
from pipeline.data.sets.base import DataFile, DatasetLacksError, resolve
from pipeline.errors import MissingResourceError, UnknownNameError


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """A private cache for this test session, and no downloads unless a test turns them on."""
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path_factory.getbasetemp() / "irpipe-cache"))
    monkeypatch.setenv("IRPIPE_OFFLINE", "1")


@pytest.fixture
def mirror(shared_data, monkeypatch):
    monkeypatch.setenv("IRPIPE_MIRROR", str(shared_data))
    return shared_data


# -- every registered dataset, on the mirror ---------------------------------------------------------------------
# name: {part: (count, first item, last item)}; topics items are (qid, text), qrels (qid, docid, level) of the first
# and last judged query in file order, docs (id, contents prefix), run (qid, docid, score) and pairs/records whole.
EXPECTED = {
    "cacm": {
        "topics": (64, ("1", "What articles exist which deal with TSS (Time Sharing System), an operating system for IBM computers?"),
                   ("64", "List all articles on EL1 and ECL (EL1 may be given as EL/1; I don't remember how they did it.")),
        "qrels": (796, ("1", "CACM-1410", 1), ("64", "CACM-2651", 1)),
        "docs": (3204, ("CACM-2636", "Generation of Random Correlated Normal Variables (Algorithm R425)"),
                 ("CACM-2024", "Comments on a Paper by Lowe")),
    },
    "vaswani": {
        "topics": (93, ("1", "MEASUREMENT OF DIELECTRIC CONSTANT OF LIQUIDS BY THE USE OF MICROWAVE TECHNIQUES"),
                   ("93", "HIGH FREQUENCY OSCILLATORS USING TRANSISTORS THEORETICAL TREATMENT AND PRACTICAL CIRCUIT DETAILS")),
        "qrels": (2083, ("1", "1239", 1), ("93", "11318", 1)),
        "docs": (11429, ("1", "compact memories have flexible capacities a digital data storage"),
                 ("11429", "pattern detection and recognition both processes")),
    },
    "cranfield": {
        "topics": (225, ("1", "what similarity laws must be obeyed when constructing aeroelastic models of heated high speed aircraft ."),
                   ("225", "what design factors can be used to control lift-drag ratios at mach numbers above 5 .")),
        "qrels": (1837, ("1", "184", 5 - 2), ("225", "1188", 0)),  # Cleverdon code 2 -> grade 3; code -1 -> 0
        "docs": (1400, ("1", "experimental investigation of the aerodynamics of a wing in a slipstream . experimental"),
                 ("1400", "the buckling shear stress of simply-supported infinitely long plates")),
    },
    "squad-v1.1/dev": {
        "topics": (10570, ("56be4db0acb8001400a502ec", "Which NFL team represented the AFC at Super Bowl 50?"),
                   ("5737aafd1c456719005744ff", "What is the seldom used force unit equal to one thousand newtons?")),
        "qrels": (10570, ("56be4db0acb8001400a502ec", "Super_Bowl_50-0", 1), ("5737aafd1c456719005744ff", "Force-43", 1)),
        "docs": (2067, ("Super_Bowl_50-0", "Super Bowl 50 was an American football game"),
                 ("Force-43", "The pound-force has a metric counterpart")),
    },
    "squad-v1.1/dev-articles-a-train": {
        "topics": (4913, ("56be4db0acb8001400a502ec", "Which NFL team represented the AFC at Super Bowl 50?"),
                   ("572648d1708984140094c161", "What did the network install in 1999")),
        "qrels": (4913, ("56be4db0acb8001400a502ec", "Super_Bowl_50-0", 1),
                  ("572648d1708984140094c161", "Packet_switching-22", 1)),
        "docs": (888, ("Super_Bowl_50-0", "Super Bowl 50 was an American football game"),
                 ("Packet_switching-22", "The Very high-speed Backbone Network Service")),
    },
    "squad-v1.1/dev-articles-a-dev": {
        "topics": (783, ("57264684708984140094c123", "Where did the black death originate?"),
                   ("57270ab9708984140094d8fb", "What type of conservation include providing advice on the handling of items?")),
        "qrels": (783, ("57264684708984140094c123", "Black_Death-0", 1),
                  ("57270ab9708984140094d8fb", "Victoria_and_Albert_Museum-58", 1)),
        "docs": (1048, ("Super_Bowl_50-0", "Super Bowl 50 was an American football game"),
                 ("Victoria_and_Albert_Museum-58", "Conservation is responsible for the long-term")),
    },
    "squad-v1.1/dev-articles-b": {
        "topics": (4874, ("57267b755951b619008f7433", "What company owns the American Broadcasting Company?"),
                   ("5737aafd1c456719005744ff", "What is the seldom used force unit equal to one thousand newtons?")),
        "qrels": (4874, ("57267b755951b619008f7433", "American_Broadcasting_Company-0", 1), ("5737aafd1c456719005744ff", "Force-43", 1)),
        "docs": (2067, ("Super_Bowl_50-0", "Super Bowl 50 was an American football game"),
                 ("Force-43", "The pound-force has a metric counterpart")),
    },
    "wikiqa/train": {"topics": (873, ("1", "how are glacier caves formed ?"), ("2116", "what is section eight housing")),
                     "run": (8672, ("1", "1-0", -1.0), ("2116", "2116-9", -10.0))},
    "wikiqa/dev": {"topics": (126, ("2", "how big is bmc software in houston , tx"), ("293", "what is the name of chris cornell 's band ?")),
                   "run": (1130, ("2", "2-0", -1.0), ("293", "293-6", -7.0))},
    "wikiqa/test": {"topics": (243, ("1", "how african americans were immigrated to the us"), ("629", "where is the brisket from")),
                    "qrels": (2351, ("1", "1-0", 0), ("629", "629-7", 0)),
                    "run": (2351, ("1", "1-0", -1.0), ("629", "629-7", -8.0))},
    "trecqa/train": {"topics": (93, ("1", "who is the author of the book , `` the iron lady : a biography of margaret thatcher '' ?"),
                                ("100", "what is considered the costliest disaster the insurance industry has ever faced ?")),
                     "run": (4718, ("1", "1-0", -1.0), ("100", "100-58", -59.0))},
    "trecqa/raw-dev": {"topics": (81, ("1.4", "what ethnic group / race are crip members ?"), ("31.5", "what did jean harlow die of ?")),
                       "run": (1148, ("1.4", "53418", -1.0), ("31.5", "54565", -1.0))},
    "trecqa/raw-test": {"topics": (95, ("32.1", "what do practitioners of wicca worship ?"),
                                   ("65.6", "how long did the challenger flight last before it exploded ?")),
                        "qrels": (1517, ("32.1", "54566", 1), ("65.6", "56082", 0)),
                        "run": (1517, ("32.1", "54566", -1.0), ("65.6", "56082", -12.0))},
    "trecqa/clean-dev": {"topics": (65, ("1.5", "what is crips ' gang color ?"), ("31.3", "when did jean harlow die ?")),
                         "run": (1117, ("1.5", "53426", -1.0), ("31.3", "54561", -5.0))},
    "trecqa/clean-test": {"topics": (68, ("32.1", "what do practitioners of wicca worship ?"),
                                     ("65.6", "how long did the challenger flight last before it exploded ?")),
                          "run": (1442, ("32.1", "54566", -1.0), ("65.6", "56082", -12.0))},
    "dl19-passage": {"topics": (43, ("264014", "how long is life cycle of flea"), ("1106007", "define visceral?")),
                     "qrels": (9260, ("19335", "1017759", 0), ("1133167", "977421", 0)),
                     "run": (43 * 100, ("264014", "5611210", 15.780599594116211), ("1106007", "6255354", 6.47769021987915))},
    "dl20-passage": {"topics": (54, ("23849", "are naturalization records public information"),
                                ("324585", "how much money do motivational speakers make")),
                     "qrels": (11386, ("23849", "1020327", 2), ("1136962", "999215", 0)),
                     "run": (54 * 100, ("23849", "4348282", 10.066300392150879), ("324585", "8381474", 10.380800247192383))},
    "msmarco-passage/dev-small": {"topics": (6980, ("1048585", "what is paula deen's brother"), ("1048565", "who plays sebastian michaelis")),
                                  "qrels": (7437, ("300674", "7067032", 1), ("195199", "8009377", 1))},
    "lcqmc/dev": {"pairs": (8802, LabelledPair("开初婚未育证明怎么弄？", "初婚未育情况证明怎么开？", 1), LabelledPair("不想学习，没有动力，怎么办", "不想学习怎么办啊，没动力", 1))},
    "lcqmc/test": {"pairs": (12500, LabelledPair("谁有狂三这张高清的", "这张高清图，谁有", 0), LabelledPair("天兵天将是什么生肖？", "天兵天将是指什么生肖", 1)),
                   "topics": (12088, ("q1", "谁有狂三这张高清的"), ("q12088", "天猫有假货吗"))},
    "bq/dev": {"pairs": (10000, LabelledPair("不要借了我是试试看能否操作的", "借款审核期间能否取消借款", 0), LabelledPair("不使用可以关闭吗？", "额度申请成功后会短信通知吗", 0))},
    "bq/test": {"pairs": (10000, LabelledPair("为什么我无法看到额度", "为什么开通了却没有额度", 0), LabelledPair("还款成功  额度没有恢复是怎么回事啊", "迟还款几天会影响信用", 0))},
    "thucnews/dev": {"records": (10000, {"id": "0", "text": "体验2D巅峰 倚天屠龙记十大创新概览", "domain": "game"},
                                 {"id": "9999", "text": "西甲-瓦伦西亚3比0胜皇马 巴萨次日如胜即可夺冠", "domain": "sports"})},
    "thucnews/test": {"records": (10000, {"id": "0", "text": "词汇阅读是关键 08年考研暑期英语复习全指南", "domain": "education"},
                                  {"id": "9999", "text": "沪指收市涨1.54% 受两大产业振兴规划提振", "domain": "stocks"})},
    "insuranceqa-zh/train": {"records": (12889, {"id": "0", "text": "法律要求残疾保险吗？", "domain": "disability-insurance",
                                                 "en": "Is Disability Insurance Required By Law?"},
                                         {"id": "12888", "text": "Geico有健康保险吗？", "domain": "health-insurance",
                                          "en": "Does Geico Have Health Insurance?"})},
    "insuranceqa-zh/valid": {"topics": (2000, ("0", "医疗保险拿起公司支付吗？"), ("1999", "家庭保险公司可否拒绝覆盖？"))},
    "insuranceqa-zh/test": {"topics": (2000, ("0", "定期人寿保险支付时会发生什么？"), ("1999", "如何获得暂停执照的汽车保险？"))},
    "lcqmc/questions": {"docs": (38643, ("q0", "开初婚未育证明怎么弄？"), ("q38642", "天兵天将是指什么生肖")),
                        "topics": (10649, ("dev-0", "开初婚未育证明怎么弄？"), ("test-12499", "天兵天将是什么生肖？")),
                        "qrels": (10649, ("dev-0", "q1", 1), ("test-12499", "q38642", 1))},
    "lcqmc/questions-test": {"docs": (38643, ("q0", "开初婚未育证明怎么弄？"), ("q38642", "天兵天将是指什么生肖")),
                             "topics": (6247, ("test-1", "英雄联盟什么英雄最好"), ("test-12499", "天兵天将是什么生肖？")),
                             "qrels": (6247, ("test-1", "q15920", 1), ("test-12499", "q38642", 1))},
    "lcqmc/questions-dev": {"docs": (15917, ("q0", "开初婚未育证明怎么弄？"), ("q15916", "不想学习，没有动力，怎么办")),
                            "topics": (4402, ("dev-0", "开初婚未育证明怎么弄？"), ("dev-8801", "不想学习，没有动力，怎么办")),
                            "qrels": (4402, ("dev-0", "q1", 1), ("dev-8801", "q9605", 1))},
    "bq/questions-dev": {"docs": (6922, ("q0", "不要借了我是试试看能否操作的"), ("q6921", "额度申请成功后会短信通知吗")),
                         "topics": (5000, ("dev-2", "你好，我还款银行怎么更换"), ("dev-9997", "昨天打的电话我没接到")),
                         "qrels": (5000, ("dev-2", "q5", 1), ("dev-9997", "q1117", 1))},
    "bq/questions-test": {"topics": (5000, ("test-2", "借了钱，但还没有通过，可以取消吗？"),
                                     ("test-9997", "我申请了一笔贷款，但是发送的短信验证码的那个手机号跟我现在用的手机号不一样，我要怎么把那个手机号改过来呀？")),
                          "qrels": (5000, ("test-2", "q6927", 1), ("test-9997", "q10887", 1))},
    "microblog/2011": {"topics": (49, ("1", "bbc world service staff cuts"), ("49", "carbon monoxide law")),
                       "run": (39780, ("1", "30198105513140224", 11.451906), ("49", "32418528409690112", 2.493336))},
    "microblog/2012": {"topics": (60, ("51", "british government cuts"), ("110", "economic trade sanctions")),
                       "run": (49879, ("51", "33277503099375616", 7.559645), ("110", "33148833537990656", 3.637929))},
    "microblog/2013": {"topics": (60, ("111", "water shortages"), ("170", "tony mendez")),
                       "run": (46192, ("111", "308328643183116288", 9.131583), ("170", "317473027019399169", 6.466243))},
    "microblog/2014": {"topics": (55, ("171", "ron weasley birthday"), ("225", "barbara walters chicken pox")),
                       "run": (41579, ("171", "307360182604820481", 12.084467), ("225", "305904259994628097", 4.859884))},
    "microblog/train-2013": {"topics": (141, ("1", "bbc world service staff cuts"), ("225", "barbara walters chicken pox")),
                             "run": (113243, ("1", "30198105513140224", 11.451906), ("225", "305904259994628097", 4.859884))},
    "microblog/dev-2013": {"topics": (23, ("7", "pakistan diplomat arrest murder"), ("224", "dark pool trading")),
                           "run": (17995, ("7", "30809856231342080", 12.532694), ("224", "318386554819211264", 3.949071))},
    "microblog/train-2014": {"topics": (145, ("1", "bbc world service staff cuts"), ("170", "tony mendez")),
                             "run": (117069, ("1", "30198105513140224", 11.451906), ("170", "317473027019399169", 6.466243))},
    "microblog/dev-2014": {"topics": (24, ("7", "pakistan diplomat arrest murder"), ("168", "us behind chaevez cancer")),
                           "run": (18782, ("7", "30809856231342080", 12.532694), ("168", "311577001611915264", 3.412235))},
    "bq/questions": {"docs": (13062, ("q0", "不要借了我是试试看能否操作的"), ("q13061", "我昨天办了邮政银行，接受你们微粒贷吗")),
                     "topics": (10000, ("dev-2", "你好，我还款银行怎么更换"),
                                ("test-9997", "我申请了一笔贷款，但是发送的短信验证码的那个手机号跟我现在用的手机号不一样，我要怎么把那个手机号改过来呀？")),
                     "qrels": (10000, ("dev-2", "q5", 1), ("test-9997", "q10887", 1))},
}


def _items(dataset, part: str) -> list:
    if part == "topics":
        return list(dataset.topics().items())
    if part == "qrels":
        return [(qid, docid, level) for qid, judged in dataset.qrels().items() for docid, level in judged.items()]
    if part == "docs":
        return [(doc["id"], doc["contents"]) for doc in dataset.docs()]
    if part == "run":
        return [(qid, docid, score) for qid, hits in dataset.run().ranking.items() for docid, score in hits]
    return list(getattr(dataset, part)())


def test_every_registered_dataset_is_tested():
    assert sorted(EXPECTED) == sorted(dataset_names())


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name.startswith("microblog/") else name
                                  for name in EXPECTED])  # microblog: a year's tweets read whole, seconds each
def test_dataset_on_mirror(mirror, name):
    dataset = get_dataset(name)
    for part, (count, first, last) in EXPECTED[name].items():
        items = _items(dataset, part)
        assert len(items) == count, part
        if part == "docs":  # contents checked by prefix
            assert items[0][0] == first[0] and items[0][1].startswith(first[1])
            assert items[-1][0] == last[0] and items[-1][1].startswith(last[1])
        else:
            assert (items[0], items[-1]) == (first, last), part


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow) if name.startswith("microblog/") else name
                                  for name in dataset_names()])
def test_recorded_counts_match(mirror, name):
    """The counts in datasets.json (shown by `irpipe datasets info`) are what the readers produce."""
    dataset = get_dataset(name)
    counts = {}
    for part in dataset.provides:
        if part == "run":
            run = dataset.run()
            counts.update(run=run.num_hits(), run_queries=len(run), texts=len(run.texts))
        elif part == "qrels":
            qrels = dataset.qrels()
            counts.update(qrels=sum(map(len, qrels.values())), qrels_queries=len(qrels))
        else:
            counts[part] = len(_items(dataset, part))
    assert counts == dataset.info()["counts"]


@pytest.mark.slow
def test_squad_article_split_partitions_the_questions(mirror):
    """The three article-split parts hold every dev question once, each with its relevant paragraph among the
    part's documents; the training part's documents are its own articles' paragraphs only."""
    parts = {name: get_dataset(f"squad-v1.1/dev-articles-{name}") for name in ("a-train", "a-dev", "b")}
    questions = {name: set(part.topics()) for name, part in parts.items()}
    assert sum(map(len, questions.values())) == len(set().union(*questions.values())) == 10570
    titles = {name: {doc["title"] for doc in part.docs()} for name, part in parts.items()}
    assert len(titles["a-train"]) == 20 and len(titles["a-dev"]) == 24 and len(titles["b"]) == 48
    for name, part in parts.items():
        docids = {doc["id"] for doc in part.docs()}
        assert all(set(judged) <= docids for judged in part.qrels().values()), name


def test_candidate_runs_carry_texts_and_shipped_order(mirror):
    run = get_dataset("dl19-passage").run()
    hits = run["264014"]
    assert [docid for docid, _ in hits[:3]] == ["5611210", "6641238", "4834547"]  # the shipped BM25 order
    assert all(a[1] >= b[1] for a, b in zip(hits, hits[1:]))
    assert run.texts["5611210"].startswith("5. Cancel. A flea can live up to a year")
    assert len(run.texts) == 4297  # 4,300 hits, 3 passages retrieved for two queries
    wikiqa = get_dataset("wikiqa/test").run()
    assert wikiqa.texts["1-0"].startswith("african immigration to the united states")


def test_relevance_levels_and_languages(mirror):
    assert [get_dataset(n).rel_level for n in ("dl19-passage", "dl20-passage", "cacm", "cranfield", "msmarco-passage/dev-small")] \
        == [2, 2, 1, 1, 1]
    assert get_dataset("lcqmc/dev").language == "zh" and get_dataset("vaswani").language == "en"
    grades = [level for judged in get_dataset("cranfield").qrels().values() for level in judged.values()]
    counts = {grade: grades.count(grade) for grade in set(grades)}
    assert counts == {4: 128, 3: 387, 2: 734, 1: 363, 0: 225}  # codes 1..4 and -1, per cranqrel.readme / SOURCE.txt


def test_cacm_prebuilt_index_is_extracted_into_the_cache(mirror):
    index = get_dataset("cacm").path("index")
    assert index == base.datasets_root() / "cacm/CACM/lucene9-index.cacm"
    assert any(p.name.startswith("segments_") for p in index.iterdir())


@pytest.mark.parametrize("name, part, words", [
    ("msmarco-passage/dev-small", "docs", "not available offline"),
    ("dl19-passage", "docs", "run() carries the texts"),
    ("lcqmc/dev", "docs", "provides: pairs, topics, qrels, run"),
    ("insuranceqa-zh/test", "qrels", "answer texts"),
    ("cacm", "pairs", "provides: topics, qrels, docs"),
])
def test_missing_parts_raise_clearly(mirror, name, part, words):
    with pytest.raises(DatasetLacksError, match=re.escape(words)):
        getattr(get_dataset(name), part)()


def test_run_is_none_without_candidates(mirror):
    assert get_dataset("cacm").run() is None


def test_unknown_name_suggests_close_matches():
    with pytest.raises(UnknownNameError, match="Did you mean: wikiqa/test"):
        get_dataset("wikiqa/tset")


# -- resolution: cache -> mirror -> download ---------------------------------------------------------------------

def _no_network(*args, **kwargs):
    raise AssertionError("the network was used")


def test_offline_without_cache_or_mirror_says_where_to_place_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("IRPIPE_MIRROR", raising=False)
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    with pytest.raises(MissingResourceError) as caught:
        get_dataset("vaswani").topics()
    message = str(caught.value)
    rel = "vaswani/tests/fixtures/vaswani_npl/query-text.trec"
    assert f"Place the file https://raw.githubusercontent.com/terrier-org/pyterrier/" in message
    assert str(tmp_path / "empty-cache" / "datasets" / rel) in message
    assert f"IRPIPE_MIRROR to a folder holding {rel}" in message and "IRPIPE_OFFLINE" in message


def _datafile(rel: str, data: bytes, members: tuple[str, ...] = ()) -> DataFile:
    return DataFile(rel, "owner/repo", "0" * 40, "up/" + rel, hashlib.sha256(data).hexdigest(), len(data), members)


def test_mirror_copy_is_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("IRPIPE_MIRROR", str(tmp_path / "mirror"))
    good = _datafile("set/file.txt", b"right contents\n")
    (tmp_path / "mirror/set").mkdir(parents=True)
    (tmp_path / "mirror/set/file.txt").write_bytes(b"right contents\n")
    assert resolve(good) == tmp_path / "mirror/set/file.txt"
    (tmp_path / "mirror/set/file.txt").write_bytes(b"wrong contents\n")  # same size, other bytes
    with pytest.raises(MissingResourceError, match="sha256"):
        resolve(good)
    (tmp_path / "mirror/set/file.txt").write_bytes(b"short\n")
    with pytest.raises(MissingResourceError, match="bytes, expected 15"):
        resolve(good)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def upstream(tmp_path, monkeypatch):
    """A local HTTP server standing in for raw.githubusercontent.com, serving tmp_path/upstream."""
    root = tmp_path / "upstream"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    monkeypatch.setattr(base, "RAW_URL", f"http://127.0.0.1:{server.server_port}/{{repo}}/{{commit}}/{{path}}")
    monkeypatch.setenv("IRPIPE_OFFLINE", "0")
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("IRPIPE_MIRROR", raising=False)
    yield root
    server.shutdown()
    server.server_close()


def _serve(root: Path, file: DataFile, data: bytes) -> None:
    target = root / file.repo / file.commit / file.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def test_download_is_verified_announced_and_cached(upstream, tmp_path, caplog):
    data = b"downloaded\n" * 1000
    file = _datafile("set/data.txt", data)
    _serve(upstream, file, data)
    path = resolve(file)
    assert path == tmp_path / "cache/datasets/set/data.txt" and path.read_bytes() == data
    assert any("downloading http://127.0.0.1" in record.getMessage() for record in caplog.records)
    assert sorted(p.name for p in path.parent.iterdir()) == ["data.txt"]  # no .tmp left
    (upstream / file.repo).rename(upstream / "gone")  # now served from the cache only
    assert resolve(file) == path


def test_download_with_wrong_checksum_leaves_nothing(upstream, tmp_path):
    file = _datafile("set/data.txt", b"expected\n")
    _serve(upstream, file, b"tampered\n")
    with pytest.raises(MissingResourceError, match="sha256"):
        resolve(file)
    assert list((tmp_path / "cache/datasets/set").iterdir()) == []


def test_download_failure_says_where_to_place_the_file(upstream, tmp_path):
    file = _datafile("set/absent.txt", b"never served\n")
    with pytest.raises(MissingResourceError) as caught:
        resolve(file)
    assert "download failed" in str(caught.value) and "404" in str(caught.value)
    assert str(tmp_path / "cache/datasets/set/absent.txt") in str(caught.value)


def test_unreachable_host_fails_fast(tmp_path, monkeypatch):
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(base, "RAW_URL", f"http://127.0.0.1:{port}/{{repo}}/{{commit}}/{{path}}")
    monkeypatch.setenv("IRPIPE_OFFLINE", "0")
    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(MissingResourceError, match="download failed"):
        resolve(_datafile("set/x.txt", b"x"))


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("rel, pack, member, inner", [
    ("set/index.tar.gz", _tar_gz, "index", "index/segments_1"),
    ("set/dev.json.zip", _zip, "dev.json", "dev.json"),
])
def test_archives_are_verified_then_extracted_into_the_cache(upstream, tmp_path, rel, pack, member, inner):
    data = pack({inner: b"payload"})
    file = _datafile(rel, data, (member,))
    _serve(upstream, file, data)
    path = resolve(file, member)
    assert path == tmp_path / "cache/datasets/set" / member
    assert (tmp_path / "cache/datasets/set" / inner).read_bytes() == b"payload"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    bad = _datafile("other/bad.zip", b"not the archive", ("dev.json",))
    _serve(upstream, bad, b"other bytes here")
    with pytest.raises(MissingResourceError):
        resolve(bad, "dev.json")


# -- ir_datasets pass-through (a locally registered dataset: no download) ----------------------------------------

def test_irds_wraps_ir_datasets(tmp_path, monkeypatch):
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds-home"))
    import ir_datasets
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    (tmp_path / "docs.tsv").write_text("d1\tfirst doc\nd2\tsecond doc\n")
    (tmp_path / "queries.tsv").write_text("q1\thello\n")
    (tmp_path / "qrels").write_text("q1 0 d2 1\n")
    irds_id = f"irpipe-test/{tmp_path.name}"
    ir_datasets.registry.register(irds_id, ir_datasets.Dataset(
        TsvDocs(LocalDownload(tmp_path / "docs.tsv")), TsvQueries(LocalDownload(tmp_path / "queries.tsv")),
        TrecQrels(LocalDownload(tmp_path / "qrels"), {})))
    dataset = get_dataset(f"irds:{irds_id}")
    assert dataset.provides == ("topics", "qrels", "docs")
    assert dataset.topics().queries == {"q1": "hello"}
    assert dataset.qrels() == {"q1": {"d2": 1}}
    assert list(dataset.docs()) == [{"id": "d1", "contents": "first doc", "text": "first doc"},
                                    {"id": "d2", "contents": "second doc", "text": "second doc"}]
    assert dataset.run() is None
    with pytest.raises(UnknownNameError, match="ir_datasets dataset"):
        get_dataset("irds:no-such-dataset/at-all").topics()


# -- CLI -----------------------------------------------------------------------------------------------------

def test_cli_list_info_fetch(mirror, capsys):
    assert cli.main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in dataset_names()) and "topics,qrels,run" in out
    assert cli.main(["datasets", "info", "dl20-passage"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["rel_level"] == 2 and info["counts"]["topics"] == 54
    assert info["upstream"] == ["github.com/castorini/anserini-tools@5b819c1a45c8a0a3ec9426f476694f44a29dfaf3",
                                "github.com/castorini/rank_llm_data@3506f981b25db886390e23025be96052cc0fae57"]
    assert info["files"]["qrels"]["local"] == str(mirror / "msmarco-passage-dl19-dl20-bm25top100/qrels/qrels.dl20-passage.txt")
    assert cli.main(["--offline", "datasets", "fetch", "squad-v1.1/dev"]) == 0
    assert capsys.readouterr().out.strip().endswith("datasets/squad-v1.1-dev/dev-v1.1.json")
    assert cli.main(["datasets", "fetch", "squad", "cacm"]) == 2
    assert "unknown dataset 'squad'" in capsys.readouterr().err


def test_registry_file_is_consistent():
    """Every dataset names files that datasets.json describes, with a known family; every file is used."""
    data = json.loads(registry.REGISTRY_FILE.read_text(encoding="utf-8"))
    used = set()
    for name, spec in data["datasets"].items():
        assert spec["family"] in registry.FAMILIES, name
        for ref in spec["files"].values():
            rel = ref if isinstance(ref, str) else ref[0]
            assert rel in data["files"], (name, rel)
            used.add(rel)
    assert used == set(data["files"])
    assert all(len(entry["sha256"]) == 64 and entry["size"] > 0 for entry in data["files"].values())
