#!/usr/bin/env bash
# make profile: where the tiny model's training step goes on this CPU (`perf record`, the
# bench's tiny case: 30 steps, THREADS threads (default 2)), in the rows of doc/benchmarks.md's
# profile table, so that the two CPUs' profiles sit side by side. Needs perf (Debian's
# linux-perf) and a kernel that lets this user sample (perf_event_paranoid); make profile
# builds the trainer and the corpus first.
# SMOKE=1 (make test's profile-smoke suite): 3 steps, and a check that every row came out;
# skipped where perf cannot sample.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-2}
STEPS=${STEPS:-30}
SMOKE=${SMOKE:-0}
[ "$SMOKE" = 1 ] && STEPS=3
if ! command -v perf >/dev/null || ! perf record -q -o /dev/null true >/dev/null 2>&1; then
    echo "perf cannot sample here (not installed, or perf_event_paranoid forbids it)"
    if [ "$SMOKE" = 1 ]; then echo "SKIP: make profile (no perf)"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
perf record -q -F 1999 -o "$tmp/perf.data" ./train_gpt_cpu --steps "$STEPS" --val_every 0 --eval_len 0 \
    --threads "$THREADS" --out_dir "$tmp/run" > "$tmp/run.out" 2>&1
perf report -i "$tmp/perf.data" --stdio --no-children --sort dso,symbol 2>/dev/null > "$tmp/report.txt"
source dev/cpu_machine.sh
echo "profile of the tiny step at commit $(git rev-parse --short HEAD), $THREADS threads, $STEPS steps, $(cpu_machine)"
out=$(python3 - "$tmp/report.txt" <<'PY'
import re, sys
# each sample's share, by what doc/benchmarks.md's table calls it (first match wins)
rows = [("the packed products (the linear layers)", lambda d, s: s.startswith("gemm._omp") or s.startswith("gemm_tall")),
        ("attention's products", lambda d, s: s.startswith("gemm_tile") or s.startswith("gemm_serial")),
        ("the rest of attention", lambda d, s: s.startswith(("attention_", "rel_key", "transpose_rows"))),
        ("OpenMP's waits", lambda d, s: "libgomp" in d),
        ("SwiGLU", lambda d, s: s.startswith("swiglu")),
        ("the RMSNorms", lambda d, s: s.startswith("rmsnorm")),
        ("AdamW", lambda d, s: s.startswith("adamw")),
        ("the kernel (the buffers' first touch, once per run)", lambda d, s: d.startswith("[kernel")),
        ("the rest", lambda d, s: True)]
share = [0.0] * len(rows)
rest = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*([0-9.]+)%\s+(\S+)\s+\[[.k]\]\s+(\S+)", line)
    if not m:
        continue
    pct, dso, sym = float(m.group(1)), m.group(2), m.group(3)
    i = next(i for i, (_, f) in enumerate(rows) if f(dso, sym))
    share[i] += pct
    if i == len(rows) - 1:
        rest.append((pct, sym))
for (name, _), p in zip(rows, share):
    print(f"| {name} | {p:.1f}% |")
print("the rest's largest: " + ", ".join(f"{s} {p:.1f}%" for p, s in sorted(rest, reverse=True)[:5]))
PY
)
echo "$out"
if [ "$SMOKE" = 1 ]; then
    n=$(echo "$out" | grep -cE '^\| .* \| [0-9.]+% \|$' || true)
    if [ "$n" = 9 ]; then echo "PASS: make profile prints its 9 rows"; echo "1 passed, 0 failed"
    else echo "FAIL: make profile printed $n of its 9 rows"; echo "0 passed, 1 failed"; exit 1; fi
fi
