#!/usr/bin/env bash
# PosAug's cost against plain RoPE, measured in one run two ways:
#  - instructions (valgrind callgrind, single thread, deterministic) of the same short CPU run;
#  - wall clock: rope and posaug runs interleaved, median ms/step of each.
# Usage: bash dev/overhead.sh [extra trainer flags]; the first part needs valgrind (NO_VALGRIND=1 skips it).
# On a GPU: TRAINER=./train_gpt bash dev/overhead.sh --model 10m --train_data ... (wall clock only).
set -euo pipefail
cd "$(dirname "$0")/.."
trainer=${TRAINER:-./train_gpt_cpu}
make -s data "${trainer#./}"
[ "$trainer" = ./train_gpt_cpu ] || NO_VALGRIND=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base="--steps 3 --warmup 1 --val_every 0 --eval_len 0 --threads 1 $*"
if [ -z "${NO_VALGRIND:-}" ] && command -v valgrind >/dev/null; then
    # valgrind does not decode AVX-512: an AVX2 build for the instruction count
    gcc -O3 -march=x86-64-v3 -std=c11 -ffp-contract=off -fopenmp -o "$tmp/train_avx2" train_gpt_cpu.c -lm
    for pos in rope posaug; do
        valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$pos" "$tmp/train_avx2" $base --pos $pos --out_dir "$tmp/$pos" \
            > /dev/null 2> "$tmp/vg.$pos"
    done
    python3 - "$tmp" <<'PY'
import re, sys
ins = {}
for pos in ("rope", "posaug"):
    text = open(f"{sys.argv[1]}/vg.{pos}").read()
    ins[pos] = int(re.search(r"Collected : (\d+)", text).group(1))
print(f"instructions (AVX2 build), 3 steps, 1 thread: rope {ins['rope']:,} | posaug {ins['posaug']:,} | "
      f"posaug / rope = {ins['posaug'] / ins['rope']:.5f}")
PY
fi
steps=${STEPS:-20}
for rep in 1 2 3; do
    for pos in rope posaug; do
        $trainer --steps $steps --warmup 2 --val_every 0 --eval_len 0 "$@" --pos $pos --out_dir "$tmp/w_${pos}_$rep" > /dev/null
    done
done
python3 - "$tmp" <<'PY'
import json, sys, glob, statistics
ms = {}
for pos in ("rope", "posaug"):
    rows = []
    for f in glob.glob(f"{sys.argv[1]}/w_{pos}_*/log.jsonl"):
        rows += [json.loads(l)["ms"] for l in open(f)][2:]
    ms[pos] = statistics.median(rows)
print(f"wall clock, median ms/step over 3 interleaved runs each: rope {ms['rope']:.1f} | posaug {ms['posaug']:.1f} | "
      f"posaug / rope = {ms['posaug'] / ms['rope']:.3f}")
PY
