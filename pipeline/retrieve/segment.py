"""Chinese word segmentation with jieba: one normalisation, one token filter, a cache folder of our own.

Text is NFKC-normalised and lower-cased (full-width `ｉＰｈｏｎｅ６` becomes `iphone6`, as Lucene's CJKWidthFilter and
LowerCaseFilter do for the CJK bigram index), then cut by jieba in precise mode with its HMM for unknown words.
Tokens made only of whitespace, punctuation or symbols are dropped. jieba's prefix-dictionary cache goes to
`<irpipe cache>/jieba/` (not the system temp folder), and its dictionary ships with the package, so nothing is
downloaded. `Segmenter(user_words)` adds words to jieba's user dictionary so that they are cut as one token
(how keyword dictionaries make their words segment as units); each segmenter is its own `jieba.Tokenizer`, so
the default segmentation (the one jieba-segmented indexes use) is never changed by a dictionary.
"""
from __future__ import annotations

import functools
import logging
import re
import threading
import unicodedata
from typing import Iterable

from pipeline.data.files import cache_root

# Function words, pronouns, question and degree words, particles and measure-like words that carry no topic.
CHINESE_STOP_WORDS = frozenset("""
的 了 是 在 和 与 及 或 也 就 都 而 且 又 还 很 更 最 太 把 被 让 给 对 向 从 自 到 于 以 为 为了 因为 所以 如果 但是 但
可是 然而 而且 并且 或者 还是 虽然 即使 只要 只有 除了 关于 对于 根据 按照 通过 之 其 此 这 那 这个 那个 这些 那些 这样 那样
这么 那么 这里 那里 这儿 那儿 哪 哪个 哪些 哪里 哪儿 谁 什么 怎么 怎样 怎么样 如何 为什么 为何 多少 几 几个 吗 呢 吧 啊 呀 哦
嘛 啦 哈 嗯 哎 唉 么 着 过 地 得 个 些 点 一点 一下 一些 一个 一种 一样 我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己
大家 别人 人家 有 没 没有 不 不是 不会 不能 不要 别 会 能 能够 可以 可能 要 想 应该 需要 必须 得到 是否 是不是 有没有 能不能
会不会 可不可以 要不要 就是 都是 还有 以及 等 等等 之类 之后 以后 之前 以前 时候 的话 的时候 现在 已经 正在 曾经 刚 刚刚
马上 然后 接着 于是 其实 确实 真的 非常 特别 比较 十分 有点 有些 一直 一定 总是 经常 常常 只是 只 仅 才 再 又是 却 并 即
便 则 然 如 若 像 似的 一样 一般 所有 每 每个 各 各种 其他 其它 另外 别的 任何 什么样 啥 咋 咋样 啥子 嘛呢 么么 上 下 里
中 内 外 前 后 左 右 来 去 做 用 说 看 知道 觉得 认为 请问 请 问 问题 谢谢 好 好的 吗呢 呢吗 啊啊 呵呵 哈哈
""".split())

# Lucene's English stop set plus the common function words of the standard (Snowball/SMART-style) lists.
ENGLISH_STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves also many much may might must one ones
shall upon whose yet
""".split())

_CHINESE_NUMERAL = re.compile(r"[零〇一二三四五六七八九十百千万亿两几第]+")
_jieba_lock = threading.Lock()


def fold_width_and_case(text: str) -> str:
    """NFKC (full-width to half-width) and lower case: the form every segmenter input is cut in."""
    return unicodedata.normalize("NFKC", text).lower()


def is_word(token: str) -> bool:
    """False for tokens made only of whitespace, punctuation or symbols."""
    return any(unicodedata.category(char)[0] not in "PSZC" for char in token)


def is_number(token: str) -> bool:
    """Pure numbers: digits with separators (`2008`, `1.54%`), or Chinese numerals (`三`, `十一`)."""
    if all(unicodedata.category(c)[0] == "N" or c in ".,%+-" for c in token) and any(c.isdigit() for c in token):
        return True
    return bool(_CHINESE_NUMERAL.fullmatch(token))


def jieba_cache_dir():
    path = cache_root() / "jieba"
    path.mkdir(parents=True, exist_ok=True)
    return path


class Segmenter:
    """jieba's precise mode (with HMM) over normalised text; `user_words` are cut as single tokens."""

    def __init__(self, user_words: Iterable[str] = ()):
        import jieba

        jieba.setLogLevel(logging.WARNING)  # no "Building prefix dict..." chatter on stderr
        self._tokenizer = jieba.Tokenizer()
        self._tokenizer.tmp_dir = str(jieba_cache_dir())
        with _jieba_lock:  # jieba's cache file is written once; concurrent first loads would race on it
            self._tokenizer.initialize()
        self.user_words = tuple(sorted({fold_width_and_case(w) for w in user_words if w}))
        for word in self.user_words:
            self._tokenizer.add_word(word)

    def cut(self, text: str) -> list[str]:
        """Every jieba token of the normalised text, whitespace and punctuation included."""
        return self._tokenizer.lcut(fold_width_and_case(text), HMM=True)

    def words(self, text: str) -> list[str]:
        """The tokens that are words (no whitespace, punctuation or symbols), in text order."""
        return [token for token in self.cut(text) if is_word(token)]


@functools.lru_cache(maxsize=1)
def default_segmenter() -> Segmenter:
    """jieba with its own dictionary only: what jieba-segmented indexes and their queries are cut with."""
    return Segmenter()


def segment(text: str) -> str:
    """Text as space-separated default-jieba words (the pre-tokenized form a jieba index stores)."""
    return " ".join(default_segmenter().words(text))
