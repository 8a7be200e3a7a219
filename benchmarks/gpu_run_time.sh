#!/usr/bin/env bash
# The step-time calibration device call: `gpu_calibrate.py time` (GEMM efficiency by shape, HBM, host cost per
# kernel, AdamW step, pinned copies, a plain-torch decode loop) into $OUT/time.json, then `trainfit calibrate`
# of it into $OUT/calibration.json. One short script (a few minutes; TIME_S caps it, default 540 s).
set -u
. benchmarks/gpu_env.sh
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  echo "== time"; SECONDS=0
  timeout "${TIME_S:-540}" python3 benchmarks/gpu_calibrate.py time --out "$OUT/time.json"; echo "time rc=$? in ${SECONDS}s"
  echo "== calibrate"
  python3 -m trainfit.cli.main calibrate "$OUT/time.json" --out "$OUT/calibration.json"; echo "calibrate rc=$?"
  date -u
} 2>&1 | quiet log_time.txt
