#!/usr/bin/env bash
# The whole GPU trainer on the CPU: train_gpt.cu compiled by g++ against runtime.h (the CUDA
# runtime calls on host memory) and emu.h (kernels, cuBLAS, bf16 and WMMA), its launches
# rewritten by transform.py; then --dump_case on case files, with each training attention
# path, compared by tensor name with the CPU trainer's dump at test_gpt's tolerances (TOL_FP32
# for the fp32 build, TOL_BF16 for the bf16 one).
#   bash dev/cuda_emu/trainer.sh [CASE ...]   default: test_tmp/case13.bin (written by ./test_gpt)
#   BUILDS="fp32 bf16" (default) or one of them
# Minutes per case and path on 2 cores (a std::thread per CUDA thread), so not part of make
# test. Ends with "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(test_tmp/case13.bin)
for c in "${cases[@]}"; do
    [ -f "$c" ] || { echo "SKIP: $c does not exist (./test_gpt writes test_tmp/case*.bin)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }
done
mkdir -p "$tmp/stub"
for h in cuda_runtime.h cuda_bf16.h cublas_v2.h mma.h; do echo "#include \"$PWD/dev/cuda_emu/runtime.h\"" > "$tmp/stub/$h"; done
python3 dev/cuda_emu/transform.py train_gpt.cu > "$tmp/train_gpt_emu.cpp" 2> "$tmp/transform.log" || { cat "$tmp/transform.log"; exit 1; }
for build in ${BUILDS:-fp32 bf16}; do
    flag=""
    [ "$build" = fp32 ] && flag=-DENABLE_FP32
    if ! g++ -std=c++20 -O2 $flag -w -ffp-contract=off -I"$tmp/stub" -I. -o "$tmp/train_gpt_emu_$build" "$tmp/train_gpt_emu.cpp" \
        -pthread 2> "$tmp/cc.log"; then
        head -n 20 "$tmp/cc.log"
        echo "FAIL: train_gpt.cu ($build build) does not build for the CPU emulation"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
done
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
pass=0 fail=0
for c in "${cases[@]}"; do
    ./train_gpt_cpu --dump_case "$c" "$tmp/cpu.bin" > /dev/null || { echo "FAIL: CPU dump of $c"; fail=$((fail + 1)); continue; }
    for build in ${BUILDS:-fp32 bf16}; do
        for a in naive flash; do
            t=$SECONDS
            if ! "$tmp/train_gpt_emu_$build" --dump_case "$c" "$tmp/emu.bin" --attention $a > "$tmp/emu.log" 2>&1; then
                if grep -q "does not take --pe" "$tmp/emu.log"; then  # an encoding that path refuses, as it should
                    echo "PASS: $c $build --attention $a: refused ($(grep -o "does not take --pe [a-z0-9]*'s [a-z ]*" "$tmp/emu.log"))"
                    pass=$((pass + 1))
                    continue
                fi
                echo "FAIL: $c $build --attention $a: the emulated trainer failed: $(tail -n 3 "$tmp/emu.log")"
                fail=$((fail + 1))
                continue
            fi
            if $PY - "$tmp/emu.bin" "$tmp/cpu.bin" "$build" "$c --attention $a ($((SECONDS - t)) s)" <<'PY'; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
import sys
sys.path.insert(0, "dev")
import numpy as np
import tensorfile
got, want = tensorfile.read(sys.argv[1]), tensorfile.read(sys.argv[2])
build = sys.argv[3]
def tol(k):  # test_gpt.c's TOL_FP32 and TOL_BF16, by tensor name
    if build == "fp32":
        return 1e-4 if k.startswith("final.") else 1e-5
    if k.startswith("final."):
        return 1e-1
    if k.startswith("grad."):
        return 5e-2
    return {"logits": 2e-2, "loss": 1e-3}.get(k, 1e-2)
errs = {k: float(np.linalg.norm(np.asarray(got[k], np.float64) - np.asarray(want[k], np.float64)) /
                 (np.linalg.norm(np.asarray(want[k], np.float64)) + 1e-30)) for k in want if k in got}
bad = sorted(k for k in errs if not errs[k] < tol(k)) + sorted(set(want) ^ set(got))
worst = max(errs, key=lambda k: errs[k] / tol(k))
show = ", ".join("%s %.1e" % (k, errs[k]) for k in ("logits", "loss", "losses", "grad_norms") if k in errs)
print("%s: emulated GPU %s vs CPU, %s: %d tensors by name, worst %s %.1e (tol %.0e); %s%s" % (
    "FAIL" if bad else "PASS", build, sys.argv[4], len(errs), worst, errs[worst], tol(worst), show,
    (": " + ", ".join(bad)) if bad else ""))
sys.exit(1 if bad else 0)
PY
        done
    done
done
echo "$pass passed, $fail failed, 0 skipped"
[ $fail = 0 ]
