#!/usr/bin/env bash
# The fourth device call: the third held-out calibration set, measured after the allocator replay was written.
set -u
. benchmarks/gpu_env.sh
{ date -u; measure heldout3 heldout3.json; date -u; } 2>&1 | quiet log4.txt
