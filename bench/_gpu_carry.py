"""all-MiniLM-L6-v2 for a GPU machine without its package (eval/gpu/run.sh --prepare): the package's model folder with
its tensors stored in fp16 (45 MB, under the 64 MiB a device call carries; 87 MB in fp32) and `dtype: float32` in its
config, so that transformers loads it in fp32: irpipe and sentence-transformers' CrossEncoder then hold the same,
fp16-rounded, weights. The folder goes where bert.py looks without the package: `$IRPIPE_MIRROR/models/<name>`.

    python -m bench._gpu_carry gpu-carry/data/models/all-MiniLM-L6-v2
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def fp16_copy(source: Path, target: Path) -> None:
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors", "onnx", "openvino", "*.bin"))
    tensors = load_file(str(source / "model.safetensors"))
    save_file({k: v.half().contiguous() for k, v in tensors.items()}, str(target / "model.safetensors"),
              metadata={"format": "pt"})
    config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    (target / "config.json").write_text(json.dumps(config | {"dtype": "float32"}, indent=2), encoding="utf-8")


def main(argv: list[str]) -> int:
    from pipeline.rerank.bert import DEFAULT_BERT, bert_folder

    fp16_copy(bert_folder(DEFAULT_BERT), Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
