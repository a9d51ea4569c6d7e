#!/usr/bin/env bash
# make sanitize: the CPU trainer and test_gpt built with AddressSanitizer and
# UndefinedBehaviorSanitizer (alignment included; any report stops the program with a
# non-zero exit), then every test_gpt check against the sanitized trainer, and a short
# training with validation, evaluation, passkey and generation. Zero reports expected.
# Leak checking is off: fail() exits without freeing. About 3-6 minutes on 2 cores.
set -u
cd "$(dirname "$0")/.." || exit 1
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
if ! echo 'int main(void) { return 0; }' | gcc -fsanitize=address,undefined -x c - -o /tmp/san_probe_$$ 2>/dev/null; then
    echo "SKIP: sanitizers: gcc cannot build with -fsanitize=address,undefined here (libasan/libubsan missing)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
rm -f /tmp/san_probe_$$
p=0 f=0 s=0
result() { echo "$1: $2"; case $1 in PASS) p=$((p + 1)) ;; FAIL) f=$((f + 1)) ;; esac; }
if ! make -s train_gpt_cpu_san test_gpt_san data; then
    result FAIL "sanitizer builds (make train_gpt_cpu_san test_gpt_san) fail"
    echo "$p passed, $f failed, $s skipped"
    exit 1
fi
log=$(mktemp)
# every check of test_gpt, with the sanitized trainer behind its command lines
TRAINER=./train_gpt_cpu_san SANITIZED=1 ./test_gpt_san 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
read -r tp tf ts < <(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 | sed -E 's/^([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/')
p=$((p + ${tp:-0})) f=$((f + ${tf:-0})) s=$((s + ${ts:-0}))
if [ "$rc" -ne 0 ] && [ "${tf:-0}" -eq 0 ]; then result FAIL "test_gpt under sanitizers exited $rc"; fi
reports=$(grep -cE 'runtime error:|ERROR: AddressSanitizer' "$log")
[ "$reports" -eq 0 ] && result PASS "test_gpt under ASan+UBSan: no sanitizer report" ||
    result FAIL "test_gpt under ASan+UBSan: $reports sanitizer reports (above)"
# a short run through every phase of the trainer
out=$(mktemp -d)
small="--n_embd 32 --n_layer 2 --n_head 4 --n_kv_head 2 --ffn_hidden 64 --seq_len 32 --batch_size 2 --total_batch 4 --threads 2 --indist_start 8"
runs=(
    "train, validate, evaluate, passkey|$small --steps 4 --val_every 2 --pos posaug --eval_len 320 --eval_n 2 --gain_window 16 --passkey_lengths 300 --passkey_n 2 --out_dir $out/run"
    "evaluate a checkpoint with YaRN|$small --eval_only --resume $out/run/checkpoint.bin --eval_len 128 --eval_n 2 --scaling yarn"
    "generate from a checkpoint|$small --resume $out/run/checkpoint.bin --steps 0 --generate 40 --prompt 'The '"
)
for r in "${runs[@]}"; do
    name=${r%%|*} args=${r#*|}
    if eval ./train_gpt_cpu_san "$args" >"$log" 2>&1 && ! grep -qE 'runtime error:|ERROR: AddressSanitizer' "$log"; then
        result PASS "sanitized trainer: $name"
    else
        cat "$log"
        result FAIL "sanitized trainer: $name (output above)"
    fi
done
rm -rf "$out" "$log"
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
