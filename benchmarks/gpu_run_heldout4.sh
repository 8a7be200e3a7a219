#!/usr/bin/env bash
# The fifth device call (2026-12-04): the fourth held-out calibration set (MoE models on one GPU, three dense
# cards), each step profiled once, into $OUT/heldout4.json; nothing in the model was changed for it.
set -u
. benchmarks/gpu_env.sh
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'peft', peft.__version__)"
  measure heldout4 heldout4.json "${MEASURE_S:-480}"; date -u; } 2>&1 | quiet log5.txt
