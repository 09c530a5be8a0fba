"""Untrained level-0 relevance-matching signal of HCAN as a ranking score on a TREC Microblog year.

    PYTHONPATH=. IRPIPE_MIRROR=../shared/data python bench/microblog/rm_ceiling.py 2013 [ours|whitespace|drop]

score(q, d) = sum_i idf_i * max_j f(S)_ij with S = U_q U_d^T on GloVe 6B-50d: f = softmax over the query axis,
masked (docs/models.md §1), or padded with zero logits to 10 / 100 rows (the authors' unmasked code), or over the tweet
axis; or cosine with no softmax; plus exact-match IDF overlap. IDF from the year's own tweets. Prints AP, P@30.
Tweet tokenisation (the data's b.toks writes URLs as "@url", mentions as "@names", hashtags as "## tag"): `ours`
(pipeline.rerank.text.tokenize, what HCAN trains on: "@url" -> "@", "url"), `whitespace` (the authors' code:
split on spaces, "@url" one unknown word) or `drop` (ours without the three markers).
"""
import sys, torch, numpy as np
from pipeline.data.registry import get_dataset
from pipeline.evaluation import evaluate
from pipeline.data.runs import Run
from pipeline.rerank.text import tokenize, Vocabulary, glove_table, embedding_matrix, IdfTable
year, tweet_tokens = sys.argv[1], (sys.argv[2:] or ["ours"])[0]
MARKERS = {"@url", "@names", "##"}
def tokens(text):
    if tweet_tokens == "whitespace": return text.lower().split()
    if tweet_tokens == "drop": text = " ".join(w for w in text.split() if w not in MARKERS)
    return tokenize(text)
d = get_dataset(f"microblog/{year}"); t = d.topics(); q = d.qrels(); r = d.run()
toks = {k: tokens(v) for k, v in r.texts.items()}
qt = {k: tokens(v) for k, v in t.items()}
idf = IdfTable.build(list(toks.values()), 1)
vocab = Vocabulary.build(list(toks.values()) + list(qt.values()))
E, found = embedding_matrix(vocab, glove_table())
E = torch.tensor(E)
def emb(ws): return E[torch.tensor(vocab.encode(ws))]
variants = {}
for name in ["masked", "pad10", "pad100", "context", "cosine-max", "exact-idf"]:
    scores = {}
    for qid, hits in r.ranking.items():
        uq = emb(qt[qid]); w = torch.tensor(idf.positions(qt[qid], 0))
        scores[qid] = {}
        for docid, _ in hits:
            uc = emb(toks[docid] or ["<unk>"]); s = uq @ uc.T  # (n, m)
            if name == "masked": f = torch.softmax(s, 0).amax(1)
            elif name.startswith("pad"):
                L = int(name[3:]); z = torch.zeros(max(L - s.size(0), 0), s.size(1))
                f = torch.softmax(torch.cat([s, z]), 0)[: s.size(0)].amax(1)
            elif name == "context": f = torch.softmax(s, 1).amax(1)
            elif name == "cosine-max":
                f = (torch.nn.functional.normalize(uq, dim=1) @ torch.nn.functional.normalize(uc, dim=1).T).amax(1)
            else:
                f = torch.tensor([float(x in set(toks[docid])) for x in qt[qid]])
            scores[qid][docid] = float((f * w).sum())
    res = evaluate(Run.from_scores(scores), q, ["AP", "P@30"])
    print(year, tweet_tokens, name, {k: round(v, 4) for k, v in res.items()}, flush=True)
