"""The environment a result was measured in, recorded in every eval/results file (`environment`), and how two
environments differ in the ways that can move a number.

    {"git": {"commit": "42cd203", "dirty": true}, "python": "3.11.7", "platform": "Linux-6.1 x86_64",
     "libraries": {"torch": "2.13.0+cpu", "transformers": ..., "pyserini": ..., "ir_measures": ...},
     "cpu": {"model": "Intel(R) Xeon(R) Processor @ 2.50GHz", "cores": 2, "flags": ["avx", "avx2", "avx512f", ...]},
     "torch": {"threads": 1, "kernels": "AVX512", "device": "cpu"},
     "settings": {"ONEDNN_MAX_CPU_ISA": "AVX2"}}

`cpu.flags` keeps the vector-instruction flags only (the ones a numeric kernel is chosen by; /proc/cpuinfo's full
list is ~100 words of which the rest change nothing here). `torch` is recorded only when the run imported it (a
BM25 run does not: its numbers cannot depend on torch's kernels, and importing torch to say so costs a second);
`torch.kernels` is ATen's choice (`torch.backends.cpu.get_cpu_capability()`), which `ATEN_CPU_CAPABILITY` lowers.
`settings` are the environment variables that choose kernels or threads, where set: oneDNN's
`ONEDNN_MAX_CPU_ISA`, MKL's `MKL_ENABLE_INSTRUCTIONS`, ATen's, and the thread counts.
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

LIBRARIES = ("torch", "transformers", "pyserini", "ir_measures", "numpy")
SETTINGS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY",
            "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG")
_VECTOR_FLAG = re.compile(r"(avx|amx|fma|f16c|sse4|vnni|bf16)", re.IGNORECASE)
REPO = Path(__file__).resolve().parent.parent
# the parts whose difference can move a trained model's numbers, and how each is shown in a note
COMPARED = (("libraries", "library versions"), ("cpu.flags", "CPU vector instructions"),
            ("torch.kernels", "torch kernels"), ("torch.threads", "torch threads"), ("torch.device", "device"),
            ("settings", "kernel / thread settings"))


def capture() -> dict:
    """This process's environment (cheap: torch is read only where already imported, git by one subprocess)."""
    environment = {"git": _git(), "python": platform.python_version(),
                   "platform": f"{platform.system()}-{platform.release()} {platform.machine()}",
                   "libraries": {name: _version(name) for name in LIBRARIES}, "cpu": _cpu()}
    torch = sys.modules.get("torch")
    if torch is not None:
        device = "cuda: " + torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        environment["torch"] = {"threads": torch.get_num_threads(),
                                "kernels": torch.backends.cpu.get_cpu_capability(), "device": device}
    environment["settings"] = {name: os.environ[name] for name in SETTINGS if name in os.environ}
    return environment


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git() -> dict:
    """The commit of the checkout irpipe runs from, and whether its tracked files have changes (None: not a
    checkout whose top is the package's parent, e.g. an installed package, even inside another project's git tree,
    or no git)."""
    try:
        top = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                             timeout=10)
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != REPO:  # a venv inside another git tree:
            return {"commit": None, "dirty": None}                            # its commit is not irpipe's
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, timeout=10)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None}
        changed = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10)
        return {"commit": commit.stdout.strip(), "dirty": bool(changed.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def _cpu() -> dict:
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = sorted(f for f in value.split() if _VECTOR_FLAG.search(f))
                    break
    except OSError:  # not Linux: the model only
        pass
    return {"model": model, "cores": os.cpu_count(), "flags": flags}


def _get(environment: dict, dotted: str):
    value = environment
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def differences(pinned: dict | None, current: dict) -> list[str]:
    """What differs between the environment a pin was measured in and this one, in the parts that can move a
    number (COMPARED), one phrase each; [] when they agree. A part missing from either side is not compared (a
    BM25 run records no torch)."""
    if not pinned:
        return []
    found = []
    for dotted, label in COMPARED:
        old, new = _get(pinned, dotted), _get(current, dotted)
        if old is None or new is None or old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            changed = [f"{k} {old.get(k)} -> {new.get(k)}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
            found.append(f"{label}: " + ", ".join(changed))
        elif isinstance(old, list) and isinstance(new, list):
            gone, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
            found.append(f"{label}: " + "; ".join(part for part in (
                "without " + " ".join(gone) if gone else "", "with " + " ".join(added) if added else "") if part))
        else:
            found.append(f"{label}: {old} -> {new}")
    return found


def summary(environment: dict | None) -> str:
    """One line for a page or a table: commit, CPU, kernels, threads, device, torch version."""
    if not environment:
        return "not recorded"
    git = environment.get("git") or {}
    torch = environment.get("torch") or {}
    parts = [f"commit {git.get('commit') or '?'}{'+changes' if git.get('dirty') else ''}",
             f"{(environment.get('cpu') or {}).get('model', '?')} ({(environment.get('cpu') or {}).get('cores')} cores)"]
    if torch:
        parts.append(f"torch {environment['libraries'].get('torch')} {torch.get('kernels')} kernels, "
                     f"{torch.get('threads')} thread(s), {torch.get('device')}")
    parts += [f"{k}={v}" for k, v in (environment.get("settings") or {}).items()]
    return "; ".join(parts)


def offline() -> bool:
    """Whether downloads are off: IRPIPE_OFFLINE=1 (`irpipe --offline`), read by every layer that could fetch."""
    return os.environ.get("IRPIPE_OFFLINE", "").strip().lower() not in ("", "0", "false", "no")
