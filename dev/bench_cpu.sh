#!/usr/bin/env bash
# make bench: CPU training throughput of train_gpt_cpu against the same model in PyTorch
# (dev/bench_torch.py: float32, scaled_dot_product_attention, fused AdamW; eager and
# torch.compile), on the same machine, in the same run, with the same thread count.
# Prints tokens/s of each and the ratio C / best PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-12}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -c "import torch" 2>/dev/null || {
    echo "installing PyTorch (CPU wheel) for the comparison..."
    python3 -m pip install --quiet torch --index-url https://download.pytorch.org/whl/cpu ||
        python3 -m pip install --quiet torch
}
# random tokens for the 50K-vocab preset (the built-in corpus is bytes)
python3 data/shards.py --random 400000 50277 "$tmp/rand.bin"

# median tokens/s of steps 3.. of a C run's log
c_tok_s() {
    local dir=$1
    python3 - "$dir/log.jsonl" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
print(round(statistics.median(r["tok_s"] for r in rows[2:])))
PY
}

run_case() {
    local name=$1 cargs=$2 targs=$3
    ./train_gpt_cpu $cargs --steps $STEPS --warmup 2 --val_every 0 --eval_len 0 --threads "$THREADS" \
        --out_dir "$tmp/$name" > "$tmp/$name.out"
    local c=$(c_tok_s "$tmp/$name")
    local eager=$(python3 dev/bench_torch.py $targs --threads "$THREADS" --steps $((STEPS - 2)) | python3 -c "import json,sys; print(round(json.loads(sys.stdin.readlines()[-1])['tokens_per_s']))")
    local comp=$(python3 dev/bench_torch.py $targs --threads "$THREADS" --steps $((STEPS - 2)) --compile 2>/dev/null | python3 -c "import json,sys; print(round(json.loads(sys.stdin.readlines()[-1])['tokens_per_s']))" || echo 0)
    local best=$(( eager > comp ? eager : comp ))
    python3 -c "print(f'{\"$name\":<28} C {$c:>8} tok/s | PyTorch eager {$eager:>8} | compiled {$comp:>8} | C / best PyTorch {$c/$best:.2f}x')"
}

echo "CPU benchmark, $THREADS threads, median of steps 3..$STEPS ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
run_case "tiny (default, T=128, B=16)" "" "--C 128 --L 4 --NH 4 --NKV 2 --F 384 --T 128 --B 16 --V 257 --alpha 4"
run_case "10m (T=256, B=8, V=50277)" "--model 10m --seq_len 256 --batch_size 8 --total_batch 8 --vocab_size 50277 --train_data $tmp/rand.bin --pos fixed --alpha 4" \
    "--C 384 --L 6 --NH 6 --NKV 6 --F 1024 --T 256 --B 8 --V 50277 --alpha 4"
