#!/usr/bin/env bash
# Every CUDA program compiles with this machine's nvcc, warnings as errors (make cuda WERROR=-Werror):
# both trainers and dev/cuda's kernel variants. Skipped where there is no nvcc.
cd "$(dirname "$0")/.." || exit 1
if ! command -v nvcc >/dev/null; then
    echo "SKIP: CUDA build: no nvcc on this machine"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
log=$(mktemp)
if make -j2 cuda WERROR=-Werror >"$log" 2>&1; then
    echo "PASS: make cuda: train_gpt, train_gpt_fp32 and the dev/cuda kernel variants compile ($(nvcc --version | grep -o 'release [0-9.]*'))"
    rm -f "$log"
    echo "1 passed, 0 failed, 0 skipped"
else
    grep -E "error" "$log" | head -n 20
    echo "FAIL: make cuda (its first errors above)"
    rm -f "$log"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
