#!/usr/bin/env bash
# make builds the CPU trainer with a compiler that has no OpenMP (Apple's clang, for one): the
# Makefile finds that -fopenmp is refused, says so, and builds for one thread. Checked with
# clang behind a wrapper that refuses -fopenmp as Apple's clang does, on a copy of the
# sources (the repository's own build stays as it is); the trainer then runs 3 steps.
cd "$(dirname "$0")/.." || exit 1
if ! command -v clang >/dev/null; then echo "SKIP: no clang here"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
p=0 f=0
check() {  # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -eq 0 ]; then echo "PASS: $1"; p=$((p + 1)); else echo "FAIL: $1"; f=$((f + 1)); fi
}
printf '#!/bin/sh\nfor a in "$@"; do [ "$a" = -fopenmp ] && { echo "clang: error: unsupported option -fopenmp" >&2; exit 1; }; done\nexec clang "$@"\n' > "$tmp/cc"
chmod +x "$tmp/cc"
mkdir "$tmp/src"
cp -r Makefile train_gpt_cpu.c llmc "$tmp/src/"
out=$(make -C "$tmp/src" CC="$tmp/cc" train_gpt_cpu 2>&1)
rc=$?
echo "$out" | tail -n 3
check "make builds the trainer with a compiler that refuses -fopenmp (clang, -Werror)" $rc
echo "$out" | grep -q "does not take -fopenmp: the CPU trainer is built for one thread"
check "make says that the trainer is built for one thread" $?
run=$("$tmp/src/train_gpt_cpu" --steps 3 --val_every 0 --eval_len 0 --train_data data/builtin/train.bin \
    --val_data data/builtin/val.bin --out_dir "$tmp/run" 2>&1)
rc=$?
echo "$run" | grep -E "threads|step +3/3" | cut -c1-150
echo "$run" | grep -q " 1 threads " && [ $rc -eq 0 ] && [ -f "$tmp/run/checkpoint.bin" ]
check "that trainer runs 3 steps on one thread and saves its checkpoint" $?
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
