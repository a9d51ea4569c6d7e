#!/usr/bin/env bash
# The CPU kernels (llmc/gemm.h, llmc/vecmath.h) have an AVX-512, an AVX2 + FMA and a
# portable path, chosen at build time. make test's own build checks the one this CPU
# takes; this builds test_gpt for the other instruction sets this CPU can run and checks
# each path against the same definitions (KERNELS_ONLY=1).
cd "$(dirname "$0")/.." || exit 1
p=0 f=0 s=0
for isa in x86-64-v4 x86-64-v3 x86-64; do
    bin=$(mktemp)
    if ! gcc -O3 -march=$isa -std=c11 -ffp-contract=off -fopenmp -Wall -Wextra -Werror -Wno-unused-function -o "$bin" test_gpt.c -lm 2>/dev/null; then
        echo "FAIL: test_gpt does not build with -march=$isa"; f=$((f + 1)); rm -f "$bin"; continue
    fi
    out=$(KERNELS_ONLY=1 "$bin" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "PASS: kernels for -march=$isa: $(echo "$out" | tail -n 1)"; p=$((p + 1))
    elif [ $rc -eq 132 ]; then  # SIGILL: instructions this CPU does not have
        echo "SKIP: kernels for -march=$isa: this CPU cannot run them"; s=$((s + 1))
    else
        echo "$out" | grep -E "^FAIL"; echo "FAIL: kernels for -march=$isa (exit $rc)"; f=$((f + 1))
    fi
    rm -f "$bin"
done
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
