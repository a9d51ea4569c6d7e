#!/usr/bin/env bash
# Every check that needs an NVIDIA GPU (doc/gpu_runs.md), most important first, in one
# command that fits one call of the device tool (10 minutes at most):
#
#     bash dev/gpu_check.sh $OUT              # the device tool's run: $OUT comes back
#     bash dev/gpu_check.sh [DIR [STEPS]]     # DIR default gpu_check; STEPS default abcdrehgf
#     GPU_CHECK_DRY=1 bash dev/gpu_check.sh DIR abcdefghivrRop  # make test: the plan, no GPU
#
# Seconds each took on an H200 (2026-11-26) in brackets:
#   a  build: nvidia-smi (GPU, driver, clocks), nvcc, make all cuda (CPU trainer, test_gpt,
#      both CUDA builds, dev/cuda's variants) [61-64]
#   b  ./test_gpt: GPU vs CPU on every case of its GPU_CASES table, both builds, both
#      training attention paths [37-43 alone, 87 beside c and d, with 13 cases; the 10 since
#      are small ones: the PE survey's, KERPLE's, FIRE's]
#   c  compute-sanitizer memcheck on short runs of both builds, the configurations of
#      dev/memcheck_runs.txt, which together launch every kernel of llmc/cuda (make test's
#      gpu-coverage suite checks it) [6-7 each, side by side]
#   d  --init_from on the GPU, and --eval_only adoption of a checkpoint's scheme, GPU vs CPU [51]
#   e  10M preset (w 2048) throughput: ./train_gpt (--attention naive, then flash) against
#      PyTorch eager, same GPU; then a 16K evaluation of 20 sequences, timed [29]
#   f  PosAug's wall-clock overhead on the GPU (dev/overhead.sh) [21]
#   g  make kernels-run: every dev/cuda kernel variant's validation and bandwidth [157]
#   h  10M throughput of PyTorch with torch.compile [31]
#   i  (only when named in STEPS) GPU memory of the 10M preset at micro-batch 16, naive
#      and flash attention [6]
#   v  (only when named) every dev/cuda kernel variant's validation, no benchmark: g
#      without the timings, for a rerun after a kernel fix [18]
#   r  compute-sanitizer racecheck on the shared-memory kernels through dev/cuda's
#      validation (the evaluation and flash attention, RMSNorm; both builds), and synccheck
#      on a short trainer step (both attention paths, both builds) [6-34 each; synccheck 16-18]
#   R  (only when named) r with the flash backward on CUDA cores under racecheck too [147-149]
#   o  (only when named) the CUDA trainer's host code: test_gpt's run-folder, resume,
#      bad-input and adoption tests (HOST_ONLY=1 TRAINER=./train_gpt), crash safety with
#      Ctrl-C; bit-identical resume needs a run that repeats to the bit [96-99]
#   p  (only when named) Nsight Compute: each kernel's share of two 10m training steps [15]
#
# GPU_CHECK_COMMIT names the commit in the summary where the device's copy has no .git
# (or a stale one): GPU_CHECK_COMMIT=$(git rev-parse --short HEAD), written out by hand
# in the device tool's command.
#
# Writes DIR/summary.txt (per step one line: name, exit code, seconds, key numbers; details
# indented under it) and DIR/full.log (every command with its output, in order); run
# folders go to a temporary folder under /tmp. Each command has a time limit and is cut at
# BUDGET seconds (default 560), no step starts in the last 20 s, and a failing step never
# stops the next one. b, c, d and v (nothing timed) run side by side, c's six runs too, for
# at most PAR_BUDGET seconds (default 240); the others run one after another on an idle GPU.
# A later call on a fresh machine needs "a" again (the build is not kept).
# shellcheck disable=SC2086  # flag strings ($C10M, $cfg, ...) are split on purpose
set -uo pipefail
DIR=${1:-gpu_check}
STEPS=${2:-abcdrehgf}  # run in the order a b c d v r o e h g f i p (below)
# Seconds each step took on the H200 and the H100 (2026-11-26; b, c and r estimated since: b
# gained 13 evaluation cases per build, c 10 memcheck runs, r lost the two racecheck runs of
# the flash backward on CUDA cores, 147-149 s, to step R). The dry run adds up the default
# plan (b, c, d and v side by side: the longest of them) and fails past PLAN_LIMIT, one call
# of the device tool with the build; keep these when a run measures a step.
declare -A STEP_S=([a]=80 [b]=120 [c]=45 [d]=51 [v]=18 [r]=40 [R]=150 [o]=99 [e]=29 [f]=21 [g]=157 [h]=31 [i]=6 [p]=15)
PLAN_DEFAULT=abcdrehgf PLAN_LIMIT=540
BUDGET=${BUDGET:-560}
mkdir -p "$DIR" && DIR=$(cd "$DIR" && pwd)
SELF=dev/$(basename "$0")
cd "$(dirname "$0")/.." || exit 1
SUM=$DIR/summary.txt
FULL=$DIR/full.log
: > "$SUM"
: > "$FULL"
tmp=$(mktemp -d /tmp/gpu_check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
PATH=$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer
BUILD="all cuda"  # step a's make targets: everything the later steps run

# GPU_CHECK_DRY=1 (make test's gpu-plan suite, no GPU needed): step a builds for real and
# lists what `make -n -B $BUILD` would make; every later command is checked, not run: its
# program is built by step a (or is a tracked script) and exists, the CUDA trainers accept
# its flags (they parse them before looking for a GPU), make targets exist, scripts parse.
# One PASS or FAIL line per command (children too, through DRY_LOG), then "N passed, N failed".
DRY=${GPU_CHECK_DRY:-}
if [ -n "$DRY" ] && ! command -v nvcc > /dev/null; then
    echo "SKIP: the GPU check's plan: no nvcc on this machine, so step a cannot build"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
if [ -n "$DRY" ] && [ -z "${DRY_LOG:-}" ]; then
    export DRY_LOG=$tmp/dry.log DRY_BUILT=$tmp/dry_built
    : > "$DRY_LOG"
    : > "$DRY_BUILT"
fi
dry_verdict() {  # OK TEXT: one line into DRY_LOG; returns 0 when OK is 0
    if [ "$1" = 0 ]; then echo "PASS: $2" >> "$DRY_LOG"; else echo "FAIL: $2" >> "$DRY_LOG"; fi
    return "$1"
}
# dry_check CMD...: the checks of one command (wrappers such as env, timeout,
# compute-sanitizer and ncu are looked through to the program they run)
dry_check() {
    local args=("$@") i=0 prog out what="$*"
    what=${what//$tmp/TMP}
    case ${args[0]} in
        *compute-sanitizer | ncu) command -v "${args[0]}" > /dev/null ||
            echo "note: ${args[0]##*/} is not on this machine (it is on the device image): $what" >> "$DRY_LOG" ;;
    esac
    while ((i < ${#args[@]})); do
        case ${args[i]} in ./* | python3 | make | bash | nvidia-smi | nvcc) break ;; esac
        i=$((i + 1))
    done
    prog=${args[i]:-}
    local rest=("${args[@]:i+1}")
    case $prog in
        nvidia-smi | nvcc)
            command -v "$prog" > /dev/null || echo "note: $prog is not on this machine: $what" >> "$DRY_LOG"
            return 0 ;;
        python3)
            [ "${rest[0]}" = -c ] && { dry_verdict 0 "inline Python: $what"; return; }
            [ -f "${rest[0]}" ] && python3 -m py_compile "${rest[0]}" 2> /dev/null
            dry_verdict $? "${rest[0]} exists and compiles: $what" && dry_python "${rest[@]}" ;;
        bash)
            [ -f "${rest[0]}" ] && bash -n "${rest[0]}"
            dry_verdict $? "${rest[0]} exists and parses: $what" ;;
        make)
            make -n "${rest[@]}" > /dev/null 2>&1
            dry_verdict $? "make knows the targets: $what" ;;
        ./*)
            if ! grep -qx "${prog#./}" "$DRY_BUILT"; then
                dry_verdict 1 "$prog is not built by step a (make $BUILD): $what"
            elif [ ! -x "$prog" ]; then
                dry_verdict 1 "$prog is missing (step a failed?): $what"
            elif [[ $prog == ./dev/cuda/* ]]; then  # they parse their arguments before looking for a GPU
                out=$(timeout 20 "$prog" "${rest[@]}" 2>&1)
                grep -q "no CUDA device" <<< "$out"
                dry_verdict $? "$prog accepts the arguments: $what${out:+ -> $(head -n1 <<< "$out")}"
            elif [[ $prog == ./train_gpt || $prog == ./train_gpt_fp32 ]]; then
                out=$(timeout 20 "$prog" "${rest[@]}" 2>&1)
                # parsed: it went on to look for a GPU, or for a file an earlier step writes
                grep -qE "no CUDA device found|cannot open tensor file '$tmp/" <<< "$out"
                dry_verdict $? "$prog accepts the flags: $what${out:+ -> $(head -n1 <<< "$out")}"
            else
                dry_verdict 0 "$prog is built: $what"
            fi ;;
        *) dry_verdict 1 "no program found in: $what" ;;
    esac
}

# dry_python SCRIPT ARGS...: SCRIPT imported by a Python that has its packages (PyTorch from
# make bench's .venv-bench, numpy from .venv; its deferred imports checked), and each --flag
# of ARGS in its --help; a note where no Python here has them (CI has no PyTorch)
dry_python() {
    local script=$1 py="" p a unlisted=()
    shift
    local mod
    mod=$(basename "$script" .py)
    for p in .venv-bench/bin/python .venv/bin/python; do
        [ -x "$p" ] || continue
        if "$p" -c "import sys; sys.path[:0] = ['$(dirname "$script")']; m = __import__('$mod'); \
getattr(m, 'missing', None) and m.missing.check()" > /dev/null 2>&1; then
            py=$p
            break
        fi
    done
    if [ -z "$py" ]; then
        echo "note: no Python here imports $script with its packages (make bench makes .venv-bench): not imported" >> "$DRY_LOG"
        return 0
    fi
    local help
    help=$("$py" "$script" --help 2>&1)
    for a in "$@"; do
        [[ $a == --* ]] && ! grep -qE -- "(^|[][ ,])$a([][ =,]|$)" <<< "$help" && unlisted+=("$a")
    done
    dry_verdict $((${#unlisted[@]} > 0)) "$script imports with $py and its --help lists every flag given${unlisted[*]:+ (not: ${unlisted[*]})}"
}

# run LIMIT CMD...: CMD under timeout (LIMIT seconds, cut to the budget left); its output
# goes to full.log and to $tmp/out (the last command's, for the summary); returns its status
run() {
    local limit=$1 left=$((BUDGET - SECONDS))
    shift
    ((limit > left)) && limit=$left
    echo "\$ $* (limit ${limit}s)" >> "$FULL"
    if [ -n "$DRY" ]; then
        : > "$tmp/out"
        dry_check "$@"
        return
    fi
    if ((limit < 5)); then
        echo "not run: the time budget is spent" | tee "$tmp/out" >> "$FULL"
        return 124
    fi
    local t=$SECONDS
    timeout -k 5 "$limit" "$@" 2>&1 | tee "$tmp/out" >> "$FULL"
    local rc=${PIPESTATUS[0]}
    echo "(exit $rc, $((SECONDS - t)) s)" >> "$FULL"
    return "$rc"
}
# run_to LIMIT BASE CMD...: CMD under timeout, for running in the background: the command
# line and output to BASE.log, its status to BASE.rc, its seconds to BASE.s
run_to() {
    local limit=$1 base=$2 left=$((BUDGET - SECONDS)) t=$SECONDS
    shift 2
    ((limit > left)) && limit=$left
    echo "\$ $* (limit ${limit}s)" > "$base.log"
    if [ -n "$DRY" ]; then
        dry_check "$@"
        echo $? > "$base.rc"
    elif ((limit < 5)); then
        echo "not run: the time budget is spent" >> "$base.log"
        echo 124 > "$base.rc"
    else
        timeout -k 5 "$limit" "$@" >> "$base.log" 2>&1
        echo $? > "$base.rc"
    fi
    echo $((SECONDS - t)) > "$base.s"
    echo "(exit $(cat "$base.rc"), $(cat "$base.s") s)" >> "$base.log"
}
step_start() {
    NAME=$1
    T0=$SECONDS
    : > "$tmp/detail"
    printf '\n===== %s (at %d s)\n' "$NAME" "$SECONDS" >> "$FULL"
}
# detail: stdin becomes indented lines under the step's summary line
detail() { sed 's/^/    /' >> "$tmp/detail"; }
# step_end RC TEXT: the step's summary line (also on stdout, as progress), then its details
step_end() {
    local text=$2
    [[ $1 == 124 || $1 == 137 ]] && text="time limit reached | $text"
    printf '%-22s rc %-3s %4d s  %s\n' "$NAME" "$1" $((SECONDS - T0)) "$text" | tee -a "$SUM"
    cat "$tmp/detail" >> "$SUM"
}

# random tokens for the 50K-vocab preset (as dev/bench_cpu.sh), shared by e, f and h
SHARD=$tmp/rand.bin
make_shard() {
    [ -n "$DRY" ] || [ -f "$SHARD" ] || python3 data/shards.py --random 1000000 50277 "$SHARD"
}
# the 10M preset at w 2048 with a reduced batch: 32 sequences, micro-batch 4 (the preset's)
C10M="--model 10m --vocab_size 50277 --batch_size 4 --total_batch 32"
TORCH10M="--device cuda --dtype bf16 --C 384 --L 6 --NH 6 --NKV 6 --F 1024 --T 2048 --B 4 --micro 8 --V 50277 --steps 10 --warmup_steps 2"
C_TOK_S="" FLASH_TOK_S=""  # set by e (naive and --attention flash), compared in h
# tokens/s of the JSON line bench_torch.py printed into $tmp/out, then what else it says
torch_result() {
    python3 - "$tmp/out" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith('{"impl"')]
if not lines:
    print("0 no result")
else:
    r = json.loads(lines[-1])
    print(round(r["tokens_per_s"]), "compiled" if r["compile"] else "eager", r.get("compile_error", ""),
          f"| {r.get('gpu')}, max mem {r.get('max_mem_gib')} GiB | torch {r['torch']}")
PY
}

step_a() {
    step_start "a build"
    run 20 nvidia-smi -L
    local gpu
    gpu=$(grep -m1 '^GPU' "$tmp/out" | sed 's/ (UUID.*//')
    local drv=""
    run 20 nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader &&
        drv=$(head -n1 "$tmp/out" | awk -F', ' '{print "driver " $1 ", SM clock " $2 " (max " $3 "), memory clock " $4}')
    run 20 nvcc --version
    local nvcc
    nvcc=$(grep -o 'release [0-9.]*' "$tmp/out")
    run 60 python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
    local torch_line
    torch_line=$(grep -m1 '^torch' "$tmp/out")
    run 300 make -k -j16 $BUILD  # cuda: both trainers and dev/cuda's variants, bf16 and fp32
    local rc=$? missing="" b
    if [ -n "$DRY" ]; then  # the build for real, and what it makes
        make -k -j"$(nproc)" $BUILD > "$tmp/out" 2>&1
        dry_verdict $? "step a's build: make $BUILD"
        rc=$?
        # (outside make's environment: under make test, make would name even the top folder)
        env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -n -B $BUILD 2>/dev/null | awk -v root="$PWD" '
            /Entering directory/ { d = $NF; gsub(/[`'"'"']/, "", d); d = d == root ? "" : substr(d, length(root) + 2); next }
            /Leaving directory/ { d = ""; next }
            { for (i = 1; i < NF; i++) if ($i == "-o") print (d != "" ? d "/" : "") $(i + 1) }' > "$DRY_BUILT"
        dry_verdict $((! $(grep -c . "$DRY_BUILT") > 0)) "make -n -B $BUILD lists what it builds ($(grep -c . "$DRY_BUILT") programs)"
    fi
    for b in train_gpt_cpu test_gpt train_gpt train_gpt_fp32; do [ -x "$b" ] || missing+=" $b"; done
    grep -E 'error:|\*\*\*' "$tmp/out" | head -n 20 | detail
    step_end $rc "${gpu:-no GPU listed} | ${drv:-no driver listed} | nvcc ${nvcc:-not found} | ${torch_line:-no torch}${missing:+ | missing:$missing}"
}

step_b() {
    step_start "b test_gpt"
    run 300 ./test_gpt
    local rc=$?
    grep -E '^(FAIL|SKIP)' "$tmp/out" | head -n 60 | detail
    step_end $rc "$(tail -n1 "$tmp/out") | GPU checks passed: $(grep -c '^PASS: GPU' "$tmp/out")"
}

# find_sanitizer: compute-sanitizer's path into $san, or the step ends as unavailable (1)
find_sanitizer() {
    san=$(command -v compute-sanitizer || { [ -n "$DRY" ] && echo compute-sanitizer; })
    [ -n "$san" ] && return 0
    step_end - "sanitizer unavailable: compute-sanitizer not found"
    return 1
}

# san_results BASE LABEL...: the background runs BASE1, BASE2, ... (run_to), read in order:
# each log into full.log, a detail line each (the first errors of a failing one); sets
# san_bad (runs not clean) and san_na (runs the tool itself could not handle: an internal
# error, not a verdict on the kernels); ends the step as unavailable when no run had a verdict
san_results() {
    local base=$1 i=0 rc errs label
    shift
    # the tool failing on the device or the runtime (no such text comes from the trainers)
    local unsupported='not supported|unsupported|Internal Sanitizer Error|Sanitizer.*fail'
    san_bad=0
    san_na=0
    for label in "$@"; do
        i=$((i + 1))
        cat "$base$i.log" >> "$FULL"
        rc=$(cat "$base$i.rc")
        # memcheck and synccheck end with "ERROR SUMMARY: N errors", racecheck with
        # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)": N counts both
        errs=$(grep -oE 'ERROR SUMMARY: [0-9]+|RACECHECK SUMMARY: [0-9]+' "$base$i.log" | tail -n1 | grep -oE '[0-9]+$')
        if grep -qiE "$unsupported" "$base$i.log"; then
            san_na=$((san_na + 1))
            echo "$label: no verdict, the tool failed: $(grep -m1 -iE "$unsupported" "$base$i.log")" | detail
            continue
        fi
        [ "$rc" = 0 ] && [ "$errs" = 0 ] || san_bad=$((san_bad + 1))
        echo "$label: exit $rc, ${errs:-?} errors, $(cat "$base$i.s") s" | detail
        [ "${errs:-1}" = 0 ] || grep -m6 -E '^========= ' "$base$i.log" | detail
    done
    if ((san_na == i)); then
        step_end - "sanitizer unavailable: no run had a verdict"
        return 1
    fi
}

no_verdict() { ((san_na > 0)) && echo ", $san_na without a verdict"; }  # after san_results

step_c() {
    step_start "c compute-sanitizer"
    local san san_bad
    find_sanitizer || return
    local n=0 cfg bin labels=()
    # the runs of dev/memcheck_runs.txt (together they launch every kernel of llmc/cuda:
    # dev/cuda_emu/coverage.sh) on both builds, side by side (each slow under the tool, none
    # timed), then read in order
    while IFS= read -r cfg; do
        [[ -z $cfg || $cfg == \#* ]] && continue
        for bin in ./train_gpt_fp32 ./train_gpt; do
            n=$((n + 1))
            labels+=("$bin $cfg")
            run_to 200 "$tmp/san$n" "$san" --tool memcheck --error-exitcode 9 $bin $cfg --out_dir "$tmp/san$n.d" < /dev/null &
        done
    done < dev/memcheck_runs.txt
    wait
    san_results "$tmp/san" "${labels[@]}" || return
    step_end $((san_bad + san_na > 0)) "$((n - san_bad - san_na)) of $n runs clean (exit 0, ERROR SUMMARY: 0 errors)$(no_verdict)"
}

step_R() { step_r full; }  # step r with the two slow racecheck runs (about 150 s)
step_r() {  # racecheck (shared memory hazards) and synccheck (barriers) on the attention kernels
    step_start "r racecheck+synccheck${1:+ (full)}"
    local san san_bad san_na
    find_sanitizer || return
    local short="--steps 1 --batch_size 2 --total_batch 2 --eval_len 256 --eval_n 1 --val_every 0 --gain_window 32"
    local n=0 bin att v labels=()
    # racecheck instruments every shared-memory access: over whole trainer runs it took more
    # than 100 s on an H200, and with --kernel-name it failed inside cuBLAS ("Internal
    # Sanitizer Error", 27a9a82), so it runs the trainer's shared-memory kernels through
    # dev/cuda's validation (which includes them from llmc/cuda/; no cuBLAS in these versions)
    local list=("attention_bin 2" "attention_bin 5" "attention_bin 6" "attention_bin 7" "attention_backward_bin 3"
        "attention_backward_bin 4" "attention_fp32_bin 2" "attention_fp32_bin 5" "rmsnorm_bin 1" "rmsnorm_bin 3"
        "rmsnorm_fp32_bin 1" "rmsnorm_fp32_bin 3")
    # the flash backward on CUDA cores (v2, both builds) takes 147-149 s under racecheck: step R only
    [ "${1:-}" = full ] && list+=("attention_backward_bin 2" "attention_backward_fp32_bin 2")
    for v in "${list[@]}"; do
        n=$((n + 1))
        labels+=("racecheck dev/cuda/$v (validation)")
        run_to 150 "$tmp/r$n" "$san" --tool racecheck --error-exitcode 9 ./dev/cuda/${v% *} ${v#* } --no-bench &
    done
    for bin in ./train_gpt ./train_gpt_fp32; do
        for att in flash naive; do
            n=$((n + 1))
            labels+=("synccheck $bin --attention $att")
            run_to 100 "$tmp/r$n" "$san" --tool synccheck --error-exitcode 9 $bin $short --attention $att \
                --out_dir "$tmp/r$n.d" &
        done
    done
    wait
    san_results "$tmp/r" "${labels[@]}" || return
    step_end $((san_bad + san_na > 0)) "$((n - san_bad - san_na)) of $n runs clean$(no_verdict) (racecheck on the attention and RMSNorm kernels through dev/cuda, synccheck on both trainer paths; both builds)"
}

step_o() {  # the CUDA trainer's host code: run folders, resume, bad input, Ctrl-C, crash safety
    step_start "o host code (CUDA)"
    local rc=0
    run 240 env HOST_ONLY=1 TRAINER=./train_gpt ./test_gpt || rc=1
    grep -E '^(FAIL|SKIP)' "$tmp/out" | head -n 40 | detail
    local t1
    t1=$(tail -n1 "$tmp/out")
    run 240 python3 dev/test_crash_safety.py --trainer ./train_gpt --trials 4 || rc=1
    grep -E '^(FAIL|SKIP)' "$tmp/out" | head -n 20 | detail
    step_end $rc "test_gpt HOST_ONLY with ./train_gpt: $t1 | test_crash_safety ./train_gpt: $(tail -n1 "$tmp/out")"
}

step_p() {  # Nsight Compute: each kernel's time in two training steps of the 10m preset (micro-batch 4)
    step_start "p profile 10m step"
    make_shard
    run 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv ./train_gpt --model 10m --vocab_size 50277 \
        --batch_size 4 --total_batch 4 \
        --train_data "$SHARD" --steps 2 --warmup 1 --val_every 0 --eval_len 0 --out_dir "$tmp/p"
    local rc=$?
    python3 - "$tmp/out" <<'PY' 2>&1 | detail
import collections, csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
if not rows:
    print("no ncu rows")
    sys.exit()
h = rows[0]
name, value = h.index("Kernel Name"), h.index("Metric Value")
t, c = collections.Counter(), collections.Counter()
for r in rows[1:]:
    k = r[name].split("(")[0][:60]
    t[k] += float(r[value].replace(",", ""))
    c[k] += 1
total = sum(t.values())
print(f"{sum(c.values())} kernels, {total / 1e6:.2f} ms of kernel time in 2 steps")
for k, v in t.most_common(15):
    print(f"{100 * v / total:5.1f}%  {v / 1e6:7.3f} ms  {c[k]:4d}x  {k}")
PY
    step_end $rc "$(sed -n 1p "$tmp/detail" | sed 's/^ *//')"
}

step_d() {
    step_start "d init_from+eval"
    local g=./train_gpt_fp32 d=$tmp/d bad=0
    run 120 $g --steps 20 --eval_len 0 --out_dir "$d/rope" || bad=1
    local init="--init_from $d/rope/checkpoint.bin --pe nope --qk_norm --beta2 0.999 --weight_decay 0 --steps 5 --eval_len 0"
    run 120 $g $init --out_dir "$d/drope_gpu" || bad=1
    grep -m1 '^weights from' "$tmp/out" | detail
    run 120 ./train_gpt_cpu $init --out_dir "$d/drope_cpu" || bad=1
    run 120 $g --pe learned --pos rpe --qk_norm --steps 20 --eval_len 0 --out_dir "$d/learned" || bad=1
    local ev="--eval_only --resume $d/learned/checkpoint.bin --eval_len 512 --eval_n 4 --gain_window 32"
    run 120 $g $ev --out_dir "$d/eval_gpu" || bad=1
    grep -m1 '^loaded' "$tmp/out" | detail
    run 120 ./train_gpt_cpu $ev --out_dir "$d/eval_cpu" || bad=1
    if [ -n "$DRY" ]; then  # the CPU side for real, on checkpoints the CPU trainer makes in place of the GPU's
        local r=0
        ./train_gpt_cpu --steps 20 --eval_len 0 --out_dir "$d/rope" > "$tmp/dry_d" 2>&1 &&
            ./train_gpt_cpu $init --out_dir "$d/drope_cpu" >> "$tmp/dry_d" 2>&1 &&
            ./train_gpt_cpu --pe learned --pos rpe --qk_norm --steps 20 --eval_len 0 --out_dir "$d/learned" >> "$tmp/dry_d" 2>&1 &&
            ./train_gpt_cpu $ev --out_dir "$d/eval_cpu" >> "$tmp/dry_d" 2>&1 || r=1
        local why=""
        ((r)) && why=": $(tail -n1 "$tmp/dry_d")"
        dry_verdict $r "step d's CPU commands run (on CPU-made checkpoints)$why"
    fi
    local cmp
    cmp=$(python3 - "$d" <<'PY' 2>&1
import csv, json, sys
d = sys.argv[1]
short, out = [], []
try:
    g = [json.loads(l)["loss"] for l in open(f"{d}/drope_gpu/log.jsonl")]
    c = [json.loads(l)["loss"] for l in open(f"{d}/drope_cpu/log.jsonl")]
    diff = max(abs(a - b) for a, b in zip(g, c))
    short.append(f"init_from max |dloss| GPU-CPU {diff:.2e}")
    out.append(f"init_from, 5 steps: GPU loss {g[0]:.4f} -> {g[-1]:.4f}, max |GPU - CPU| {diff:.2e}")
except (OSError, ValueError, KeyError, IndexError) as e:
    short.append("init_from: no comparison")
    out.append(f"init_from: no comparison ({type(e).__name__}: {e})")
try:
    rows = {k: list(csv.DictReader(open(f"{d}/eval_{k}/eval_L512.csv"))) for k in ("gpu", "cpu")}
    meta = {k: json.load(open(f"{d}/eval_{k}/eval_L512.json")) for k in ("gpu", "cpu")}
    diff = {col: max(abs(float(a[col]) - float(b[col])) for a, b in zip(rows["gpu"], rows["cpu"]))
            for col in rows["gpu"][0] if col != "position"}
    m = meta["gpu"]
    short.append(f"eval loss column max |GPU-CPU| {diff['loss']:.2e}")
    out.append(f"eval adoption: the GPU evaluated --pe {m['pe']} --pos {m['pos_scheme']} qk_norm {m['qk_norm']}, "
               f"{len(rows['gpu'])} rows; max |GPU - CPU|: " + ", ".join(f"{k} {v:.2e}" for k, v in diff.items())
               + f"; in_dist {m['in_dist']:.4f} (CPU {meta['cpu']['in_dist']:.4f})")
except (OSError, ValueError, KeyError, IndexError) as e:
    short.append("eval: no comparison")
    out.append(f"eval adoption: no comparison ({type(e).__name__}: {e})")
print(" | ".join(short))
print("\n".join(out))
PY
)
    echo "$cmp" | tail -n +2 | detail
    step_end $bad "$(echo "$cmp" | head -n1)"
}

# median tokens/s and MFU (%) of steps 3.. of a run's log.jsonl: "TOK MFU"
c_rate() {
    python3 - "$1" <<'PY' 2>/dev/null
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])][2:]
mfu = [100 * r["mfu"] for r in rows if "mfu" in r]
print(round(statistics.median(r["tok_s"] for r in rows)), f"{statistics.median(mfu):.2f}" if mfu else "n/a")
PY
}

step_e() {
    step_start "e 10m C vs PyTorch"
    make_shard
    local train="$C10M --train_data $SHARD --steps 12 --warmup 2 --val_every 0 --eval_len 0"
    run 150 ./train_gpt $train --out_dir "$tmp/e_c"
    local rc=$? c f
    grep -E '^device|^--pe|GPU memory' "$tmp/out" | detail
    c=$(c_rate "$tmp/e_c/log.jsonl")
    C_TOK_S=${c%% *}
    local mfu=${c##* }
    run 150 ./train_gpt $train --attention flash --out_dir "$tmp/e_flash" || rc=1
    grep -E 'GPU memory' "$tmp/out" | sed 's/^/--attention flash: /' | detail
    f=$(c_rate "$tmp/e_flash/log.jsonl")
    FLASH_TOK_S=${f%% *}
    echo "--attention flash: ${f%% *} tok/s, MFU ${f##* }% (naive: $C_TOK_S tok/s)" | detail
    local t0=$SECONDS ev=""  # the issue's evaluation target: 20 sequences of 16K in under 10 s
    if run 150 ./train_gpt --eval_only --resume "$tmp/e_c/checkpoint.bin" --val_data "$SHARD" --eval_len 16384 \
        --eval_n 20 --gain_window 0 --out_dir "$tmp/e_c"; then
        ev="16K evaluation of 20 sequences $((SECONDS - t0)) s (process included)"
    else
        ev="16K evaluation failed"
        rc=1
    fi
    echo "$ev" | detail
    run 150 python3 dev/bench_torch.py $TORCH10M || rc=1
    local t
    t=$(torch_result)
    local t_tok=${t%% *}
    t_tok=${t_tok:-0}
    echo "PyTorch: $t" | detail
    step_end $rc "$ev | C ${C_TOK_S:-?} tok/s (MFU ${mfu:-?}%), flash ${f%% *} tok/s (MFU ${f##* }%) | PyTorch eager bf16 $t_tok tok/s | C / PyTorch $(python3 -c "print(f'{${C_TOK_S:-0} / max(1, $t_tok):.2f}')")"
}

step_f() {
    step_start "f PosAug overhead"
    make_shard
    run 240 env TRAINER=./train_gpt STEPS=10 bash dev/overhead.sh --model 10m --total_batch 32 \
        --train_data "$SHARD" --val_data "$SHARD" --vocab_size 50277
    local rc=$?
    step_end $rc "$(grep -m1 '^wall clock' "$tmp/out" || tail -n1 "$tmp/out")"
}

step_g() {
    step_start "g kernels-run"
    run 300 make -k kernels-run  # -k: the fp32 variants run even when a bf16 one fails
    local rc=$?
    grep -E "^== |^device:|^ceiling:| v[0-9]+: (PASS|FAIL|SKIPPED)|version\(s\) FAILED|of measured|^error" "$tmp/out" | detail
    step_end $rc "$(verdicts)"
}

# the PASS / FAIL / SKIPPED verdict lines of dev/cuda's binaries in $tmp/out, counted
verdicts() {
    local v n=""
    for v in PASS FAIL SKIPPED; do n+="$(grep -cE " v[0-9]+: $v" "$tmp/out") $v, "; done
    echo "versions: ${n%, } (bf16 and fp32 builds)"
}

step_v() {
    step_start "v kernels validate"
    run 200 make -k -C dev/cuda validate
    local rc=$?
    grep -E "^== | v[0-9]+: (PASS|FAIL|SKIPPED)|version\(s\) FAILED| BAD$|worst element|^error" "$tmp/out" | detail
    step_end $rc "$(verdicts)"
}

step_h() {
    step_start "h 10m PyTorch compile"
    run 280 python3 dev/bench_torch.py $TORCH10M --compile
    local rc=$? t
    t=$(torch_result)
    local t_tok=${t%% *}
    t_tok=${t_tok:-0}
    echo "PyTorch: $t" | detail
    step_end $rc "PyTorch bf16 $t_tok tok/s${C_TOK_S:+ | C / PyTorch $(python3 -c "print(f'{$C_TOK_S / max(1, $t_tok):.2f}')")}${FLASH_TOK_S:+ | C flash / PyTorch $(python3 -c "print(f'{$FLASH_TOK_S / max(1, $t_tok):.2f}')")}"
}

step_i() {  # not in the default STEPS: GPU memory at micro-batch 16, both attention paths
    step_start "i memory at B 16"
    make_shard
    local a rc=0 mem=""
    for a in naive flash; do
        run 150 ./train_gpt --model 10m --vocab_size 50277 --batch_size 16 --total_batch 32 --train_data "$SHARD" \
            --steps 3 --warmup 1 --val_every 0 --eval_len 0 --attention $a --out_dir "$tmp/i_$a" || rc=1
        mem+=" | $a: $(grep -m1 'GPU memory in use' "$tmp/out" || echo 'no memory line')"
    done
    step_end $rc "micro-batch 16${mem}"
}

# the correctness steps b, c, d and v time nothing: they run side by side, each as a child
# invocation with its own folder, at most PAR_BUDGET seconds (default 240); their summaries
# and logs are then appended in order, before the timed steps start on an idle GPU
run_side_by_side() {
    local steps=$1 s limit=$((BUDGET - SECONDS - 20))
    ((limit > ${PAR_BUDGET:-240})) && limit=${PAR_BUDGET:-240}
    for ((i = 0; i < ${#steps}; i++)); do
        s=${steps:i:1}
        GPU_CHECK_CHILD=1 BUDGET=$limit bash "$SELF" "$tmp/par_$s" "$s" > /dev/null 2>&1 &
    done
    wait
    for ((i = 0; i < ${#steps}; i++)); do
        s=${steps:i:1}
        if [ -s "$tmp/par_$s/summary.txt" ]; then
            tail -n +2 "$tmp/par_$s/summary.txt" | grep -v '^total ' | tee -a "$SUM"
            cat "$tmp/par_$s/full.log" >> "$FULL"
        else
            echo "$s: the child invocation wrote no summary" | tee -a "$SUM"
        fi
    done
}

echo "gpu_check $(date -u '+%Y-%m-%d %H:%M UTC') | commit ${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} | steps $STEPS | budget $BUDGET s" | tee -a "$SUM"
par=""
if [ -z "${GPU_CHECK_CHILD:-}" ]; then
    for s in b c d v; do [[ $STEPS == *$s* ]] && par+=$s; done
fi
cut=""
# r after the side-by-side ones (racecheck starves them); the speed rows (e, h) before g and f
for s in a b c d v r R o e h g f i p; do
    [[ $STEPS == *$s* ]] || continue
    if [ -z "$DRY" ] && ((BUDGET - SECONDS < 20)); then  # the dry run times nothing: STEP_S is its budget
        echo "$s: FAILED, not started: the time budget ($BUDGET s) is spent" | tee -a "$SUM"
        cut+=$s
        continue
    fi
    if [[ -n $par && $par == *$s* ]]; then
        [[ $s == "${par:0:1}" ]] && run_side_by_side "$par"
        continue
    fi
    "step_$s"
done
echo "total $SECONDS s" >> "$SUM"
[ -n "$cut" ] && echo "FAILED: steps $cut cut by the budget" | tee -a "$SUM"
if [ -n "$DRY" ]; then
    [ -n "${GPU_CHECK_CHILD:-}" ] && exit 0
    # the default plan's time, from STEP_S: one call of the device tool must hold it
    est=0 par_s=0
    for ((i = 0; i < ${#PLAN_DEFAULT}; i++)); do
        s=${PLAN_DEFAULT:i:1}
        if [[ bcdv == *$s* ]]; then ((STEP_S[$s] > par_s)) && par_s=${STEP_S[$s]}; else est=$((est + STEP_S[$s])); fi
    done
    est=$((est + par_s))
    dry_verdict $((est > PLAN_LIMIT)) "the default plan ($PLAN_DEFAULT) takes about $est s by STEP_S, at most $PLAN_LIMIT"
    cat "$DRY_LOG"
    echo "$(grep -c '^PASS' "$DRY_LOG") passed, $(grep -c '^FAIL' "$DRY_LOG") failed"
    ! grep -q '^FAIL' "$DRY_LOG"
    exit
fi
echo
cat "$SUM"
[ -z "$cut" ]
