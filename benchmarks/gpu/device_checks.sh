#!/usr/bin/env bash
# One call on a lent GPU machine (the workplace's `device` tool): the CUDA checks and the GPU benchmarks, inside
# about 9.5 minutes. The machine has torch, transformers and sentence-transformers but no network: the package's
# other dependencies travel as wheels in .whl/ and the benchmark inputs in .gpu_carry/ (both ignored by git; see
# benchmarks/README.md, "On a GPU", for how they are made). Everything it writes goes under $OUT.
#   run: bash benchmarks/gpu/device_checks.sh      (carry: .whl .gpu_carry)
# A shorter call re-checks after a change, e.g.
#   CUDA_TESTS="tests/test_cuda.py -k 'not bf16'" PLAN=1000000x1024:fp16 BENCH_BUDGET=120 SUITE= bash ...
set -u
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >"$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec python3 -m bitext_hf.cli "$@"\n' >/tmp/bin/bitext-hf && chmod +x /tmp/bin/bitext-hf
export PATH=/tmp/bin:$PATH
{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
    python3 -c "import torch, transformers, sentence_transformers, faiss, datasets, numpy, bitext_hf; \
print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name()); \
print('transformers', transformers.__version__, 'sentence-transformers', sentence_transformers.__version__, \
'faiss', faiss.__version__, 'datasets', datasets.__version__, 'numpy', numpy.__version__); print(bitext_hf.__file__)"
    nproc
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
echo "[$(elapsed)s] setup done"

# 1. The CUDA tests (tests/test_cuda.py): kNN in fp32/fp16/bf16, metrics, encoders, the four recipes in bf16.
eval timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -o addopts='""' -rfEs --timeout 140 \
    "${CUDA_TESTS:-tests/test_cuda.py}" >"$OUT/pytest_cuda.log" 2>&1
rc=$?; echo "[$(elapsed)s] test_cuda rc=$rc"

# 2. The benchmarks (benchmarks/bench_gpu.py): a plan inside its budget.
BENCH_BUDGET=${BENCH_BUDGET:-270}
timeout -s INT $((BENCH_BUDGET + 30)) python3 benchmarks/bench_gpu.py --json "$OUT/bench_gpu.json" \
    --budget "$BENCH_BUDGET" --encode_budget "${ENCODE_BUDGET:-75}" \
    --sentences .gpu_carry/sentences.txt --minilm .gpu_carry/minilm \
    --encoders "${ENCODERS:-st:fp32,st:fp16,st:bf16,ours:fp32,ours:bf16}" --blocks "${BLOCKS:-33554432,268435456}" \
    --plan "${PLAN:-1000000x1024:fp16,1000000x768:fp16,500000x768:fp32,500000x1024:fp32,2000000x1024:fp16,1000000x768:fp32,4000000x1024:fp16}" \
    >"$OUT/bench_gpu.log" 2>&1
rc=$?; echo "[$(elapsed)s] bench_gpu rc=$rc"

# 3. The suite's tests whose code chooses CUDA when present (mining, metrics, encoders, models, training), with
# CUDA visible; whatever time is left.
left=$(( 545 - $(elapsed) ))
if [ -n "${SUITE-1}" ] && [ "$left" -gt 30 ]; then
    timeout -s INT "$left" python3 -m pytest -q -p no:cacheprovider -o addopts="-m 'not slow'" -rfE --timeout 120 \
        -n 14 tests/test_mining.py tests/test_mining_index.py tests/test_mining_checks.py tests/test_mining_filters.py \
        tests/test_shards.py tests/test_metrics.py tests/test_metric_modules.py tests/test_peer_metrics.py \
        tests/test_evaluation.py tests/test_evaluators.py tests/test_encoders.py tests/test_encoder_precision.py \
        tests/test_model_contract.py tests/test_onealigner.py tests/test_laser3.py tests/test_musr.py \
        tests/test_contrastive_align.py tests/test_trainer.py tests/test_distill.py tests/test_onealigner_retrieval.py \
        >"$OUT/pytest_suite.log" 2>&1
    rc=$?; echo "[$(elapsed)s] suite rc=$rc"
fi

echo "== test_cuda"; tail -25 "$OUT/pytest_cuda.log"
[ -f "$OUT/pytest_suite.log" ] && echo "== suite" && grep -E "^(FAILED|ERROR)" "$OUT/pytest_suite.log" | cut -c1-220 | head -40 && tail -3 "$OUT/pytest_suite.log"
echo "== bench"; grep -v "^{" "$OUT/bench_gpu.log" | grep -v "Loading weights" | tail -30
