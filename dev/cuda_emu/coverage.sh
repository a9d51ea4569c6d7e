#!/usr/bin/env bash
# Which kernels the GPU checks launch: the GPU trainer compiled for the CPU emulation in
# trace mode (EMU_TRACE: each launch records its kernel's name and runs nothing, nor does
# cuBLAS). Fails naming
#   - each __global__ of llmc/cuda that no run of dev/memcheck_runs.txt (compute-sanitizer's
#     memcheck runs) launches, on both builds: a kernel needs a memcheck run that reaches it;
#   - each kernel variant (<name>_v<N>) the trainer picks, in a memcheck run or at a preset's
#     model (one layer, both attention paths), that no GPU-vs-CPU case of test_gpt (its model
#     as ./test_gpt --list gives it, both attention paths) launches in that build: a variant
#     needs a case at a shape that picks it;
#   - each run whose log.jsonl names other variants than its trace launched (the trainer's
#     report, llmc/cuda/variants.cuh: a family's kernels carry its name's words).
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
: > "$table"
# trace ID FLAGS...: both builds of the emulated trainer on FLAGS in trace mode; each launch
# into the table as "kernel ID-build"; FAIL lines for a run that does not finish
trace() {
    local id=$1 build out trace
    shift
    for build in fp32 bf16; do
        trace=$tmp/trace_${id}_$build.txt
        out=$tmp/run_${id}-$build
        : > "$trace"
        if EMU_TRACE=$trace timeout 300 "$tmp/emu_$build" "$@" --out_dir "$out" < /dev/null > "$out.log" 2>&1; then
            sort -u "$trace" | sed "s/\$/ $id-$build/" >> "$table"
            traced=$((traced + 1))
        else
            echo "FAIL: $id ($build) does not run in trace mode: $*"
            tail -n 5 "$out.log" | sed 's/^/    /'
            fail=$((fail + 1))
        fi
    done
}
n=0 traced=0
while IFS= read -r line; do
    [[ -z $line || $line == \#* ]] && continue
    n=$((n + 1))
    # shellcheck disable=SC2086  # the line's flags, split on purpose
    trace "run$n" $line
done < dev/memcheck_runs.txt
echo "PASS: $traced memcheck runs traced (dev/memcheck_runs.txt, fp32 and bf16 builds)"
pass=$((pass + 1))
one_step="--steps 1 --warmup 0 --val_every 0 --eval_len 0"
traced=0
for preset in $("$tmp/emu_fp32" --help | awk '/^presets:/ { p = 1; next } p && NF { print $1 }'); do
    for att in naive flash; do  # (a GRU has no attention: both runs the same)
        trace "pick-$preset-$att" --model "$preset" --n_layer 1 --seq_len 64 --batch_size 1 --total_batch 1 --attention $att $one_step
    done
done
echo "PASS: $traced runs of the presets' models traced (one layer, T 64, both attention paths and builds)"
pass=$((pass + 1))
traced=0
while IFS='|' read -r label _ paths flags; do
    k=${label#gpu case }
    k=${k%%:*}
    for att in naive flash; do
        [[ $att == flash && $paths != *"naive and flash"* ]] && continue  # flash refuses the case's encoding
        # shellcheck disable=SC2086  # the case's flags, split on purpose
        trace "case$k-$att" $flags --attention $att $one_step
    done
done < <(./test_gpt --list | grep -E '^gpu case [0-9]+: .*--arch')
echo "PASS: $traced runs of test_gpt's GPU cases traced (their models as ./test_gpt --list gives them)"
pass=$((pass + 1))
# a family's variants (<name>_v<N>, chosen by its header's constant; dev/cuda and the
# emulator's kernel test check each) count as one kernel: a run must launch one of them
family() { sed -E 's/_v[0-9]+$/_v*/' | sort -u; }
sed -nE 's/^__global__ void (__launch_bounds__\([A-Z_0-9]*\) )?([A-Za-z_0-9]+)\(.*/\2/p' llmc/cuda/*.cuh | family > "$tmp/kernels.txt"
grep -E ' run[0-9]+-(fp32|bf16)$' "$table" | cut -d' ' -f1 | family > "$tmp/launched.txt"
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
# the variants: what the trainer picks (memcheck and preset runs) against what the GPU cases
# reach, per build; and each run's log.jsonl against its trace
python3 - "$table" "$tmp" llmc/cuda/variants.cuh "$tmp/kernels.txt" > "$tmp/variants.txt" <<'PY'
import collections, glob, json, os, re, sys
table, tmp, header, kernels = sys.argv[1:5]
runs = collections.defaultdict(set)  # "ID-build" -> the variant kernels it launched
for line in open(table):
    kernel, run = line.split()
    if re.search(r"_v\d+$", kernel):
        runs[run].add(kernel)
covered, picked = collections.defaultdict(set), collections.defaultdict(dict)  # by build
for run, ks in sorted(runs.items()):
    what, b = run.rsplit("-", 1)
    for k in ks:
        if run.startswith("case"):
            covered[b].add(k)
        else:
            picked[b].setdefault(k, what)  # the first run that picks it
for b in sorted(picked):
    missing = [(k, run) for k, run in sorted(picked[b].items()) if k not in covered[b]]
    for k, run in missing:
        print(f"FAIL: {k} ({b} build), which the trainer picks in {run}, is reached by no GPU case of test_gpt: "
              "add a case at a shape that picks it to GPU_CASES")
    if not missing:
        print(f"PASS: each of the {len(picked[b])} kernel variants the {b} build picks is reached by a GPU case of test_gpt")
# each run's log.jsonl against its trace: family f's kernels carry the words of its name
families = re.findall(r'"([a-z_]+)"', re.search(r"VariantUse u\[VF_N\] = \{(.*?)\};", open(header).read(), re.S).group(1))
def family(kernel):
    words = set(kernel.split("_"))
    return next((f for f in families if set(f.split("_")) <= words), "no family (" + kernel + ")")
# the families whose variants are kernels of their own (<name>_v<N>), which a trace tells
# apart; the others (the classifier: one kernel, v2 in chunks of rows) are left out here
traced = {family(k[:-3]) for k in open(kernels).read().split() if k.endswith("_v*")}
wrong = 0
for log in sorted(glob.glob(os.path.join(tmp, "run_*", "log.jsonl"))):
    run = os.path.basename(os.path.dirname(log))[4:]
    logged = {(f, v) for f, vs in json.loads(open(log).readline()).get("variants", {}).items() for v in vs if f in traced}
    launched = {(family(k[:k.rindex("_v")]), int(k[k.rindex("_v") + 2:])) for k in runs[run]}
    # the startup line: "kernel variants: flash forward v2 | ... | rope v2 (not v3: why) | ..."
    start = [l for l in open(os.path.join(tmp, "run_" + run + ".log")) if l.startswith("kernel variants: ")]
    entries = [re.match(r"([a-z ]+) v(\d+)", e) for e in start[0].split(": ", 1)[1].split(" | ")] if start else []
    planned = {(m.group(1).replace(" ", "_"), int(m.group(2))) for m in entries if m}
    planned = {(f, v) for f, v in planned if f in traced}
    if not launched == logged == planned:
        print(f"FAIL: {run}: its trace launched the variants {sorted(launched)}, log.jsonl names {sorted(logged)}, "
              f"its startup line {sorted(planned)}")
        wrong += 1
if not wrong:
    print(f"PASS: the log.jsonl and the startup line of every traced run name the variants its trace launched "
          f"({len(traced)} families: {', '.join(sorted(traced))})")
PY
grep -E '^(PASS|FAIL)' "$tmp/variants.txt"
pass=$((pass + $(grep -c '^PASS' "$tmp/variants.txt"))) fail=$((fail + $(grep -c '^FAIL' "$tmp/variants.txt")))
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ]
