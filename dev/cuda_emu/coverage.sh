#!/usr/bin/env bash
# Which kernels compute-sanitizer's memcheck runs launch: the GPU trainer compiled for the
# CPU emulation in trace mode (EMU_TRACE: each launch records its kernel's name and runs
# nothing, nor does cuBLAS), every run of dev/memcheck_runs.txt on both builds. Fails
# naming each __global__ of llmc/cuda that no run launches, so a kernel cannot be added
# without a memcheck run that reaches it.
#   bash dev/cuda_emu/coverage.sh [OUT]   OUT: the table of kernels by run (default: not kept)
# Ends with "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
table=${1:-$tmp/coverage.txt}
mkdir -p "$tmp/stub"
for h in cuda_runtime.h cuda_bf16.h cublas_v2.h mma.h; do echo "#include \"$PWD/dev/cuda_emu/runtime.h\"" > "$tmp/stub/$h"; done
python3 dev/cuda_emu/transform.py train_gpt.cu > "$tmp/train_gpt_emu.cpp" 2> "$tmp/transform.log" || {
    cat "$tmp/transform.log"; echo "FAIL: transform.py on train_gpt.cu"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
pass=0 fail=0
for build in fp32 bf16; do
    flag=""
    [ "$build" = fp32 ] && flag=-DENABLE_FP32
    (g++ -std=c++20 -O0 $flag -w -I"$tmp/stub" -I. -o "$tmp/emu_$build" "$tmp/train_gpt_emu.cpp" -pthread 2> "$tmp/cc_$build.log";
     echo $? > "$tmp/cc_$build.rc") &
done
wait
for build in fp32 bf16; do
    if [ "$(cat "$tmp/cc_$build.rc")" != 0 ]; then
        head -n 20 "$tmp/cc_$build.log"
        echo "FAIL: train_gpt.cu ($build build) does not build for the CPU emulation"
        echo "0 passed, 1 failed, 0 skipped"
        exit 1
    fi
done
n=0
: > "$table"
while IFS= read -r line; do
    [[ -z $line || $line == \#* ]] && continue
    n=$((n + 1))
    for build in fp32 bf16; do
        trace=$tmp/trace_${n}_$build.txt
        : > "$trace"
        # shellcheck disable=SC2086  # the line's flags, split on purpose
        if EMU_TRACE=$trace timeout 300 "$tmp/emu_$build" $line --out_dir "$tmp/run_${n}_$build" < /dev/null > "$tmp/run.log" 2>&1; then
            k=$(sort -u "$trace" | grep -c .)
            echo "PASS: memcheck run $n ($build) traced: $k kernels: $line"
            pass=$((pass + 1))
            sort -u "$trace" | sed "s/\$/ run$n-$build/" >> "$table"
        else
            echo "FAIL: memcheck run $n ($build) does not run in trace mode: $line"
            tail -n 5 "$tmp/run.log" | sed 's/^/    /'
            fail=$((fail + 1))
        fi
    done
done < dev/memcheck_runs.txt
# a family's variants (<name>_v<N>, chosen by its header's constant; dev/cuda and the
# emulator's kernel test check each) count as one kernel: a run must launch one of them
family() { sed -E 's/_v[0-9]+$/_v*/' | sort -u; }
sed -nE 's/^__global__ void (__launch_bounds__\([A-Z_0-9]*\) )?([A-Za-z_0-9]+)\(.*/\2/p' llmc/cuda/*.cuh | family > "$tmp/kernels.txt"
cut -d' ' -f1 "$table" | family > "$tmp/launched.txt"
missing=$(comm -23 "$tmp/kernels.txt" "$tmp/launched.txt")
if [ -n "$missing" ]; then
    for k in $missing; do
        echo "FAIL: $k ($(grep -lE "__global__ void.* ${k/\*/[0-9]+}\(" llmc/cuda/*.cuh | head -n1)) is launched by no memcheck run: add a run that reaches it to dev/memcheck_runs.txt"
        fail=$((fail + 1))
    done
else
    echo "PASS: every one of the $(grep -c . "$tmp/kernels.txt") __global__ in llmc/cuda (a family of variants counted once) is launched by a memcheck run"
    pass=$((pass + 1))
fi
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ]
