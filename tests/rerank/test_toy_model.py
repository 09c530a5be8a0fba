"""Adding a reranker is writing one file: a model file put beside the others (here in a folder added to the model
package's path, so the repository is left as it is) is a spec stage, a training target and a checkpoint kind,
with nothing else edited."""
from __future__ import annotations

import textwrap

import pytest

from support import write_collection

TOY = textwrap.dedent('''
    """toyrank: a learned weighting of two features, the query words found in the document and its length."""
    from dataclasses import dataclass

    import torch

    from pipeline.rerank.losses import pairwise_hinge
    from pipeline.rerank.model import Batch, Loss, RerankModel


    @dataclass
    class ToyConfig:
        margin: float = 1.0


    class ToyRank(RerankModel):
        name = "toyrank"
        config_class = ToyConfig
        pretrained = True          # usable untrained: it starts as plain word overlap
        sampling = "pairs"

        def __init__(self, config):
            super().__init__(config)
            self.weights = torch.nn.Parameter(torch.tensor([1.0, 0.0]))

        def prepare(self, pairs):
            features = [[len(set(p.query.split()) & set(p.text.split())), len(p.text.split()) / 100] for p in pairs]
            return Batch({"features": torch.tensor(features)}, 0, pairs)

        def forward(self, features):
            return features @ self.weights                                   # (B, 2) @ (2,) = (B,)

        def score(self, output):
            return output

        def loss(self, output, batch):
            hinge = pairwise_hinge(output, batch.labels, batch.groups, self.config.margin)
            return Loss(hinge, {"hinge": hinge})
''')


@pytest.fixture
def toy_model(tmp_path, monkeypatch):
    from pipeline.rerank import models

    folder = tmp_path / "more-models"
    folder.mkdir()
    (folder / "toyrank.py").write_text(TOY)
    monkeypatch.setattr(models, "__path__", [*models.__path__, str(folder)])
    yield folder
    models._MODELS.pop("toyrank", None)


def test_one_new_file_makes_a_reranker(toy_model, tmp_path, monkeypatch):
    from pipeline.cli import main
    from pipeline.data.runs import read_run
    from pipeline.stages import stage_names

    monkeypatch.setenv("IRPIPE_CACHE", str(tmp_path / "cache"))
    collection = write_collection(tmp_path / "tiny")
    assert "toyrank" in stage_names()
    assert main(["-q", "run", "bm25() % 4 >> toyrank()", "--dataset", str(collection), "--output",
                 str(tmp_path / "zero-shot.trec"), "--results-dir", str(tmp_path / "results")]) == 0
    assert read_run(tmp_path / "zero-shot.trec").num_hits() > 0
    assert main(["-q", "train", "toyrank", "--train", str(collection), "--negatives", "bm25", "--output",
                 str(tmp_path / "toy"), "--epochs", "2", "--option", "warmup=0"]) == 0
    assert main(["-q", "run", f"bm25() % 4 >> toyrank(ckpt={tmp_path / 'toy'})", "--dataset", str(collection),
                 "--output", str(tmp_path / "trained.trec"), "--results-dir", str(tmp_path / "results")]) == 0
    assert read_run(tmp_path / "trained.trec").ranking.keys() == read_run(tmp_path / "zero-shot.trec").ranking.keys()
    assert sorted(p.name for p in toy_model.iterdir() if p.suffix == ".py") == ["toyrank.py"]
