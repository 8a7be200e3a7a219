#!/usr/bin/env bash
# The sixth device call (2026-12-04): transformers 4.57's per-expert MoE loop (benchmarks/gpu_loop_v4.py) into
# $OUT/loop_v4.json. Carries .whl4/ (transformers 4.57.6, tokenizers 0.22.1, huggingface_hub 0.36.0, peft 0.21.2).
set -u
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site4 .whl4/*.whl || exit 1
export PYTHONPATH=/tmp/site4:$PWD/src
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  timeout "${LOOP_S:-240}" python3 benchmarks/gpu_loop_v4.py --out "$OUT/loop_v4.json"; echo "loop_v4 rc=$?"; date -u; } 2>&1 \
  | grep -v -E "Warning|warnings.warn|deprecated|use_cache" | tee "$OUT/log6.txt"
