#!/usr/bin/env bash
# The GPU measurements (bench/_inference_gpu.py) on a lent GPU machine: one call, the steps in priority
# order, each under its own time cap, each step's JSON copied into $OUT as soon as the step ends, so that a run cut
# off by the machine's limits still returns what it finished.
#
# 1. Here, with the full install and the mirror ($IRPIPE_MIRROR), make what travels (git-ignored, ~52 MB):
#      bash eval/gpu/run.sh --prepare
#    gpu-carry/wheels/  ir-measures and pytrec-eval-terrier (the device has torch, transformers, sentence-transformers);
#                       wheels-datasets/: datasets, dill, multiprocess, for sentence-transformers if it needs them
#    gpu-carry/data/    the mirror's DL19/DL20 top-100, MS MARCO topics and WikiQA (9 MB), and models/all-MiniLM-L6-v2:
#                       its tensors stored in fp16 (45 MB; 87 MB in fp32 is over the 64 MiB a call carries), loaded
#                       as fp32 (config dtype): irpipe and CrossEncoder get the same, fp16-rounded, weights
# 2. The device tool, from the repository root:   command: bash eval/gpu/run.sh   carry: ["gpu-carry"]   timeout_s: 590
#    Results: $OUT/gpu-inference.json (side by side with CrossEncoder in bf16 and MFU, the token-budget sweep, dev-small
#    size end to end, DL19/DL20 nDCG@10 GPU vs CPU, training pairs/s), $OUT/gpu-wikiqa-monobert.json (one WikiQA recipe
#    trained on the GPU against its CPU pin), $OUT/steps.jsonl (each step's exit status and seconds), logs.
#    Not here: Ray past two cores (the ray wheel alone is over 64 MiB): a later call that carries it.
# CI runs the smoke form on the CPU (tests/test_gpu_smoke.py):  OUT=DIR bash eval/gpu/run.sh --smoke
set -uo pipefail
cd "$(dirname "$0")/../.."
MODE="${1:-gpu}"   # --prepare, --smoke, gpu (all of it) or --sections NAME...: step 1's named sections alone
                   # (then TRAIN_STEPS, default 20, and SECTIONS_CAP, default 200 s)
CARRY=gpu-carry

if [ "$MODE" = "--prepare" ]; then
    set -e
    : "${IRPIPE_MIRROR:?set IRPIPE_MIRROR to the dataset mirror}"
    [ -d "$CARRY" ] && chmod -R u+w "$CARRY" && rm -rf "$CARRY"
    mkdir -p "$CARRY/wheels" "$CARRY/data/models"
    # the device's python3 is 3.12 (/work/.library/device/KINDS.md): pytrec-eval-terrier is a cp312 build
    FOR_DEVICE=(--no-deps --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
                --only-binary=:all:)
    python3 -m pip download "${FOR_DEVICE[@]}" -d "$CARRY/wheels" ir-measures==0.4.3 pytrec-eval-terrier==0.5.11
    # sentence-transformers imports `datasets` at its top, which the image's package list does not name: installed
    # there only if sentence_transformers fails to import (1 MB)
    python3 -m pip download "${FOR_DEVICE[@]}" -d "$CARRY/wheels-datasets" datasets==5.2.0 dill==0.4.1 \
        multiprocess==0.70.19
    for d in msmarco-passage-dl19-dl20-bm25top100 msmarco-passage-topics-qrels wikiqa; do
        cp -r "$IRPIPE_MIRROR/$d" "$CARRY/data/"
    done
    chmod -R u+w "$CARRY/data"   # the mirror is read-only
    python3 -m bench._gpu_carry "$CARRY/data/models/all-MiniLM-L6-v2"
    du -sh "$CARRY"
    exit 0
fi

OUT="${OUT:?OUT: the folder whose files come back}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" IRPIPE_OFFLINE=1
if [ "$MODE" = "--smoke" ]; then       # the code path on the CPU, small; the mirror and installed packages as they are
    DEVICE=(--gpu-device cpu --dev-queries 2 --dev-candidates 20 --gpu-rounds 1 --train-steps 1 --gpu-budgets 4096
            --gpu-batch-size 16 --threads 1)
    CAPS=(600 0)   # a CPU without native bf16 emulates the bf16 sections (tests/test_gpu_smoke.py allows 900 s)
    NAME=gpu-inference-smoke   # recorded, copied into $OUT, then removed from eval/benchmarks
else
    beside() {  # beside FOLDER: install $CARRY/FOLDER's wheels beside the image's own packages, not into them
        python3 -m pip install -q --no-index --no-deps --no-compile --target "/tmp/irpipe-$1" "$CARRY/$1"/*.whl \
            && export PYTHONPATH="$PYTHONPATH:/tmp/irpipe-$1"
    }
    beside wheels
    python3 -c "import sentence_transformers" 2>/dev/null || beside wheels-datasets
    export IRPIPE_MIRROR="$PWD/$CARRY/data" IRPIPE_CACHE="${TMPDIR:-/tmp}/irpipe-cache"
    # 500 of dev-small's 6,980 queries x 1,000 passages (2,000 did not end inside the cap at ~3,900 pairs/s), and
    # every core for the CPU fp32 reference (at 1 thread, DL19 + DL20 did not end in 200 s): docs/inference.md
    DEVICE=(--dev-queries 500 --threads "$(nproc)")
    CAPS=(360 180)    # of the call's 590 s; the steps in the issue's priority order
    NAME=gpu-inference
    if [ "$MODE" = "--sections" ]; then   # e.g. those a first call's cap cut off: --sections dl_ndcg training
        shift
        DEVICE+=(--gpu-sections "$@" --train-steps "${TRAIN_STEPS:-20}")
        CAPS=("${SECTIONS_CAP:-200}" 0)
        NAME=gpu-inference-sections
    fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.csv" 2>&1
fi

step() {  # step NAME CAP RESULT COMMAND...: run under its cap, then copy RESULT (a JSON file) into $OUT
    local name=$1 cap=$2 result=$3 start=$SECONDS status
    shift 3
    if [ "$cap" -le 0 ]; then
        printf '{"step": "%s", "skipped": true}\n' "$name" >> "$OUT/steps.jsonl"
        return
    fi
    timeout "$cap" "$@" > "$OUT/$name.log" 2>&1
    status=$?
    [ -f "$result" ] && cp "$result" "$OUT/$name.json"
    printf '{"step": "%s", "exit": %d, "seconds": %d, "cap": %d}\n' "$name" "$status" $((SECONDS - start)) "$cap" \
        >> "$OUT/steps.jsonl"   # exit 124: stopped at its cap
}

step "$NAME" "${CAPS[0]}" "eval/benchmarks/$NAME.json" \
    python3 -m bench.inference_speed --gpu-only ${DEVICE[@]+"${DEVICE[@]}"} --record --output "$NAME"
[ "$MODE" = "--smoke" ] && rm -f "eval/benchmarks/$NAME.json"
# step 2 copies this run's result, not an earlier one (eval/results/ holds the CPU pin)
[ "${CAPS[1]}" -gt 0 ] && rm -f runs/results/wikiqa-monobert.json
step gpu-wikiqa-monobert "${CAPS[1]}" runs/results/wikiqa-monobert.json \
    python3 -m pipeline.cli run eval/wikiqa-monobert.yaml --check
cat "$OUT/steps.jsonl"
