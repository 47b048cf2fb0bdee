#!/usr/bin/env bash
# The GPU speed measurement of issue 39, prepared for a CUDA machine (<= 8 min on one H100/H200):
# a random-weight stand-in at llama3.1-8b's shape (32 blocks, hidden 4096, GQA 32/8, vocabulary 128256,
# untied head; depthprune.plan.SHAPES) in bf16, dense against M = 7 and M = 9 blocks removed (the
# paper's budgets), each pair timed in alternating rounds in one process by `depthprune speed`:
# prefill at 128 and 2048 tokens, batch 1 and 8, and 64 KV-cached decode steps at batch 1 and 8.
# Random weights are enough: speed depends on the shapes, not the values. The blocks removed are
# the last ones before the final block, where depth pruning usually cuts; on a stand-in every block
# costs the same, so which ones does not matter, only how many.
#
#   tools/gpu_speed.sh                        # writes archive/speed-gpu-llama3.1-8b-M7.json, -M9.json
#   OUT=$OUT tools/gpu_speed.sh               # on the device machine: its folder that comes back
#
# Every setting can be overridden from the environment; the CPU check of this script (seconds):
#   SHAPE=tiny-64 DEVICE=cpu DTYPE=float32 CONTEXTS=8,16 BATCHES=1,2 NEW_TOKENS=2 ROUNDS=1 WARMUP=0 \
#     SETS="1,2 1,2,3" OUT=/tmp/gpu-speed tools/gpu_speed.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false
SHAPE=${SHAPE:-llama3.1-8b}
DEVICE=${DEVICE:-cuda}
DTYPE=${DTYPE:-bfloat16}
CONTEXTS=${CONTEXTS:-128,2048}
BATCHES=${BATCHES:-1,8}
NEW_TOKENS=${NEW_TOKENS:-64}
ROUNDS=${ROUNDS:-10}
WARMUP=${WARMUP:-2}
OUT=${OUT:-archive}
# M = 7 and M = 9 of 32 blocks: 24..30 and 22..30
SETS=${SETS:-"24,25,26,27,28,29,30 22,23,24,25,26,27,28,29,30"}
mkdir -p "$OUT"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__,
      'cuda', torch.cuda.is_available() and torch.cuda.get_device_name(0))"
for set in $SETS; do
  m=$(awk -F, '{print NF}' <<<"$set")
  timeout 240 python3 -m depthprune.cli speed --stand-in "$SHAPE" --remove "$set" --device "$DEVICE" \
    --dtype "$DTYPE" --contexts "$CONTEXTS" --batches "$BATCHES" --new-tokens "$NEW_TOKENS" \
    --rounds "$ROUNDS" --warmup "$WARMUP" --quiet --json "$OUT/speed-gpu-$SHAPE-M$m.json"
done
