#!/usr/bin/env bash
# dev/gpu_check.sh's own behaviour, without a GPU and without its build (seconds; make
# test's gpu-plan suite checks the real plan, step a's build included):
#   - bad input (an unknown step letter; BUDGET, PAR_BUDGET, STEP_S not whole seconds in
#     range) refused with one line naming it, before DIR exists;
#   - a step that fails (GPU_CHECK_DRY_FAIL), alone or side by side, makes the script exit
#     non-zero and summary.txt name the step, its command and its log, and end "FAILED: steps";
#   - a call killed while the side-by-side steps run (GPU_CHECK_DRY_HANG keeps d running)
#     leaves the finished step's summary lines and log in DIR;
#   - the default plan, the side-by-side steps at their cap, is at most 480 s by STEP_S, and
#     a plan past it, or a side-by-side step past the cap, fails the dry run.
# GPU_CHECK_SCRIPT=FILE (in dev/) runs these against another copy of the script (to see an
# older one fail them). Ends with "N passed, N failed, N skipped".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
script=${GPU_CHECK_SCRIPT:-dev/gpu_check.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp  # the script's own temporary folders, even of a killed call
pass=0 fail=0 skip=0
check() {  # OK TEXT [DETAIL]
    if [ "$1" = 0 ]; then
        echo "PASS: $2"
        pass=$((pass + 1))
    else
        echo "FAIL: $2${3:+: $3}"
        fail=$((fail + 1))
    fi
}
if ! command -v nvcc > /dev/null; then  # the dry run needs nvcc (it skips without)
    echo "SKIP: dev/gpu_check.sh's dry run needs nvcc"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi

# refused NAME ENV... -- ARGS...: the script with that environment and arguments exits 2
# with one line naming NAME, and makes no DIR
refused() {
    local name=$1 envs=() n=$((n + 1))
    shift
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local out rc
    out=$(env "${envs[@]}" bash "$script" "$tmp/refused$n" "$@" 2>&1)
    rc=$?
    [ "$rc" = 2 ] && [ "$(grep -c . <<< "$out")" = 1 ] && grep -q -- "$name" <<< "$out" && ! grep -q unbound <<< "$out" &&
        [ ! -e "$tmp/refused$n" ]
    check $? "refused with one line naming $name, before DIR exists: ${envs[*]} $*" "exit $rc: $out"
}
n=0
refused "'z'" -- hz
refused "'Q'" -- Q
refused BUDGET BUDGET=1e3 -- h
refused BUDGET BUDGET=abc -- h
refused BUDGET BUDGET=99999999999999999999 -- h
refused PAR_BUDGET PAR_BUDGET=0 -- h
refused PAR_BUDGET BUDGET=100 PAR_BUDGET=200 -- h
refused STEP_S STEP_S=g=1e3 -- h
refused STEP_S STEP_S=x=5 -- h
refused GPU_CHECK_DRY GPU_CHECK_DRY=yes -- h
refused GPU_CHECK_DRY_FAIL GPU_CHECK_DRY_FAIL=h -- h

# a step forced to fail: exit non-zero, its FAILED line (step, command, log), the last line
for case in "h h python3 dev/bench_torch.py" "vh v make -k -C dev/cuda validate"; do
    read -r steps bad cmd <<< "$case"
    d=$tmp/fail_$steps
    out=$(GPU_CHECK_DRY=1 GPU_CHECK_DRY_FAIL=$bad bash "$script" "$d" "$steps" 2>&1)
    rc=$?
    [ "$rc" != 0 ] && grep -q "^FAILED $bad: $cmd.*; log $bad.log$" "$d/summary.txt" && [ -s "$d/$bad.log" ] &&
        [ "$(tail -n1 "$d/summary.txt")" = "FAILED: steps $bad" ]
    check $? "a dry run with step $bad forced to fail (steps $steps) exits non-zero, naming the step, its command and its log" \
        "exit $rc; summary: $(tail -n3 "$d/summary.txt" 2> /dev/null | tr '\n' '|')"
done

# killed while d (hung) runs beside v: v's result is already in DIR
d=$tmp/killed
GPU_CHECK_DRY=1 GPU_CHECK_DRY_HANG=d setsid bash "$script" "$d" vd > "$tmp/killed.out" 2>&1 &
pid=$!
for _ in $(seq 120); do
    grep -q '^v kernels validate ' "$d/summary.txt" 2> /dev/null && break
    sleep 0.5
done
sleep 1
kill -9 -- -"$pid" 2> /dev/null
wait "$pid" 2> /dev/null
grep -q '^v kernels validate .* rc 0 ' "$d/summary.txt" && grep -q '^(exit 0' "$d/v.log" && [ -s "$d/d.log" ] &&
    ! grep -q '^total ' "$d/summary.txt"
check $? "a dry run killed while the side-by-side steps run leaves the finished step's summary line and log" \
    "$(tr '\n' '|' < "$d/summary.txt" 2> /dev/null)"

# the plan: at most 480 s with the side-by-side steps at their cap; past it, a failure
out=$(GPU_CHECK_DRY=1 bash "$script" "$tmp/plan" h 2>&1)
rc=$?
line=$(grep -E 'the default plan .* takes about [0-9]+ s by STEP_S, the side-by-side steps at their cap' <<< "$out")
est=$(grep -oE 'about [0-9]+ s' <<< "$line" | grep -oE '[0-9]+')
[ "$rc" = 0 ] && [[ $line == PASS:* ]] && [ -n "$est" ] && ((est <= 480))
check $? "the dry run's default plan, the side-by-side steps at their cap, is at most 480 s (${est:-?} s)" "exit $rc: ${line:-no plan line}"
for over in "e=250" "b=250"; do
    out=$(GPU_CHECK_DRY=1 STEP_S=$over bash "$script" "$tmp/plan_$over" h 2>&1)
    rc=$?
    [ "$rc" != 0 ] && grep -qE '^FAIL: (the default plan|every side-by-side step)' <<< "$out" &&
        [ "$(tail -n1 "$tmp/plan_$over/summary.txt")" = "FAILED: steps plan" ]
    check $? "a plan past its limit or its cap fails the dry run (STEP_S=$over)" "exit $rc: $(grep -m2 FAIL <<< "$out" | tr '\n' '|')"
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
