# Sourced by the benchmarks/gpu_run*.sh device calls: output folder, quiet Python, the carried wheels
# (benchmarks/gpu_wheels.sh) on PYTHONPATH, and the steps the calls share.
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1 PYTHONWARNINGS=ignore
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD/src
else
  export PYTHONPATH=$PWD/src
fi

# quiet LOG: drop library warnings and progress bars, keep the rest on screen and in $OUT/LOG
quiet() { grep -v -E "Warning|warnings.warn|Writing model shards|Loading weights" | tee "$OUT/$1"; }

# accept_cuda FILE: `trainfit accept --device cuda --json` into $OUT/FILE, then one line per check
accept_cuda() {
  echo "== accept --device cuda"; SECONDS=0
  timeout 150 python3 -m trainfit.cli.main accept --device cuda --json > "$OUT/$1"; echo "accept rc=$? in ${SECONDS}s"
  python3 -c "import json, sys; [print(c['name'], c['status'], c['evidence'][:300]) for c in json.load(open(sys.argv[1]))['checks']]" "$OUT/$1"
}

# measure SET FILE [SECONDS]: one calibration set into $OUT/FILE
measure() {
  echo "== measure $1"; timeout "${3:-200}" python3 benchmarks/gpu_calibrate.py measure --only "$1" --out "$OUT/$2"; echo "$1 rc=$?"
}
