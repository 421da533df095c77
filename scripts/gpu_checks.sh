#!/usr/bin/env bash
# What only a CUDA machine can show, in one run (the project's lent GPU machine; CI has none):
#   scripts/gpu_checks.py (fp32/fp16/bf16 training, checkpoints and resume, fp16/bf16 full eval, GPU memory
#   metrics, Optuna trials sharing one GPU), the trainer benchmark against a hand-written loop, and the trainer
#   tests plus the Optuna/session/runner/cost tests on the GPU.
# The machine's image has torch, accelerate, transformers, pandas and pytest-xdist; what it lacks travels as wheels
# in .whl/ (pydantic, optuna and their needs: see the closing note of issue 13). Ray, SigOpt, plotly, datasets and
# the trackers are not carried: their tests fail there for that reason alone.
set -u
OUT=${OUT:-/tmp/gpu_checks}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUT/env.txt"
python3 -c "import torch, accelerate, transformers; print(torch.__version__, accelerate.__version__, transformers.__version__)" >>"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
if [ "${SKIP_CHECKS:-0}" != 1 ]; then
    timeout 150 python3 scripts/gpu_checks.py --out "$OUT/gpu_checks.json" >"$OUT/checks.log" 2>&1
    echo "checks rc=$?"; grep -E "^(PASS|FAIL)|passed" "$OUT/checks.log" | cut -c1-600
    timeout 90 python3 -m benchmarks.trainer_overhead >"$OUT/bench.log" 2>&1; echo "bench rc=$?"; tail -18 "$OUT/bench.log"
fi
timeout "${PYTEST_TIMEOUT:-230}" python3 -m pytest ${PYTEST_PATHS:-tests/trainer tests/hpsearch/test_optuna_backend.py \
    tests/hpsearch/test_session.py tests/hpsearch/test_runner.py tests/hpsearch/test_cost.py} \
    -n 14 -q -p no:cacheprovider --timeout 150 --continue-on-collection-errors -W ignore -rs >"$OUT/pytest.log" 2>&1
echo "pytest rc=$?"
grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/pytest.log" | cut -c1-250 | tail -70
