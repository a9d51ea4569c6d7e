#!/usr/bin/env bash
# The whole fp32 GPU trainer on the CPU: train_gpt.cu compiled by g++ against runtime.h (the
# CUDA runtime calls on host memory) and emu.h (kernels, cuBLAS), its launches rewritten by
# transform.py; then --dump_case on case files, with each training attention path, compared
# by tensor name with the CPU trainer's dump at test_gpt's fp32 tolerances.
#   bash dev/cuda_emu/trainer.sh [CASE ...]   default: test_tmp/case9.bin (written by ./test_gpt)
# Minutes per case on 2 cores (a std::thread per CUDA thread), so not part of make test.
# Ends with "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(test_tmp/case9.bin)
for c in "${cases[@]}"; do
    [ -f "$c" ] || { echo "SKIP: $c does not exist (./test_gpt writes test_tmp/case*.bin)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
done
mkdir -p "$tmp/stub"
for h in cuda_runtime.h cuda_bf16.h cublas_v2.h; do echo "#include \"$PWD/dev/cuda_emu/runtime.h\"" > "$tmp/stub/$h"; done
python3 dev/cuda_emu/transform.py train_gpt.cu > "$tmp/train_gpt_emu.cpp" 2> "$tmp/transform.log" || { cat "$tmp/transform.log"; exit 1; }
if ! g++ -std=c++20 -O2 -DENABLE_FP32 -w -ffp-contract=off -I"$tmp/stub" -I. -o "$tmp/train_gpt_emu" "$tmp/train_gpt_emu.cpp" -pthread 2> "$tmp/cc.log"; then
    head -n 20 "$tmp/cc.log"
    echo "FAIL: train_gpt.cu does not build for the CPU emulation"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
pass=0 fail=0
for c in "${cases[@]}"; do
    ./train_gpt_cpu --dump_case "$c" "$tmp/cpu.bin" > /dev/null || { echo "FAIL: CPU dump of $c"; fail=$((fail + 1)); continue; }
    for a in naive flash; do
        t=$SECONDS
        if ! "$tmp/train_gpt_emu" --dump_case "$c" "$tmp/emu.bin" --attention $a > "$tmp/emu.log" 2>&1; then
            echo "FAIL: $c --attention $a: the emulated trainer failed: $(tail -n 3 "$tmp/emu.log")"
            fail=$((fail + 1))
            continue
        fi
        if $PY - "$tmp/emu.bin" "$tmp/cpu.bin" "$c --attention $a ($((SECONDS - t)) s)" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
import sys
sys.path.insert(0, "dev")
import numpy as np
import tensorfile
got, want = tensorfile.read(sys.argv[1]), tensorfile.read(sys.argv[2])
tol = lambda k: 1e-4 if k.startswith("final.") else 1e-5  # test_gpt's TOL_FP32
errs = {k: float(np.linalg.norm(np.asarray(got[k], np.float64) - np.asarray(want[k], np.float64)) /
                 (np.linalg.norm(np.asarray(want[k], np.float64)) + 1e-30)) for k in want if k in got}
bad = sorted(k for k in errs if not errs[k] < tol(k)) + sorted(set(want) ^ set(got))
worst = max(errs, key=lambda k: errs[k] / tol(k))
print("%s: emulated GPU fp32 vs CPU, %s: %d tensors by name, worst %s %.1e (tol %.0e)%s" % (
    "FAIL" if bad else "PASS", sys.argv[3], len(errs), worst, errs[worst], tol(worst), (": " + ", ".join(bad)) if bad else ""))
sys.exit(1 if bad else 0)
PY
    done
done
echo "$pass passed, $fail failed, 0 skipped"
[ $fail = 0 ]
