#!/usr/bin/env bash
# Create the peer-estimator virtual environments used by benchmarks/peers.py.
#
#   .peers/deepspeed     deepspeed==0.19.8 (DS_BUILD_OPS=0, no CUDA ops) on torch==2.13.0 (+cpu wheel)
#   .peers/llm-analysis  llm-analysis==0.2.2 (pins transformers<5 and an old huggingface-hub) on torch==2.13.0
#   accelerate 1.15 + transformers 5.24 come from the project's main .venv (pip install -e '.[trace]').
#
# Everything lives under .peers/ at the repository root (git-ignored). Re-running is cheap: an
# environment whose marker file exists is left alone; pass --force to rebuild them.
# Usage: bash benchmarks/peers_env.sh [--force]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="$ROOT/.peers"
PY="${PYTHON:-python3}"
CONSTRAINTS="$ROOT/constraints.txt"   # pins torch==2.13.0 so nothing pulls another build
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1
mkdir -p "$PEERS"

make_venv() {  # name, then the pip requirements
  local name="$1"; shift
  local dir="$PEERS/$name"
  if [[ -f "$dir/.ok" && $FORCE -eq 0 ]]; then
    echo "peers_env: $name ready ($dir)"; return 0
  fi
  local t0=$SECONDS
  rm -rf "$dir"
  "$PY" -m venv "$dir"
  "$dir/bin/pip" install -q --upgrade "pip>=24" setuptools wheel
  # torch first, from the pinned (local) wheel, so the peer's own requirements cannot pull another build.
  "$dir/bin/pip" install -q -c "$CONSTRAINTS" "torch==2.13.0"
  DS_BUILD_OPS=0 "$dir/bin/pip" install -q -c "$CONSTRAINTS" "$@"
  touch "$dir/.ok"
  echo "peers_env: $name built in $((SECONDS - t0)) s"
}

make_venv deepspeed "deepspeed==0.19.8"
make_venv llm-analysis "llm-analysis==0.2.2"

# accelerate/transformers: the main .venv when it has them, else a third venv.
MAIN="$ROOT/.venv"
if [[ -x "$MAIN/bin/python" ]] && "$MAIN/bin/python" - <<'EOF' 2>/dev/null
import accelerate, transformers, sys
sys.exit(0 if accelerate.__version__.startswith("1.15") and transformers.__version__.startswith("5.24") else 1)
EOF
then
  echo "peers_env: accelerate uses the main .venv ($MAIN)"
else
  make_venv accelerate "accelerate==1.15.0" "transformers==5.24.0"
fi

# Smoke check: each peer imports.
DS_BUILD_OPS=0 "$PEERS/deepspeed/bin/python" -c "import deepspeed; print('deepspeed', deepspeed.__version__)" 2>/dev/null | tail -1
"$PEERS/llm-analysis/bin/python" -c "import llm_analysis.analysis as a; print('llm-analysis ok')"
