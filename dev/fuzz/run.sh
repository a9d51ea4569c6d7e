#!/usr/bin/env bash
# Fuzz every harness, or replay the regression inputs (README.md).
#   dev/fuzz/run.sh [SECONDS]   build, make the seeds, run each harness for SECONDS (60):
#                               one PASS/FAIL/SKIP line per harness; a crash input is
#                               copied into regressions/<name>/
#   dev/fuzz/run.sh --regress   every regressions/<name>/* through its harness without
#                               libFuzzer (gcc, ASan, UBSan): one PASS/FAIL line per input
# Ends with "N passed, N failed, N skipped"; exits 1 when anything failed.
set -u
cd "$(dirname "$0")" || exit 1
NAMES="shard tensorfile tokenizer passkey args"
CLANG=${CLANG:-clang}
REPLAY_CC=${REPLAY_CC:-gcc}
export CLANG REPLAY_CC
passed=0 failed=0 skipped=0
result() {  # PASS|FAIL|SKIP message
    echo "$1: $2"
    case $1 in PASS) passed=$((passed + 1)) ;; FAIL) failed=$((failed + 1)) ;; SKIP) skipped=$((skipped + 1)) ;; esac
}
finish() {
    echo "$passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
    exit
}
# What a log reports: UBSan's "file:line:col: runtime error: ...", else the kind of error
# and the first stack frame in a reader (llmc/ but not utils.h), else in a harness.
why() {
    local line frame
    line=$(grep -m1 'runtime error: ' "$1") || {
        frame=$(grep -oE ' in [a-zA-Z_0-9]+ [^ ]*(llmc/|fuzz_[a-z]*\.c)[^ ]*' "$1" | grep -v 'llmc/utils\.h' | head -1)
        line="$(grep -m1 '^SUMMARY: ' "$1" | awk '{print $2, $3}')$frame"
    }
    echo "${line:-no sanitizer report}" | sed 's|[^ ]*\.\./\.\./||g'
}
mkdir -p build

if [ "${1:-}" = --regress ]; then
    # as under libFuzzer (Makefile): no leak check, no allocation over 2 GB; 30 s at most
    export ASAN_OPTIONS=detect_leaks=0:max_allocation_size_mb=2048 UBSAN_OPTIONS=print_stacktrace=1
    probe_ok=1
    echo 'int main(void) { return 0; }' | $REPLAY_CC -fsanitize=address,undefined -x c - -o build/probe 2>/dev/null || probe_ok=0
    for n in $NAMES; do
        inputs=$(find "regressions/$n" -type f 2>/dev/null | sort)
        [ -n "$inputs" ] || continue
        if [ $probe_ok = 0 ]; then
            result SKIP "fuzz regress $n: $REPLAY_CC cannot build with -fsanitize=address,undefined"
            continue
        fi
        if ! make -s build/replay_$n >build/replay_$n.log 2>&1; then
            result FAIL "fuzz regress $n: the replay does not build (dev/fuzz/build/replay_$n.log)"
            continue
        fi
        for f in $inputs; do
            if timeout 30 build/replay_$n "$f" >build/replay.log 2>&1; then
                result PASS "fuzz regress $f"
            else
                result FAIL "fuzz regress $f: $(why build/replay.log)"
            fi
        done
    done
    finish
fi

seconds=${1:-60}
missing=""
if ! command -v "$CLANG" >/dev/null; then
    missing="$CLANG not found"
elif ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' |
    "$CLANG" -fsanitize=fuzzer,address,undefined -x c - -o build/probe 2>/dev/null; then
    missing="$CLANG cannot build with -fsanitize=fuzzer (no libFuzzer)"
fi
for n in $NAMES; do
    if [ -n "$missing" ]; then
        result SKIP "fuzz $n: $missing"
        continue
    fi
    log=build/fuzz_$n.log
    rm -rf "build/crashes/$n"
    if ! make -s build/fuzz_$n seed-$n >"$log" 2>&1; then
        result FAIL "fuzz $n: the harness or its seeds do not build (dev/fuzz/$log)"
        continue
    fi
    start=$SECONDS
    make -s fuzz-$n FUZZ_SECONDS="$seconds" >"$log" 2>&1
    rc=$?
    took=$((SECONDS - start))
    execs=$(grep -o 'number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$')
    crash=$(find "build/crashes/$n" -type f ! -name 'slow-unit-*' 2>/dev/null | head -1)  # a slow unit is no failure
    if [ $rc -eq 0 ] && [ -z "$crash" ]; then
        result PASS "fuzz $n: ${execs:-?} executions, 0 crashes in $took s"
    elif [ -n "$crash" ]; then
        mkdir -p "regressions/$n"
        cp "$crash" "regressions/$n/"
        result FAIL "fuzz $n: $(why "$log") after ${execs:-?} executions in $took s; crash input saved as dev/fuzz/regressions/$n/$(basename "$crash") (log dev/fuzz/$log)"
    else
        result FAIL "fuzz $n: libFuzzer exited with $rc and saved no input (dev/fuzz/$log)"
    fi
done
finish
