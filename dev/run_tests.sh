#!/usr/bin/env bash
# make test: every suite, then one closing line "N passed, N failed, N skipped".
# Each suite prints PASS/FAIL/SKIP lines and ends with its own "N passed, N failed[, N
# skipped]" line; a suite that exits non-zero or prints no summary counts as a failure,
# named at the end. The Python suites run in the project's .venv (dev/requirements.txt),
# set up on the first run; offline, they use python3 and skip what needs a missing package.
# FUZZ_SECONDS (default 10): seconds per libFuzzer harness in the fuzz smoke suite.
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0 skipped=0
broken=()

# run NAME COMMAND...: one suite
run() {
    local name=$1 log
    shift
    log=$(mktemp)
    echo "== $name: $*"
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    local summary
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    rm -f "$log"
    if [ -z "$summary" ]; then
        echo "FAIL: suite '$name' ended (exit $rc) without its summary line"
        failed=$((failed + 1))
        broken+=("$name (exit $rc, no summary)")
        return
    fi
    read -r p f s < <(echo "$summary" | sed -E 's/^([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?.*/\1 \2 \4/')
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL: suite '$name' exited $rc but reported no failure"
        failed=$((failed + 1))
        broken+=("$name (exit $rc)")
    elif [ "$f" -ne 0 ]; then
        broken+=("$name ($f failed)")
    fi
}

# The project's Python environment: .venv from dev/requirements.txt, made once, remade
# when the requirements change.
PY=python3
if [ -x .venv/bin/python ] && cmp -s dev/requirements.txt .venv/requirements.txt; then
    PY=.venv/bin/python
else
    echo "== setting up .venv from dev/requirements.txt (once; about a minute)"
    rm -rf .venv
    if python3 -m venv .venv && .venv/bin/python -m pip install --quiet --disable-pip-version-check -r dev/requirements.txt; then
        cp dev/requirements.txt .venv/requirements.txt
        PY=.venv/bin/python
    else
        rm -rf .venv
        echo "note: could not set up .venv (offline?): the Python suites run with python3 and skip what needs numpy, matplotlib or tokenizers"
    fi
fi

run headers bash dev/check_headers.sh
run encoding-names bash dev/check_encoding_names.sh  # no --pe or --pos named outside its table
run cuda-build bash dev/check_cuda_build.sh  # before test_gpt, whose GPU checks use these builds
run cuda-emu bash dev/cuda_emu/run.sh
run gpu-coverage bash dev/cuda_emu/coverage.sh  # memcheck's runs (dev/memcheck_runs.txt) launch every kernel of llmc/cuda
run gpu-plan env GPU_CHECK_DRY=1 bash dev/gpu_check.sh test_tmp/gpu_plan abcdefghivrRop  # every step, checked without a GPU
run gpu-check bash dev/test_gpu_check.sh  # the GPU check's bad input, failed steps, a kill mid-call, the plan's seconds
run test_gpt ./test_gpt
run kernel-isas bash dev/check_kernel_isas.sh
run no-openmp bash dev/check_no_openmp.sh  # make with a compiler without OpenMP (Apple's clang)
run user-build bash dev/check_user_build.sh  # a user's make warns, make test fails on a warning
run arm64 bash dev/check_arm64.sh  # the ARM build, cross-compiled and run under qemu
run bench-smoke env SMOKE=1 bash dev/bench_cpu.sh  # make bench runs through (no PyTorch, 3 steps)
run bench-smoke-avx2 env SMOKE=1 MARCH=x86-64-v3 bash dev/bench_cpu.sh  # ... built for the laptops' AVX2
run profile-smoke env SMOKE=1 bash dev/profile_cpu.sh  # make profile runs through (skipped without perf)
run data "$PY" data/test_data.py
run eval-scripts "$PY" dev/test_eval_scripts.py
run readme "$PY" dev/test_readme.py  # the README's commands as written on a fresh copy, its outputs, its lists against --help
run ablate "$PY" dev/test_ablate.py  # dev/ablate.py: --jobs, --gpus, --slurm on a real Slurm it starts (installs it as root)
run hf "$PY" dev/test_hf.py
run crash-safety "$PY" dev/test_crash_safety.py
run sanitizers bash dev/sanitize.sh
run fuzz-regressions bash dev/fuzz/run.sh --regress
run fuzz-smoke bash dev/fuzz/run.sh "${FUZZ_SECONDS:-10}"

echo
for b in "${broken[@]}"; do echo "failing suite: $b"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
