#!/usr/bin/env bash
# The one device call: GPU calibration + `trainfit accept --device cuda` + `trainfit audit` on a real card.
# Run from the repository root on a CUDA machine whose python3 has torch; wheels for the rest in .whl/
# (benchmarks/gpu_wheels.sh downloads them). Everything lands in $OUT (default ./gpu_out).
set -u
. benchmarks/gpu_env.sh
{
  date -u; nvidia-smi; python3 -c "import torch, transformers, peft, trl, datasets, pydantic; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, 'trl', trl.__version__, 'datasets', datasets.__version__)"
  echo "== audit"; timeout 60 python3 -m trainfit.cli.main audit --json > "$OUT/audit.json"; echo "audit rc=$?"
  echo "== context"; timeout 90 python3 benchmarks/gpu_calibrate.py context --out "$OUT/context.json"; echo "context rc=$?"
  echo "== measure (default allocator)"; timeout 230 python3 benchmarks/gpu_calibrate.py measure --out "$OUT/default.json"; echo "measure rc=$?"
  echo "== accept --device cuda"; SECONDS=0
  timeout 120 python3 -m trainfit.cli.main accept --device cuda --json > "$OUT/accept_cuda.json"; echo "accept rc=$? in ${SECONDS}s"
  echo "== measure (expandable segments)"
  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout ${EXPANDABLE_S:-100} python3 benchmarks/gpu_calibrate.py measure --out "$OUT/expandable.json"; echo "expandable rc=$?"
  date -u
} 2>&1 | quiet log.txt
