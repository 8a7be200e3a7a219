#!/usr/bin/env bash
# The third device call: `trainfit accept --device cuda` after the generation-engine refactor, and the
# second held-out calibration set (measured after every model change the first two calls prompted).
set -u
. benchmarks/gpu_env.sh
{ date -u; accept_cuda accept_cuda_final.json; measure heldout2 heldout2.json; date -u; } 2>&1 | quiet log3.txt
