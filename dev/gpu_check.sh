#!/usr/bin/env bash
# Every check that needs an NVIDIA GPU (doc/gpu_runs.md), most important first, in one
# command that fits one call of the device tool (10 minutes at most):
#
#     bash dev/gpu_check.sh $OUT              # the device tool's run: $OUT comes back
#     bash dev/gpu_check.sh [DIR [STEPS]]     # DIR default gpu_check; STEPS default PLAN_DEFAULT
#     GPU_CHECK_DRY=1 bash dev/gpu_check.sh DIR abcdefghivrRop  # make test: the plan, no GPU
#
# The steps (STEP_NAME below; their seconds, measured or estimated, in STEP_S):
#   a  build: nvidia-smi (GPU, driver, clocks), nvcc, make all cuda (CPU trainer, test_gpt,
#      both CUDA builds, dev/cuda's variants)
#   b  ./test_gpt --only gpu: GPU vs CPU on every case of its GPU_CASES table (./test_gpt
#      --list shows them), both builds, both training attention paths; the evaluation GPU vs
#      CPU for every --pe
#   c  compute-sanitizer memcheck on short runs of both builds, the configurations of
#      dev/memcheck_runs.txt, which together launch every kernel of llmc/cuda (make test's
#      gpu-coverage suite checks it)
#   d  --init_from on the GPU, and --eval_only adoption of a checkpoint's scheme, GPU vs CPU
#   v  every dev/cuda kernel variant's validation, no benchmark
#   r  compute-sanitizer racecheck on the shared-memory kernels through dev/cuda's
#      validation (the evaluation and flash attention, RMSNorm; both builds), and synccheck
#      on a short trainer step (both attention paths, both builds)
#   R  (only when named) r with the flash backward on CUDA cores under racecheck too
#   o  (only when named) the CUDA trainer's host code: test_gpt's run-folder, resume,
#      bad-input and adoption tests (HOST_ONLY=1 TRAINER=./train_gpt), crash safety with
#      Ctrl-C; bit-identical resume needs a run that repeats to the bit
#   e  the speed row: 10M preset (w 2048) throughput of ./train_gpt (--attention naive, then
#      flash) against PyTorch eager on the same GPU, each with the kernel variants it ran;
#      a 16K evaluation of 20 sequences, timed; the flash kernels' TFLOP/s (dev/cuda
#      attention and attention_backward, every version, the variant each ran beside it)
#   h  (only when named) 10M throughput of PyTorch with torch.compile
#   g  (only when named) make kernels-run: every dev/cuda kernel variant's validation and
#      bandwidth, both builds
#   f  (only when named) PosAug's wall-clock overhead on the GPU (dev/overhead.sh)
#   i  (only when named) GPU memory of the 10M preset at micro-batch 16, naive and flash
#   p  Nsight Compute: each kernel's share of two 10m training steps with --attention
#      flash, and the variants they ran
#
# GPU_CHECK_COMMIT names the commit in the summary where the device's copy has no .git
# (or a stale one): GPU_CHECK_COMMIT=$(git rev-parse --short HEAD), written out by hand
# in the device tool's command.
#
# Every step writes as it runs: DIR/<letter>.log (each command with its output; a step's
# background runs in DIR/<letter>.runs/), and DIR/summary.txt gets the step's lines the
# moment it ends (its name, exit code, seconds and key numbers, details indented), so a
# call cut at any second leaves every finished step's result. A step fails when a command
# fails, when its sanitizer or profiler is missing, or when a sanitizer run has no verdict;
# its summary then says "FAILED <step>: <command> (exit N); log DIR/<letter>.log", the
# summary's last line "FAILED: steps ...", and the script exits 1 (0 when every step
# passed; 2 on bad input, refused before anything runs). Each command has a time limit and
# is cut at BUDGET seconds (default 540), no step starts in the last 20 s (a step not
# started is a failure), and a failing step never stops the next. b, c, d and v (nothing
# timed) run side by side, c's runs too, for at most PAR_BUDGET seconds (default 190);
# the others one after another on an idle GPU. Run folders go to a temporary folder under
# /tmp. A later call on a fresh machine needs "a" again (the build is not kept).
#
# Environment: BUDGET and PAR_BUDGET (whole seconds), STEP_S ("LETTER=SECONDS ...": the
# dry run's plan with other seconds), GPU_CHECK_COMMIT, GPU_CHECK_DRY (1: the dry run) and,
# for the dry run's own tests (dev/test_gpu_check.sh), GPU_CHECK_DRY_FAIL and
# GPU_CHECK_DRY_HANG (step letters whose commands fail, or run to their time limit).
# shellcheck disable=SC2086  # flag strings ($C10M, $cfg, ...) are split on purpose
set -uo pipefail
STEP_S_OVERRIDE=${STEP_S-}  # the environment's STEP_S, before the table below takes the name
unset STEP_S
STEP_ORDER=abcdvrRoehgfip  # the order they run in: r after the side-by-side ones (racecheck
# starves them); the speed rows (e, h) before the rest
declare -A STEP_NAME=([a]="a build" [b]="b test_gpt" [c]="c compute-sanitizer" [d]="d init_from+eval"
    [v]="v kernels validate" [r]="r racecheck+synccheck" [R]="R racecheck+synccheck (full)" [o]="o host code (CUDA)"
    [e]="e 10m speed" [h]="h 10m PyTorch compile" [g]="g kernels-run" [f]="f PosAug overhead"
    [i]="i memory at B 16" [p]="p profile 10m step")
# Seconds each step takes on the H200 or H100 (doc/gpu_runs.md): m measured in a call there,
# e estimated (the reason beside it). Keep them when a run measures a step.
#   a  e  80 measured at 4156b53 (53-80 s before); since then the flash v2 templates compile
#         in three more translation units: dev/cuda/attention.cu's fp32 build, the longest,
#         took 1.80x 4156b53's CPU time (157 s against 87 s, nvcc for sm_90 on this 2-core
#         machine): 80 x 1.8
#   b  e  39-43 s alone with 13 cases and the whole CPU suite, 87 beside c and d (357ceb0);
#         now --only gpu on 33 cases, 8 of them larger (C up to 256, T up to 130)
#   c  e  6-7 s per run with 6 runs side by side (f9f8805); now 20 runs side by side
#   d  m  51 (f9f8805, 4156b53)
#   v  e  18 (4156b53); more cases and variants since
#   r  e  6-34 s per run side by side (547bced), 16 runs now, attention v7 with two more cases
#   R  m  147-149 for its two added runs (547bced)
#   o  e  96-99 (547bced, 4156b53); more host tests since
#   e  e  29 for the trainer rows, the 16K evaluation and PyTorch eager (4156b53); the flash
#         kernels' validation and benchmark added (two dev/cuda binaries, about 15 s each)
#   h  m  31 (b8a50d5, 4156b53)
#   g  e  157 (f9f8805); four variants and four validation cases more since
#   f  m  21 (4156b53)
#   i  m  6 (b8a50d5, 4156b53)
#   p  e  15 for the naive path (4156b53); the flash path launches fewer kernels
declare -A STEP_S=([a]=145 [b]=150 [c]=60 [d]=51 [v]=25 [r]=50 [R]=200 [o]=130 [e]=60 [h]=31 [g]=180 [f]=21 [i]=6 [p]=20)
# The default plan: what one call of the device tool (15 minutes of device time in all,
# machine start included: about 540 s for the script) must hold. The dry run adds it up,
# the side-by-side group at its cap, and fails past PLAN_LIMIT (60 s left of the 540 for a
# slow machine). h is in it: a speed ratio counts only when both sides ran in one call. Not
# in it: R, o, g, f, i, and p (the per-kernel profile); name them in STEPS.
PLAN_DEFAULT=abcdvreh PLAN_LIMIT=480 PAR_STEPS=bcdv

# ---- the input, checked before anything runs: one line naming what is wrong, exit 2
refuse() {
    echo "gpu_check: $*" >&2
    exit 2
}
# seconds NAME VALUE MIN MAX: VALUE is a whole number from MIN to MAX
seconds() {
    [[ $2 =~ ^[0-9]{1,6}$ ]] && ((10#$2 >= $3 && 10#$2 <= $4)) ||
        refuse "$1='$2': give a whole number of seconds from $3 to $4"
}
# letters NAME VALUE: every character of VALUE is a step letter
letters() {
    local i
    [[ -n $2 ]] || refuse "$1 is empty: give step letters (${STEP_ORDER})"
    for ((i = 0; i < ${#2}; i++)); do
        [[ $STEP_ORDER == *"${2:i:1}"* ]] || refuse "$1='$2': unknown step '${2:i:1}' (the steps: ${STEP_ORDER})"
    done
}
[ $# -le 2 ] || refuse "too many arguments (usage: bash dev/gpu_check.sh [DIR [STEPS]])"
DIR=${1:-gpu_check}
STEPS=${2:-$PLAN_DEFAULT}
letters STEPS "$STEPS"
CHILD=${GPU_CHECK_CHILD:-}  # a side-by-side step's own invocation: its lines go to the parent's files
BUDGET=${BUDGET:-540}
seconds BUDGET "$BUDGET" "$([ -n "$CHILD" ] && echo 1 || echo 60)" 3600  # a child's: what the parent had left
BUDGET=$((10#$BUDGET))
PAR_BUDGET=${PAR_BUDGET:-190}
seconds PAR_BUDGET "$PAR_BUDGET" 10 "$BUDGET"
PAR_BUDGET=$((10#$PAR_BUDGET))
for kv in ${STEP_S_OVERRIDE-}; do
    [[ $kv == ?=* ]] || refuse "STEP_S='$STEP_S_OVERRIDE': give LETTER=SECONDS pairs, e.g. STEP_S='a=90 g=170'"
    letters STEP_S "${kv%%=*}"
    seconds "STEP_S ${kv%%=*}" "${kv#*=}" 1 3600
    STEP_S[${kv%%=*}]=$((10#${kv#*=}))
done
case ${GPU_CHECK_DRY:-} in
"" | 0) DRY="" ;;
1) DRY=1 ;;
*) refuse "GPU_CHECK_DRY='$GPU_CHECK_DRY': give 1 (the plan, checked without a GPU) or 0" ;;
esac
for v in GPU_CHECK_DRY_FAIL GPU_CHECK_DRY_HANG; do
    [ -z "${!v:-}" ] && continue
    [ -n "$DRY" ] || refuse "$v is the dry run's (GPU_CHECK_DRY=1)"
    letters "$v" "${!v}"
done

mkdir -p "$DIR" && DIR=$(cd "$DIR" && pwd)
SELF=dev/$(basename "$0")
cd "$(dirname "$0")/.." || exit 1
SUM=$DIR/summary.txt
[ -n "$CHILD" ] || : > "$SUM"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
PATH=$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer
BUILD="all cuda"  # step a's make targets: everything the later steps run

# GPU_CHECK_DRY=1 (make test's gpu-plan suite, no GPU needed): step a builds for real and
# lists what `make -n -B $BUILD` would make; every later command is checked, not run: its
# program is built by step a (or is a tracked script) and exists, the CUDA trainers accept
# its flags (they parse them before looking for a GPU), make targets exist, scripts parse.
# One PASS or FAIL line per command (children too, through DRY_LOG), then "N passed, N failed".
if [ -n "$DRY" ] && ! command -v nvcc > /dev/null; then
    echo "SKIP: the GPU check's plan: no nvcc on this machine, so step a cannot build"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
if [ -n "$DRY" ] && [ -z "$CHILD" ]; then
    export DRY_LOG=$tmp/dry.log DRY_BUILT=$tmp/dry_built
    : > "$DRY_LOG"
    # what step a builds (a listing: nothing is built here)
    # (outside make's environment: under make test, make would name even the top folder)
    env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -n -B $BUILD 2>/dev/null | awk -v root="$PWD" '
        /Entering directory/ { d = $NF; gsub(/[`'"'"']/, "", d); d = d == root ? "" : substr(d, length(root) + 2); next }
        /Leaving directory/ { d = ""; next }
        { for (i = 1; i < NF; i++) if ($i == "-o") print (d != "" ? d "/" : "") $(i + 1) }' > "$DRY_BUILT"
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
# dry_run LIMIT CMD...: the dry run's stand-in for running CMD: its checks, then what the
# dry run's own tests ask of the step (GPU_CHECK_DRY_HANG: run to the limit; _FAIL: fail)
dry_run() {
    local limit=$1
    shift
    dry_check "$@"
    local rc=$?
    [[ ${GPU_CHECK_DRY_HANG:-} == *$STEP* ]] && sleep "$limit"
    if [[ ${GPU_CHECK_DRY_FAIL:-} == *$STEP* ]]; then
        dry_verdict 1 "step $STEP forced to fail (GPU_CHECK_DRY_FAIL): ${*//$tmp/TMP}"
        return 1
    fi
    return $rc
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

# ---- running a step's commands

# run LIMIT CMD...: CMD under timeout (LIMIT seconds, cut to the budget left); its output
# goes to the step's log and to $tmp/out (the last command's, for the summary); returns its
# status, and the step's first failing command is kept for its FAILED line
run() {
    local limit=$1 left=$((BUDGET - SECONDS)) rc t=$SECONDS
    shift
    ((limit > left)) && limit=$left
    echo "\$ $* (limit ${limit}s)" >> "$LOG"
    : > "$tmp/out"
    if [ -n "$DRY" ]; then
        dry_run "$limit" "$@"
        rc=$?
    elif ((limit < 5)); then
        echo "not run: the time budget is spent" | tee "$tmp/out" >> "$LOG"
        rc=124
    else
        timeout -k 5 "$limit" "$@" 2>&1 | tee "$tmp/out" >> "$LOG"
        rc=${PIPESTATUS[0]}
    fi
    echo "(exit $rc, $((SECONDS - t)) s)" >> "$LOG"
    [ "$rc" = 0 ] || [ -n "$FAILED_CMD" ] || FAILED_CMD="${*//$tmp/TMP} (exit $rc)"
    return "$rc"
}
# run_to LIMIT N CMD...: CMD under timeout, for running in the background: the command line
# and output to the step's RUNS/N.log as it runs, its status to RUNS/N.rc, its seconds to
# RUNS/N.s
run_to() {
    local limit=$1 base=$RUNS/$2 left=$((BUDGET - SECONDS)) t=$SECONDS
    shift 2
    ((limit > left)) && limit=$left
    echo "\$ $* (limit ${limit}s)" > "$base.log"
    if [ -n "$DRY" ]; then
        dry_run "$limit" "$@"
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
# step_start LETTER: the step's log DIR/LETTER.log, its runs' folder DIR/LETTER.runs
step_start() {
    STEP=$1
    NAME=${STEP_NAME[$1]}
    LOG=$DIR/$1.log RUNS=$DIR/$1.runs
    T0=$SECONDS FAILED_CMD=""
    : > "$tmp/detail"
    printf '===== %s (at %d s)\n' "$NAME" "$SECONDS" > "$LOG"
}
# detail: stdin becomes indented lines under the step's summary line
detail() { sed 's/^/    /' >> "$tmp/detail"; }
# step_end RC TEXT: the step's lines into summary.txt in one write (also the first on stdout,
# as progress); a step that failed gets its FAILED line, naming the command and the log
step_end() {
    local rc=$1 text=$2
    [[ $rc == 124 || $rc == 137 ]] && text="time limit reached | $text"
    {
        printf '%-22s rc %-3s %4d s  %s\n' "$NAME" "$rc" $((SECONDS - T0)) "$text"
        cat "$tmp/detail"
        [ "$rc" = 0 ] || echo "FAILED $STEP: ${FAILED_CMD:-$text}; log ${LOG#"$DIR"/}"
    } > "$tmp/block"
    head -n1 "$tmp/block"
    cat "$tmp/block" >> "$SUM"
    [ "$rc" = 0 ] || failed+=" $STEP"
}
failed=""

# random tokens for the 50K-vocab preset (as dev/bench_cpu.sh), shared by e, f, h, i and p
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
# the kernel variants a run ran, from its log.jsonl's first line (doc/formats.md)
ran_variants() {
    python3 - "$1" <<'PY' 2>/dev/null || echo "no variants logged"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
print(", ".join(f"{f} v{'+'.join(map(str, v))}" for f, v in r["variants"].items()) +
      "".join(f" ({f} fell back: {w})" for f, w in r.get("variant_fallbacks", {}).items()))
PY
}

step_a() {
    step_start a
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
    if [ -n "$DRY" ]; then  # the build for real
        make -k -j"$(nproc)" $BUILD > "$tmp/out" 2>&1
        dry_verdict $? "step a's build: make $BUILD" || rc=1
        dry_verdict $((! $(grep -c . "$DRY_BUILT") > 0)) "make -n -B $BUILD lists what it builds ($(grep -c . "$DRY_BUILT") programs)" || rc=1
    fi
    for b in train_gpt_cpu test_gpt train_gpt train_gpt_fp32; do [ -x "$b" ] || missing+=" $b"; done
    [ -z "$missing" ] || { rc=1; FAILED_CMD=${FAILED_CMD:-"make $BUILD (missing:$missing)"}; }
    grep -E 'error:|\*\*\*' "$tmp/out" | head -n 20 | detail
    step_end $rc "${gpu:-no GPU listed} | ${drv:-no driver listed} | nvcc ${nvcc:-not found} | ${torch_line:-no torch}${missing:+ | missing:$missing}"
}

step_b() {
    step_start b
    run 300 ./test_gpt --only gpu
    local rc=$?
    grep -E '^(FAIL|SKIP)' "$tmp/out" | head -n 60 | detail
    step_end $rc "$(tail -n1 "$tmp/out") | GPU checks passed: $(grep -c '^PASS: GPU' "$tmp/out")"
}

# find_sanitizer: compute-sanitizer's path into $san, or the step fails (returns 1)
find_sanitizer() {
    san=$(command -v compute-sanitizer || { [ -n "$DRY" ] && echo compute-sanitizer; })
    [ -n "$san" ] && return 0
    FAILED_CMD="compute-sanitizer: not found on this machine"
    step_end 1 "sanitizer unavailable: compute-sanitizer not found"
    return 1
}

# The sanitizer runs allowed to end without a verdict (the tool failing on the device or
# the runtime, not on a kernel), as "label pattern|reason" lines: none since 547bced
NO_VERDICT_EXPECTED=()

# san_results LABEL...: the step's background runs 1, 2, ... (run_to), read in order: a
# detail line each (the first errors of a failing one); sets san_bad, the runs not clean:
# a run without a verdict (the tool itself failed) counts, unless NO_VERDICT_EXPECTED lists it
san_results() {
    local i=0 rc errs label e why base
    # the tool failing on the device or the runtime (no such text comes from the trainers)
    local unsupported='not supported|unsupported|Internal Sanitizer Error|Sanitizer.*fail'
    san_bad=0
    for label in "$@"; do
        i=$((i + 1))
        base=$RUNS/$i
        rc=$(cat "$base.rc")
        # memcheck and synccheck end with "ERROR SUMMARY: N errors", racecheck with
        # "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)": N counts both
        errs=$(grep -oE 'ERROR SUMMARY: [0-9]+|RACECHECK SUMMARY: [0-9]+' "$base.log" | tail -n1 | grep -oE '[0-9]+$')
        if [ -n "$DRY" ]; then  # nothing ran: the run's verdict is its command's checks
            [ "$rc" = 0 ] && { echo "$label: dry run, its command checked" | detail; continue; }
            echo "$label: dry run, its command failed its checks" | detail
        elif grep -qiE "$unsupported" "$base.log"; then
            why=""
            # shellcheck disable=SC2053  # the label pattern, matched as a glob
            for e in "${NO_VERDICT_EXPECTED[@]}"; do [[ $label == ${e%%|*} ]] && why=${e#*|}; done
            echo "$label: no verdict, the tool failed: $(grep -m1 -iE "$unsupported" "$base.log")${why:+ (expected: $why)}" | detail
            [ -n "$why" ] && continue
        elif [ "$rc" = 0 ] && [ "$errs" = 0 ]; then
            echo "$label: exit 0, 0 errors, $(cat "$base.s") s" | detail
            continue
        else
            echo "$label: exit $rc, ${errs:-?} errors, $(cat "$base.s") s" | detail
            grep -m6 -E '^========= ' "$base.log" | detail
        fi
        san_bad=$((san_bad + 1))
        [ -n "$FAILED_CMD" ] || FAILED_CMD="$label (exit $rc, log $base.log)"
    done
}

clean_count() {  # N BAD: "K of N runs clean", or in the dry run "K of N commands checked (dry run: none ran)"
    if [ -n "$DRY" ]; then echo "$(($1 - $2)) of $1 commands checked (dry run: none ran)"; else echo "$(($1 - $2)) of $1 runs clean"; fi
}

step_c() {
    step_start c
    local san san_bad
    find_sanitizer || return
    mkdir -p "$RUNS"
    local n=0 cfg bin labels=()
    # the runs of dev/memcheck_runs.txt (together they launch every kernel of llmc/cuda:
    # dev/cuda_emu/coverage.sh) on both builds, side by side (each slow under the tool, none
    # timed), then read in order
    while IFS= read -r cfg; do
        [[ -z $cfg || $cfg == \#* ]] && continue
        for bin in ./train_gpt_fp32 ./train_gpt; do
            n=$((n + 1))
            labels+=("$bin $cfg")
            run_to 200 $n "$san" --tool memcheck --error-exitcode 9 $bin $cfg --out_dir "$tmp/san$n.d" < /dev/null &
        done
    done < dev/memcheck_runs.txt
    wait
    san_results "${labels[@]}"
    step_end $((san_bad > 0)) "$(clean_count $n $san_bad) (exit 0, ERROR SUMMARY: 0 errors)"
}

step_R() { step_r full; }  # step r with the two slow racecheck runs (about 150 s)
step_r() {  # racecheck (shared memory hazards) and synccheck (barriers) on the attention kernels
    if [ "${1:-}" = full ]; then step_start R; else step_start r; fi
    local san san_bad
    find_sanitizer || return
    mkdir -p "$RUNS"
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
        run_to 150 $n "$san" --tool racecheck --error-exitcode 9 ./dev/cuda/${v% *} ${v#* } --no-bench &
    done
    for bin in ./train_gpt ./train_gpt_fp32; do
        for att in flash naive; do
            n=$((n + 1))
            labels+=("synccheck $bin --attention $att")
            run_to 100 $n "$san" --tool synccheck --error-exitcode 9 $bin $short --attention $att \
                --out_dir "$tmp/r$n.d" &
        done
    done
    wait
    san_results "${labels[@]}"
    step_end $((san_bad > 0)) "$(clean_count $n $san_bad) (racecheck on the attention and RMSNorm kernels through dev/cuda, synccheck on both trainer paths; both builds)"
}

step_o() {  # the CUDA trainer's host code: run folders, resume, bad input, Ctrl-C, crash safety
    step_start o
    local rc=0
    run 240 env HOST_ONLY=1 TRAINER=./train_gpt ./test_gpt || rc=1
    grep -E '^(FAIL|SKIP)' "$tmp/out" | head -n 40 | detail
    local t1
    t1=$(tail -n1 "$tmp/out")
    run 240 python3 dev/test_crash_safety.py --trainer ./train_gpt --trials 4 || rc=1
    grep -E '^(FAIL|SKIP)' "$tmp/out" | head -n 20 | detail
    step_end $rc "test_gpt HOST_ONLY with ./train_gpt: $t1 | test_crash_safety ./train_gpt: $(tail -n1 "$tmp/out")"
}

step_p() {  # Nsight Compute: each kernel's time in two training steps of the 10m preset (micro-batch 4), flash
    step_start p
    make_shard
    run 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv ./train_gpt --model 10m --vocab_size 50277 \
        --batch_size 4 --total_batch 4 --attention flash \
        --train_data "$SHARD" --steps 2 --warmup 1 --val_every 0 --eval_len 0 --out_dir "$tmp/p"
    local rc=$?
    [ -n "$DRY" ] || command -v ncu > /dev/null || { rc=1; FAILED_CMD="ncu: not found on this machine"; }
    grep -m1 '^kernel variants:' "$tmp/out" | detail
    echo "ran: $(ran_variants "$tmp/p/log.jsonl")" | detail
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
    step_end $rc "$(grep -m1 'kernels,' "$tmp/detail" | sed 's/^ *//') | --attention flash, $(ran_variants "$tmp/p/log.jsonl")"
}

step_d() {
    step_start d
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
        dry_verdict $r "step d's CPU commands run (on CPU-made checkpoints)$why" || bad=1
    fi
    # GPU against CPU in the fp32 build: 2.4e-7 (init_from's losses) and 1.0e-6 (the
    # evaluation's loss column) on the H200 and the H100; a comparison that cannot be made fails
    local cmp
    cmp=$(python3 - "$d" <<'PY' 2>&1
import csv, json, sys
d = sys.argv[1]
short, out, bad = [], [], 0
try:
    g = [json.loads(l)["loss"] for l in open(f"{d}/drope_gpu/log.jsonl")]
    c = [json.loads(l)["loss"] for l in open(f"{d}/drope_cpu/log.jsonl")]
    diff = max(abs(a - b) for a, b in zip(g, c))
    bad |= not diff < 1e-4
    short.append(f"init_from max |dloss| GPU-CPU {diff:.2e}")
    out.append(f"init_from, 5 steps: GPU loss {g[0]:.4f} -> {g[-1]:.4f}, max |GPU - CPU| {diff:.2e} (at most 1e-4)")
except (OSError, ValueError, KeyError, IndexError) as e:
    bad = 1
    short.append("init_from: no comparison")
    out.append(f"init_from: no comparison ({type(e).__name__}: {e})")
try:
    rows = {k: list(csv.DictReader(open(f"{d}/eval_{k}/eval_L512.csv"))) for k in ("gpu", "cpu")}
    meta = {k: json.load(open(f"{d}/eval_{k}/eval_L512.json")) for k in ("gpu", "cpu")}
    diff = {col: max(abs(float(a[col]) - float(b[col])) for a, b in zip(rows["gpu"], rows["cpu"]))
            for col in rows["gpu"][0] if col != "position"}
    bad |= not diff["loss"] < 1e-4
    m = meta["gpu"]
    short.append(f"eval loss column max |GPU-CPU| {diff['loss']:.2e}")
    out.append(f"eval adoption: the GPU evaluated --pe {m['pe']} --pos {m['pos_scheme']} qk_norm {m['qk_norm']}, "
               f"{len(rows['gpu'])} rows; max |GPU - CPU|: " + ", ".join(f"{k} {v:.2e}" for k, v in diff.items())
               + f" (loss at most 1e-4); in_dist {m['in_dist']:.4f} (CPU {meta['cpu']['in_dist']:.4f})")
except (OSError, ValueError, KeyError, IndexError) as e:
    bad = 1
    short.append("eval: no comparison")
    out.append(f"eval adoption: no comparison ({type(e).__name__}: {e})")
print(bad, " | ".join(short))
print("\n".join(out))
PY
)
    echo "$cmp" | tail -n +2 | detail
    local first
    first=$(echo "$cmp" | head -n1)
    # (the dry run has no GPU files to compare)
    [ -z "$DRY" ] && [ "${first%% *}" != 0 ] && { bad=1; FAILED_CMD=${FAILED_CMD:-"the GPU-CPU comparison: ${first#* }"}; }
    step_end $bad "${first#* }"
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

# the TFLOP/s lines of a dev/cuda attention binary's benchmark in $tmp/out, one per version,
# each with the variant it ran (dev/cuda fails a version that ran another)
flash_rates() {
    grep -E '^attention(_backward)? v[0-9]+.*TFLOP/s' "$tmp/out" | sed -E 's/: [0-9.]+ us, / /; s/ TFLOP\/s.*//'
}

step_e() {
    step_start e
    make_shard
    local train="$C10M --train_data $SHARD --steps 12 --warmup 2 --val_every 0 --eval_len 0"
    run 150 ./train_gpt $train --out_dir "$tmp/e_c"
    local rc=$? c f
    grep -E '^device|^--pe|GPU memory|^kernel variant' "$tmp/out" | detail
    c=$(c_rate "$tmp/e_c/log.jsonl")
    C_TOK_S=${c%% *}
    local mfu=${c##* } vc vf
    vc=$(ran_variants "$tmp/e_c/log.jsonl")
    echo "naive ran: $vc" | detail
    run 150 ./train_gpt $train --attention flash --out_dir "$tmp/e_flash" || rc=1
    grep -E 'GPU memory|^kernel variant' "$tmp/out" | sed 's/^/--attention flash: /' | detail
    f=$(c_rate "$tmp/e_flash/log.jsonl")
    FLASH_TOK_S=${f%% *}
    vf=$(ran_variants "$tmp/e_flash/log.jsonl")
    echo "--attention flash: ${f%% *} tok/s, MFU ${f##* }% (naive: $C_TOK_S tok/s); ran: $vf" | detail
    local t0=$SECONDS ev=""  # the evaluation target: 20 sequences of 16K in under 10 s
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
    # the flash kernels (forward and backward, every version: the trainer's variants 1 and 2
    # are attention v6, v7 and attention_backward v3, v4), at B 16, T 2048, NH 6, hd 64
    local fl=""
    run 120 ./dev/cuda/attention_bin || rc=1
    grep -E '^(device|ceiling|benchmark)|TFLOP/s| v[0-9]+: (PASS|FAIL|SKIPPED)| BAD$' "$tmp/out" | detail
    fl+=$(flash_rates | grep -E ' v[67] ' | tr '\n' ';')
    run 120 ./dev/cuda/attention_backward_bin || rc=1
    grep -E 'TFLOP/s| v[0-9]+: (PASS|FAIL|SKIPPED)| BAD$' "$tmp/out" | detail
    fl+=$(flash_rates | grep -E ' v[34] ' | tr '\n' ';')
    step_end $rc "$ev | C ${C_TOK_S:-?} tok/s (MFU ${mfu:-?}%; $vc), flash ${f%% *} tok/s (MFU ${f##* }%; $vf) | PyTorch eager bf16 $t_tok tok/s | C / PyTorch $(python3 -c "print(f'{${C_TOK_S:-0} / max(1, $t_tok):.2f}')") | TFLOP/s: ${fl:-none}"
}

step_f() {
    step_start f
    make_shard
    run 240 env TRAINER=./train_gpt STEPS=10 bash dev/overhead.sh --model 10m --total_batch 32 \
        --train_data "$SHARD" --val_data "$SHARD" --vocab_size 50277
    local rc=$?
    step_end $rc "$(grep -m1 '^wall clock' "$tmp/out" || tail -n1 "$tmp/out")"
}

step_g() {
    step_start g
    run 300 make -k kernels-run  # -k: the fp32 variants run even when a bf16 one fails
    local rc=$?
    grep -E "^== |^device:|^ceiling:| v[0-9]+: (PASS|FAIL|SKIPPED)|version\(s\) FAILED|of measured|^error| BAD$" "$tmp/out" | detail
    step_end $rc "$(verdicts)"
}

# the PASS / FAIL / SKIPPED verdict lines of dev/cuda's binaries in $tmp/out, counted
verdicts() {
    local v n=""
    for v in PASS FAIL SKIPPED; do n+="$(grep -cE " v[0-9]+: $v" "$tmp/out") $v, "; done
    echo "versions: ${n%, } (bf16 and fp32 builds)"
}

step_v() {
    step_start v
    run 200 make -k -C dev/cuda validate
    local rc=$?
    grep -E "^== | v[0-9]+: (PASS|FAIL|SKIPPED)|version\(s\) FAILED| BAD$|worst element|^error" "$tmp/out" | detail
    step_end $rc "$(verdicts)"
}

step_h() {
    step_start h
    run 280 python3 dev/bench_torch.py $TORCH10M --compile
    local rc=$? t
    t=$(torch_result)
    local t_tok=${t%% *}
    t_tok=${t_tok:-0}
    echo "PyTorch: $t" | detail
    step_end $rc "PyTorch bf16 $t_tok tok/s${C_TOK_S:+ | C / PyTorch $(python3 -c "print(f'{$C_TOK_S / max(1, $t_tok):.2f}')")}${FLASH_TOK_S:+ | C flash / PyTorch $(python3 -c "print(f'{$FLASH_TOK_S / max(1, $t_tok):.2f}')")}"
}

step_i() {  # GPU memory at micro-batch 16, both attention paths
    step_start i
    make_shard
    local a rc=0 mem=""
    for a in naive flash; do
        run 150 ./train_gpt --model 10m --vocab_size 50277 --batch_size 16 --total_batch 32 --train_data "$SHARD" \
            --steps 3 --warmup 1 --val_every 0 --eval_len 0 --attention $a --out_dir "$tmp/i_$a" || rc=1
        mem+=" | $a: $(grep -m1 'GPU memory in use' "$tmp/out" || echo 'no memory line')"
    done
    step_end $rc "micro-batch 16${mem}"
}

# not_started LETTER: the step fails, the budget spent before it could start
not_started() {
    echo "FAILED $1: not started, the time budget ($BUDGET s) is spent" | tee -a "$SUM"
    failed+=" $1"
}

# the correctness steps b, c, d and v time nothing: they run side by side, each as a child
# invocation of this script (GPU_CHECK_CHILD) writing its log and summary lines into DIR
# as it goes, for at most PAR_BUDGET seconds; a child that ends without its summary lines
# fails its step here
run_side_by_side() {
    local steps=$1 s limit=$((BUDGET - SECONDS - 20)) rc
    [ -n "$DRY" ] && limit=$PAR_BUDGET  # the dry run times nothing (its build may take long)
    ((limit > PAR_BUDGET)) && limit=$PAR_BUDGET
    if ((limit < 10)); then  # a child takes PAR_BUDGET of at least 10 s
        for ((i = 0; i < ${#steps}; i++)); do not_started "${steps:i:1}"; done
        return
    fi
    local -A pid
    for ((i = 0; i < ${#steps}; i++)); do
        s=${steps:i:1}
        GPU_CHECK_CHILD=1 BUDGET=$limit PAR_BUDGET=$limit bash "$SELF" "$DIR" "$s" > /dev/null 2> "$tmp/child_$s.err" &
        pid[$s]=$!
    done
    for ((i = 0; i < ${#steps}; i++)); do
        s=${steps:i:1}
        wait "${pid[$s]}"
        rc=$?
        if ! grep -q "^${STEP_NAME[$s]} " "$SUM"; then
            echo "FAILED $s: its side-by-side invocation ended (exit $rc) without its summary: $(tail -n1 "$tmp/child_$s.err")" |
                tee -a "$SUM"
            failed+=" $s"
        elif [ "$rc" != 0 ]; then
            failed+=" $s"
        fi
    done
}

if [ -z "$CHILD" ]; then
    echo "gpu_check $(date -u '+%Y-%m-%d %H:%M UTC') | commit ${GPU_CHECK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} | steps $STEPS | budget $BUDGET s (side by side $PAR_BUDGET s)" | tee -a "$SUM"
fi
par=""
if [ -z "$CHILD" ]; then
    for ((i = 0; i < ${#PAR_STEPS}; i++)); do [[ $STEPS == *${PAR_STEPS:i:1}* ]] && par+=${PAR_STEPS:i:1}; done
fi
for ((k = 0; k < ${#STEP_ORDER}; k++)); do
    s=${STEP_ORDER:k:1}
    [[ $STEPS == *$s* ]] || continue
    if [ -z "$DRY" ] && ((BUDGET - SECONDS < 20)); then  # the dry run times nothing: STEP_S is its budget
        not_started "$s"
        continue
    fi
    if [[ -n $par && $par == *$s* ]]; then
        [[ $s == "${par:0:1}" ]] && run_side_by_side "$par"
        continue
    fi
    "step_$s"
done
[ -n "$CHILD" ] && exit $((${#failed} > 0))
echo "total $SECONDS s" >> "$SUM"
if [ -n "$DRY" ]; then
    # the default plan's time from STEP_S, the side-by-side group at its cap: one call of the
    # device tool must hold it, and no member of the group may need more than the cap
    est=0 over=""
    for ((k = 0; k < ${#PLAN_DEFAULT}; k++)); do
        s=${PLAN_DEFAULT:k:1}
        if [[ $PAR_STEPS == *$s* ]]; then
            ((STEP_S[$s] > PAR_BUDGET)) && over+=" $s (${STEP_S[$s]} s)"
        else
            est=$((est + STEP_S[$s]))
        fi
    done
    est=$((est + PAR_BUDGET))
    dry_verdict $((est > PLAN_LIMIT)) "the default plan ($PLAN_DEFAULT) takes about $est s by STEP_S, the side-by-side steps at their cap of $PAR_BUDGET s: at most $PLAN_LIMIT" || failed+=" plan"
    dry_verdict $((${#over} > 0)) "every side-by-side step of the default plan fits its cap of $PAR_BUDGET s${over:+ (not:$over)}" || failed+=" plan"
fi
if [ -n "$failed" ]; then
    echo "FAILED: steps$failed" >> "$SUM"
else
    echo "PASSED: steps $STEPS" >> "$SUM"
fi
if [ -n "$DRY" ]; then
    cat "$DRY_LOG"
    echo "$(grep -c '^PASS' "$DRY_LOG") passed, $(grep -c '^FAIL' "$DRY_LOG") failed"
    [ -z "$failed" ] && ! grep -q '^FAIL' "$DRY_LOG"
    exit
fi
echo
cat "$SUM"
[ -z "$failed" ]
