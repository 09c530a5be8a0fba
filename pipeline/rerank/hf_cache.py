"""Hugging Face names as model folders of the local Hugging Face cache, offline: `monobert(ckpt=hf:ORG/NAME)`,
`irpipe rerank --model hf:ORG/NAME`, `hf:ORG/NAME@REVISION` (a branch or tag the cache has a ref for, or a commit).

The cache is huggingface_hub's: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub. A model ORG/NAME
lies in models--ORG--NAME/: refs/main (refs/REVISION) holds a commit hash, snapshots/<commit>/ the model's files
(links into blobs/, as huggingface_hub writes them). That snapshot folder is the checkpoint: a transformers or
sentence-transformers folder, or an irpipe checkpoint (pipeline/rerank/checkpoint.py reads any of them). Nothing
is downloaded: a model not in the cache is a MissingResourceError naming the folder looked in and what to place
there.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from pipeline.errors import MissingResourceError

PREFIX = "hf:"
_COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*")


def is_hf_name(name) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def hub_cache() -> tuple[Path, str]:
    """(the Hugging Face cache folder, where that comes from), read from the environment now."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser(), "$HF_HUB_CACHE"
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub", "$HF_HOME/hub"
    return Path("~/.cache/huggingface/hub").expanduser(), "the default, neither $HF_HUB_CACHE nor $HF_HOME being set"


def resolve_hf_name(name: str) -> Path:
    """The snapshot folder of `hf:ORG/NAME[@REVISION]` in the local cache (see the module docstring)."""
    repo, _, revision = name[len(PREFIX):].partition("@")
    revision = revision or "main"
    if not _REPO.fullmatch(repo) or "--" in repo or ".." in repo:
        raise MissingResourceError(f"{name}: not a Hugging Face model name; expected hf:ORG/NAME or "
                                   "hf:ORG/NAME@REVISION (hf:cross-encoder/ms-marco-MiniLM-L-6-v2)")
    cache, why = hub_cache()
    folder = cache / f"models--{repo.replace('/', '--')}"
    download = (f"on a machine with network access, `hf download {repo}"
                f"{'' if revision == 'main' else f' --revision {revision}'}` writes it into its cache: copy that "
                f"models--{repo.replace('/', '--')} folder into {cache}, or set HF_HUB_CACHE to a cache that holds "
                "it; or give the model's folder itself (ckpt=DIR, --model DIR)")
    if _COMMIT.fullmatch(revision):
        commit = revision
    else:
        ref = folder / "refs" / revision
        if not ref.is_file():
            raise MissingResourceError(
                f"{name}: not in the local Hugging Face cache ({cache}, {why}): no {ref} (a file holding the commit "
                f"of {revision}) and, with it, no snapshots/<commit>/ folder of the model's files there; {download}")
        commit = ref.read_text(encoding="utf-8").strip()
        if not _COMMIT.fullmatch(commit):
            raise MissingResourceError(f"{name}: {ref} holds {commit[:60]!r}, not a commit hash (40 hex digits, as "
                                       f"huggingface_hub writes it); {download}")
    snapshot = folder / "snapshots" / commit
    if not snapshot.is_dir():
        raise MissingResourceError(f"{name}: not in the local Hugging Face cache ({cache}, {why}): no folder "
                                   f"{snapshot} (the model's files at commit {commit}); {download}")
    return snapshot


def model_folder(name: str | Path) -> Path:
    """A checkpoint argument as a folder: `hf:...` resolved in the cache, anything else the path it names."""
    return resolve_hf_name(name) if is_hf_name(name) else Path(name)
