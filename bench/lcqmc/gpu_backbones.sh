#!/bin/bash
# Chinese BERT backbones pretrained on a GPU, then monobert and kwbert fine-tuned on LCQMC and BQ (pair accuracy,
# 3 seeds), all in one bounded command (eval/KEYWORD_BERT.md section 8):
#
#     bash bench/lcqmc/gpu_backbones.sh OUT        # OUT: where the logs, JSON files and BERT folders go
#
# What it needs: a CUDA machine with torch and transformers; jieba (importable, e.g. on PYTHONPATH); the four Chinese
# data folders of ../shared/data (lcqmc, bq-corpus, thucnews-titles, insuranceqa-zh-questions) under $IRPIPE_MIRROR.
# No Lucene: the benchmark runs with --ranking-queries 0 (accuracy only). Each size pretrains in its own process
# (the GPU is shared; masking runs on one CPU core each) for at most MINUTES, then each (size, dataset, seed) fine-tunes
# in its own process (a timeout loses one seed, not a table), then each (size, dataset) is summarised over the seeds
# from the model cache (means, paired t-tests and the kwbert - monobert interval).
# Knobs (environment): SIZES ("2x128 4x256 6x384": layers x hidden), STEPS (8000, the schedule's length), MINUTES
# (3.8), FT_SECONDS (180), SEEDS ("0 1 2"), DEVICE (cuda), PY (python3).
OUTDIR=${1:?usage: gpu_backbones.sh OUT}; mkdir -p "$OUTDIR"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} IRPIPE_MIRROR=${IRPIPE_MIRROR:-$ROOT/../shared/data}
export IRPIPE_CACHE=${IRPIPE_CACHE:-$OUTDIR/cache} IRPIPE_OFFLINE=1 OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}; DEVICE=${DEVICE:-cuda}; SEEDS=${SEEDS:-0 1 2}; SIZES=${SIZES:-2x128 4x256 6x384}
STEPS=${STEPS:-8000}; MINUTES=${MINUTES:-3.8}; FT_SECONDS=${FT_SECONDS:-180}
W=$OUTDIR/work; mkdir -p "$W"; START=$(date +%s)
elapsed() { echo "$1 after $(( $(date +%s) - START )) s" | tee -a "$W/timeline.txt"; }
$PY -c "import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA')" > "$W/versions.txt" 2>&1

for size in $SIZES; do
  $PY -m pipeline.cli pretrain-mlm --output "$W/zh-bert-$size-pairs" --layers "${size%x*}" --hidden "${size#*x}" \
    --steps "$STEPS" --batch-size 128 --whole-words --pairs --save-every $((STEPS / 8)) --log-every $((STEPS / 16)) \
    --threads 1 --device auto --max-minutes "$MINUTES" > "$W/pretrain-$size.log" 2>&1 &
done
wait; elapsed "pretraining done"

bench() {  # size dataset output seeds...
  local size=$1 dataset=$2 output=$3; shift 3
  $PY -m bench.keyword_bert --dataset "$dataset" --bert "$W/zh-bert-$size-pairs" --systems monobert kwbert \
    --seeds "$@" --ranking-queries 0 --device "$DEVICE" --threads 1 --record --output "$output"
}
for size in $SIZES; do for dataset in lcqmc bq; do for seed in $SEEDS; do
  (timeout "$FT_SECONDS" bash -c "$(declare -f bench); PY=$PY W=$W DEVICE=$DEVICE bench $size $dataset \
    $W/seed-$dataset-$size-$seed.json $seed" > "$W/ft-$dataset-$size-$seed.log" 2>&1) &
done; done; done
wait; elapsed "fine-tuning done"
for size in $SIZES; do for dataset in lcqmc bq; do
  (timeout 90 bash -c "$(declare -f bench); PY=$PY W=$W DEVICE=$DEVICE bench $size $dataset \
    $W/keyword-bert-$dataset-$size-gpu.json $SEEDS" > "$W/ft-$dataset-$size.log" 2>&1) &
done; done
wait; elapsed "summaries done"
