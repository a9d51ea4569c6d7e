#!/usr/bin/env bash
# make bench: the CPU trainer against the machine's limit and against PyTorch, in one run
# on the same cores (THREADS, default 2):
#   1. the FP32 FMA peak (dev/peak_flops.c, the widest vectors the build uses);
#   2. the GEMM alone (dev/bench_gemm.c): the LM-head products of the 10m case and a
#      square 1024 product, in GFLOP/s and % of peak;
#   3. training, tiny and 10m shapes: tokens/s, GFLOP/s (model FLOPs per token as the
#      trainer prints them: llmc/trainloop.h's model_flops_per_token) and % of peak, beside
#      the same model in PyTorch (dev/bench_torch.py, eager and torch.compile); the three
#      interleaved REPEATS times (default 3), each at its best run;
#   4. with CALLGRIND=1: instructions per token of the tiny case (valgrind's callgrind, on
#      an AVX2 build: valgrind cannot run AVX-512 code; one thread, as OpenMP's spin-waiting
#      would be counted). Slow: more than 10 minutes under valgrind.
# PyTorch comes from a project-local .venv-bench (dev/requirements-bench.txt), made on the
# first run (a large download); without it the PyTorch columns say n/a.
# SMOKE=1 (make test's bench-smoke suite): no PyTorch, 3 steps, one round, and a check that
# every line came out; the numbers mean nothing then.
# MARCH=x86-64-v3: the laptops' instruction set (AVX2 + FMA, no AVX-512) on this machine: the
# peak probe, the GEMM and a trainer built for it, against PyTorch held to AVX2 as well
# (ATEN_CPU_CAPABILITY, which torch.compile also follows; MKL_ENABLE_INSTRUCTIONS; ONEDNN_MAX_CPU_ISA).
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-12}
REPEATS=${REPEATS:-3}
SMOKE=${SMOKE:-0}
MARCH=${MARCH:-native}
case "$MARCH" in
    native) ;;
    x86-64-v3) export ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ;;
    *) echo "error: MARCH=$MARCH: make bench takes native (the default) or x86-64-v3 (AVX2, as on most laptops)" >&2; exit 2 ;;
esac
if [ "$MARCH" = x86-64-v3 ] && ! { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; } 2>/dev/null; then
    echo "this CPU has no AVX2 + FMA: MARCH=x86-64-v3 cannot run here"
    if [ "$SMOKE" = 1 ]; then echo "SKIP: make bench with MARCH=x86-64-v3"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
    exit 1
fi
if [ "$SMOKE" = 1 ]; then STEPS=3 REPEATS=1; fi
if [ "$SMOKE" = 1 ] && [ -z "${BENCH_INNER:-}" ]; then  # run once, then check its lines
    out=$(BENCH_INNER=1 bash "$0" 2>&1)
    rc=$?
    echo "$out"
    p=0 f=0
    check() {  # check NAME REGEX: a line of the output matches
        if [ $rc -eq 0 ] && echo "$out" | grep -qE "$2"; then echo "PASS: $1"; p=$((p + 1)); else echo "FAIL: $1"; f=$((f + 1)); fi
    }
    check "the peak probe" '^peak: .* [0-9.]+ GFLOP/s'
    for g in 'logits = x wte' 'dx = dlogits wte' 'dwte \+= dlogits' '^square ' 'the tiny model|one micro-batch'; do
        check "GEMM line: $g" "$g.*[0-9.]+ GFLOP/s .*% of peak"
    done
    for m in tiny 10m; do check "trainer line: $m" "^$m .*\| C +[1-9][0-9]* tok/s"; done
    echo "$p passed, $f failed"
    exit $((f > 0))
fi
CFLAGS="-O3 -march=$MARCH -std=c11 -ffp-contract=off -fopenmp -Wall -Wextra -Werror"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

PY=.venv-bench/bin/python
if [ "$SMOKE" = 1 ]; then
    PY=""
elif ! [ -x $PY ] || ! cmp -s dev/requirements-bench.txt .venv-bench/requirements.txt; then
    echo "setting up .venv-bench (PyTorch, once; the Makefile's venv-bench, shared with make reference)..."
    if ! make -s venv-bench; then
        rm -rf .venv-bench
        echo "note: could not install PyTorch: the PyTorch columns say n/a"
    fi
fi
[ -n "$PY" ] && [ -x "$PY" ] || PY=""

gcc $CFLAGS dev/peak_flops.c -o "$tmp/peak_flops"
gcc $CFLAGS -I. dev/bench_gemm.c -o "$tmp/bench_gemm" -lm
TRAIN=./train_gpt_cpu  # make's build (-march=native)
if [ "$MARCH" != native ]; then TRAIN=$tmp/train_gpt_cpu; gcc $CFLAGS -o "$TRAIN" train_gpt_cpu.c -lm; fi
python3 data/shards.py --random 400000 50277 "$tmp/rand.bin" >/dev/null  # the 10m case's 50K vocab

peak_line=$("$tmp/peak_flops" "$THREADS")
peak=$(echo "$peak_line" | sed -E 's/.* ([0-9.]+) GFLOP\/s.*/\1/')
source dev/cpu_machine.sh
isa=""
[ "$MARCH" != native ] && isa=", built with -march=$MARCH (PyTorch held to AVX2 too)"
echo "CPU benchmark at commit $(git rev-parse --short HEAD), $THREADS threads, $(cpu_machine)$isa"
echo "$peak_line"
echo
"$tmp/bench_gemm" "$peak" "$THREADS"
echo

# median tokens/s of steps 3.. of a C run's log
c_tok_s() {
    python3 - "$1/log.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(round(statistics.median(r["tok_s"] for r in rows[2:])))
PY
}

torch_tok_s() {  # bench_torch.py's tokens/s, or 0
    [ -n "$PY" ] || { echo 0; return; }
    $PY dev/bench_torch.py "$@" --threads "$THREADS" --steps $((STEPS - 2)) 2>/dev/null |
        python3 -c "import json, sys; print(round(json.loads(sys.stdin.readlines()[-1])['tokens_per_s']))" || echo 0
}

# A case: C, PyTorch eager and compiled, interleaved REPEATS times (default 3), each
# reported at its best run. This 2-core machine swings by up to 1.5x between minutes (other
# tenants), so one run of each would compare different machines; the best of interleaved
# runs compares the same one.
run_case() {
    local name=$1 cargs=$2 targs=$3
    local mflop c=0 eager=0 comp=0 r t runs=""
    for ((r = 1; r <= REPEATS; r++)); do
        "$TRAIN" $cargs --steps "$STEPS" --warmup 2 --val_every 0 --eval_len 0 --threads "$THREADS" \
            --out_dir "$tmp/$name$r" > "$tmp/$name.out"
        t=$(c_tok_s "$tmp/$name$r"); ((t > c)) && c=$t; runs+=" C $t"
        t=$(torch_tok_s $targs); ((t > eager)) && eager=$t; runs+=" eager $t"
        t=$(torch_tok_s $targs --compile); ((t > comp)) && comp=$t; runs+=" compiled $t"
    done
    mflop=$(grep -oE '[0-9.]+ MFLOP per token' "$tmp/$name.out" | cut -d' ' -f1)
    python3 - "$name" "$mflop" "$peak" "$c" "$eager" "$comp" <<'PY'
import sys
name, mflop, peak, c, eager, comp = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), *map(int, sys.argv[4:])
g = lambda t: t * mflop / 1e3
best = max(eager, comp)
ratio = f"{c / best:.2f}x" if best else "n/a"
na = lambda t: f"{t:>7} tok/s ({g(t):5.1f} GFLOP/s)" if t else "    n/a"
print(f"{name:<8} {mflop:6.1f} MFLOP/token | C {c:>7} tok/s = {g(c):6.1f} GFLOP/s = {100 * g(c) / peak:4.1f}% of peak"
      f" | PyTorch eager {na(eager)} | compiled {na(comp)} | C / best PyTorch {ratio}")
PY
    echo "  runs in order (tok/s):$runs"
}

run_case tiny "" "--C 128 --L 4 --NH 4 --NKV 2 --F 384 --T 128 --B 16 --V 257 --alpha 4"
run_case 10m "--model 10m --seq_len 256 --batch_size 8 --total_batch 8 --vocab_size 50277 --train_data $tmp/rand.bin --val_data $tmp/rand.bin --pos fixed --alpha 4" \
    "--C 384 --L 6 --NH 6 --NKV 6 --F 1024 --T 256 --B 8 --V 50277 --alpha 4"

if [ "${CALLGRIND:-0}" = 1 ] && command -v valgrind >/dev/null; then
    gcc ${CFLAGS/-march=$MARCH/-march=x86-64-v3} -o "$tmp/train_avx2" train_gpt_cpu.c -lm
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$tmp/train_avx2" --steps 3 --warmup 2 --val_every 0 \
        --eval_len 0 --threads 1 --out_dir "$tmp/cg" >/dev/null 2>"$tmp/cg.log"
    ir=$(grep -oE 'Collected : [0-9]+' "$tmp/cg.log" | grep -oE '[0-9]+')
    python3 -c "print(f'tiny, AVX2 build under callgrind: {$ir / (3 * 16 * 128):,.0f} instructions per token (one thread, 3 steps of 2048 tokens, init included)')"
fi
