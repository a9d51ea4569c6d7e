#!/usr/bin/env bash
# make test: every test program, then one closing line "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
log=$(mktemp)
status=0
run() {
    echo "== $*"
    "$@" 2>&1 | tee -a "$log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
run ./test_gpt
run python3 data/test_data.py
run python3 dev/test_eval_scripts.py
# every suite ends with "N passed, N failed[, N skipped]"; add them up
read -r p f s < <(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" |
    sed -E 's/^([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?.*/\1 \2 \4/' |
    awk '{p += $1; f += $2; s += ($3 == "" ? 0 : $3)} END {print p + 0, f + 0, s + 0}')
rm -f "$log"
echo "$p passed, $f failed, $s skipped"
[ "$status" -eq 0 ] && [ "$f" -eq 0 ]
