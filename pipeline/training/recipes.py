"""Training recipes: a model trained once from a stage's `train=DATASET` options, then loaded from the cache.

    monobert(train=wikiqa/train, dev=wikiqa/dev, epochs=2)   ->   <irpipe cache>/models/monobert-<key>

The key is the recipe's identity (pipeline/training/identity.py `RecipeIdentity`, from which the training loop also
takes the recipe it records in the checkpoint and checks on --resume): the sha1 of the model name, the resolved
training options (less how it runs), the resolved model config, the data's checksums and the irpipe version.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.data import reuse
from pipeline.data.locks import file_lock
from pipeline.log import logger
from pipeline.rerank.checkpoint import CONFIG_FILE, read_checkpoint_config
from pipeline.training.identity import RecipeIdentity
from pipeline.training.loop import train


class Recipe:
    """A training recipe of the reranker stage (`monobert(train=wikiqa/train, dev=wikiqa/dev, epochs=2)`)."""

    def __init__(self, model: str, train: str, dev: str | None, options: dict, overrides: dict,
                 device: str = "auto", amp: str | None = None, threads: int | None = None):
        self.model, self.train, self.dev = model, train, dev
        self.options = dict(options) | {"device": device, "amp": amp, "threads": threads}
        self.overrides = dict(overrides)

    def identity(self) -> RecipeIdentity:
        return RecipeIdentity.resolve(self.model, self.train, self.dev, self.options, self.overrides)

    def key(self) -> str:
        return self.identity().key()

    def directory(self) -> Path:
        from pipeline.data.files import cache_root

        return cache_root() / "models" / f"{self.model}-{self.key()[:20]}"

    def ensure_trained(self) -> Path:
        """The recipe's trained model folder, trained now if the cache lacks it: by one process at a time (the
        folder's lock, pipeline/data/locks.py); another process that needs it meanwhile waits, then loads it."""
        directory = self.directory()
        if not _finished(directory):
            with file_lock(directory, f"{self.model}: training recipe {directory.name}"):
                if not _finished(directory):  # (another process may have trained it while this one waited)
                    logger.info("%s: training on %s (recipe not in the cache yet) into %s", self.model, self.train,
                                directory)
                    train(self.model, self.train, directory, dev=self.dev, options=self.options,
                          overrides=self.overrides, resume=True)
                    reuse.made(directory)
                    return directory
        logger.info("%s: trained model from the cache, %s", self.model, directory)
        reuse.note("trained models", directory)
        return directory


def _finished(directory: Path) -> bool:
    """Whether the folder holds a finished training (what `train` marks last, in config.json)."""
    if not (directory / CONFIG_FILE).is_file():
        return False
    training = read_checkpoint_config(directory).get("training")  # a damaged one: a CheckpointError saying what to do
    return isinstance(training, dict) and bool(training.get("finished"))
