#!/usr/bin/env bash
# The second device call: `trainfit accept --device cuda` after the grader fix, and the held-out
# calibration cases (measured after the overhead constants were fitted on the first call's grid).
set -u
. benchmarks/gpu_env.sh
{ date -u; accept_cuda accept_cuda.json; measure heldout heldout.json; date -u; } 2>&1 | quiet log2.txt
