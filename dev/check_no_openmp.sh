#!/usr/bin/env bash
# make builds the CPU trainer with Apple's clang, which has no OpenMP and, before clang 15 on
# ARM, refuses -march=native: the Makefile finds what the compiler refuses, says so, and
# builds for one thread (and the compiler's default instruction set). Checked with clang
# behind wrappers that refuse -fopenmp, then -fopenmp and -march=native, as Apple's do, on a
# copy of the sources (the repository's own build stays as it is); each trainer runs 3 steps.
cd "$(dirname "$0")/.." || exit 1
if ! command -v clang >/dev/null; then echo "SKIP: no clang here"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p=0 f=0
check() {  # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -eq 0 ]; then echo "PASS: $1"; p=$((p + 1)); else echo "FAIL: $1"; f=$((f + 1)); fi
}
for refused in "-fopenmp" "-fopenmp -march=native"; do
    cc=$tmp/cc${refused// /}
    printf '#!/bin/sh\nfor a in "$@"; do for r in %s; do [ "$a" = "$r" ] && { echo "clang: error: unsupported option $a" >&2; exit 1; }; done; done\nexec clang "$@"\n' \
        "$refused" > "$cc"
    chmod +x "$cc"
    rm -rf "$tmp/src" "$tmp/run"
    mkdir "$tmp/src"
    cp -r Makefile train_gpt_cpu.c llmc "$tmp/src/"
    out=$(make -C "$tmp/src" CC="$cc" train_gpt_cpu 2>&1)
    rc=$?
    echo "$out" | grep -E "^Makefile:|error:" | cut -c1-160
    check "make builds the trainer with a compiler that refuses $refused (clang, -Werror)" $rc
    echo "$out" | grep -q "does not take -fopenmp: the CPU trainer is built for one thread"
    check "make says that the trainer is built for one thread" $?
    if [[ $refused == *march* ]]; then
        echo "$out" | grep -q "takes neither -march=native nor -mcpu=native: the CPU trainer is built for its default instruction set"
        check "make says that the trainer is built for the compiler's default instruction set" $?
    fi
    run=$("$tmp/src/train_gpt_cpu" --steps 3 --val_every 0 --eval_len 0 --train_data data/builtin/train.bin \
        --val_data data/builtin/val.bin --out_dir "$tmp/run" 2>&1)
    rc=$?
    echo "$run" | grep -E "step +3/3" | cut -c1-100
    echo "$run" | grep -q " 1 thread " && [ $rc -eq 0 ] && [ -f "$tmp/run/checkpoint.bin" ]
    check "that trainer runs 3 steps on one thread and saves its checkpoint" $?
done
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
