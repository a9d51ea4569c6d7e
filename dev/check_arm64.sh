#!/usr/bin/env bash
# The CPU trainer on ARM (Apple's M chips, Linux on ARM), without an ARM machine: make
# builds it and test_gpt for aarch64 with a cross compiler (make CC=aarch64-linux-gnu-gcc
# CFLAGS=-O3: the NEON GEMM kernel, warnings as errors) from a copy of the sources, and qemu's
# user-mode emulation runs them:
#   - test_gpt's kernel checks (the GEMM and the vector math against their definitions, bit
#     for bit);
#   - a short PosAug run (3 steps and an evaluation at 128), whose checkpoint and evaluation file
#     must equal byte for byte those of this machine's build without vector extensions
#     (make CFLAGS="-O3 -march=x86-64": the same fmaf chains, in the portable kernel).
# Emulated: nothing here measures speed. Skipped without aarch64-linux-gnu-gcc (Debian's
# gcc-aarch64-linux-gnu) or qemu-aarch64 (qemu-user).
cd "$(dirname "$0")/.." || exit 1
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
    echo "SKIP: ARM build: no aarch64-linux-gnu-gcc or qemu-aarch64 here"; echo "0 passed, 0 failed, 1 skipped"; exit 0
fi
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu  # the ARM C library
tmp=$(mktemp -d)
trap '[ -n "$KEEP" ] || rm -rf "$tmp"' EXIT
p=0 f=0
check() {  # check NAME CONDITION-EXIT-STATUS
    if [ "$2" -eq 0 ]; then echo "PASS: $1"; p=$((p + 1)); else echo "FAIL: $1"; f=$((f + 1)); fi
}
mkdir "$tmp/src" "$tmp/x86"
cp -r Makefile train_gpt_cpu.c test_gpt.c llmc "$tmp/src/"
cp -r Makefile train_gpt_cpu.c llmc "$tmp/x86/"
out=$(make -j2 -C "$tmp/src" CC=aarch64-linux-gnu-gcc CFLAGS=-O3 train_gpt_cpu test_gpt 2>&1)
rc=$?
echo "$out" | grep -E "error:|warning:" | head -n 5
check "make builds the trainer and test_gpt for aarch64 (NEON, -Werror)" $rc
[ $rc -eq 0 ] || { echo "$p passed, $f failed"; exit 1; }
out=$(KERNELS_ONLY=1 qemu-aarch64 "$tmp/src/test_gpt" 2>&1)
rc=$?
echo "$out" | grep -E "^FAIL"
check "aarch64 kernels equal their definitions: $(echo "$out" | tail -n 1)" $rc
make -s -C "$tmp/x86" CFLAGS="-O3 -march=x86-64" train_gpt_cpu >/dev/null
flags=(--steps 3 --batch_size 2 --total_batch 4 --seq_len 64 --pos posaug --val_every 0 --eval_len 128 --eval_n 2 --threads 2
       --train_data data/builtin/train.bin --val_data data/builtin/val.bin)
"$tmp/x86/train_gpt_cpu" "${flags[@]}" --out_dir "$tmp/x86_run" >"$tmp/x86.log" 2>&1
rc_x86=$?
qemu-aarch64 "$tmp/src/train_gpt_cpu" "${flags[@]}" --out_dir "$tmp/arm_run" >"$tmp/arm.log" 2>&1
rc_arm=$?
grep -E "step +3/3" "$tmp/arm.log" | cut -c1-60
[ $rc_x86 -eq 0 ] && [ $rc_arm -eq 0 ] && cmp "$tmp/x86_run/checkpoint.bin" "$tmp/arm_run/checkpoint.bin" &&
    cmp "$tmp/x86_run/eval_L128.csv" "$tmp/arm_run/eval_L128.csv"
check "3 steps and an evaluation on aarch64: checkpoint and evaluation file byte-identical to the x86-64 build's" $?
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
