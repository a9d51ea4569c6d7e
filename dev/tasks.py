"""The RFS paper's length-generalization comparison (its Figures 2-3) at CPU scale: one
command per task.

    python dev/tasks.py --task copy                 # data, 5 models, table and plot in runs/task_copy_cpu/
    python dev/tasks.py --task reverse --steps 3000 --train_len 8
    python dev/tasks.py --task copy --dry_run       # print the commands only

Rows: NoPE, RoPE, RoPE+RFS, sinusoidal+RFS (the paper's two RFS encodings), RoPE+PosAug.
Each trains the tiny preset from scratch on data/rfs_tasks.py's examples of lengths
1..--train_len (loss on the answers only, one example per window of --seq_len tokens),
then --task_eval decodes every test example greedily (lengths 1..3x) and scores exact
match. A row whose <out>/<slug>/eval_L0_task.json exists is skipped (--force reruns).

Output in --out (default runs/task_<task>_cpu): data/ (the task files), <slug>/ (one run
folder per row), table.md and table.csv (accuracy by length, and by seen / 1-2x / 2-3x
ranges), accuracy.png (accuracy against length, the training lengths shaded),
timings.json.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROWS = [
    ("nope", "NoPE", ["--pe", "nope"]),
    ("rope", "RoPE", []),
    ("rope_rfs", "RoPE+RFS", ["--pos", "rfs"]),
    ("sinusoidal_rfs", "sinusoidal+RFS", ["--pe", "sinusoidal", "--pos", "rfs"]),
    ("rope_posaug", "RoPE+PosAug", ["--pos", "posaug"]),
]


def die(msg):
    sys.exit("tasks.py: error: " + msg)


def run(cmd, log, dry):
    print(" ".join(cmd))
    if dry:
        return 0.0
    t0 = time.time()
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if rc:
        die("%s failed (exit %d); see %s" % (cmd[0], rc, log))
    return time.time() - t0


def ranges(train_len, test_len):
    """(label, lo, hi) length ranges: seen, then 1-2x and 2-3x the training lengths."""
    out = [("seen 1-%d" % train_len, 1, train_len)]
    for k in (2, 3):
        lo, hi = (k - 1) * train_len + 1, min(k * train_len, test_len)
        if lo <= hi:
            out.append(("%d-%d (%dx)" % (lo, hi, k), lo, hi))
    return out


def write_report(args, results):
    lens = results[0][2]["lengths"]
    test_len = max(lens)
    rg = ranges(args.train_len, test_len)
    md = ["# Length generalization: %s (exact match)" % args.task, "",
          "CPU scale: the tiny preset (w = %d), %d steps on %s examples of lengths 1..%d, loss on the answers; "
          "%d test examples per length; written by `python dev/tasks.py --task %s%s`." % (
              args.seq_len, args.steps, args.task, args.train_len, args.n_test, args.task,
              "" if args.steps == 4000 else " --steps %d" % args.steps), "",
          "| row | " + " | ".join(r[0] for r in rg) + " |", "| --- |" + " --- |" * len(rg)]
    for slug, label, j in results:
        acc = dict(zip(j["lengths"], j["accuracy"]))
        cells = []
        for _, lo, hi in rg:
            vals = [acc[k] for k in range(lo, hi + 1) if k in acc]
            cells.append("%.2f" % (sum(vals) / len(vals)) if vals else "-")
        md.append("| %s | %s |" % (label, " | ".join(cells)))
    md += ["", "By length:", "", "| length | " + " | ".join(r[1] for r in results) + " |",
           "| --- |" + " --- |" * len(results)]
    for k in lens:
        md.append("| %d%s | %s |" % (k, " (seen)" if k <= args.train_len else "",
                                      " | ".join("%.2f" % dict(zip(j["lengths"], j["accuracy"]))[k] for _, _, j in results)))
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(args.out, "table.csv"), "w") as f:
        f.write("length," + ",".join(s for s, _, _ in results) + "\n")
        for k in lens:
            f.write("%d,%s\n" % (k, ",".join("%.4f" % dict(zip(j["lengths"], j["accuracy"]))[k] for _, _, j in results)))
    print("\n".join(md))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: no matplotlib: accuracy.png not drawn")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.axvspan(0.5, args.train_len + 0.5, color="0.9", label="training lengths")
    for _, label, j in results:
        ax.plot(j["lengths"], j["accuracy"], marker=".", label=label)
    ax.set_xlabel("input length (%s)" % ("words" if args.task in ("copy", "reverse") else
                                         "digits" if args.task == "addition" else "items"))
    ax.set_ylabel("exact-match accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("%s task, tiny model, trained on lengths 1-%d" % (args.task, args.train_len))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "accuracy.png"), dpi=120)
    print("wrote %s" % os.path.join(args.out, "accuracy.png"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", required=True, choices=["copy", "reverse", "addition", "sort", "summation"])
    ap.add_argument("--train_len", type=int, default=8)
    ap.add_argument("--seq_len", type=int, default=48)
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--n_test", type=int, default=20)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--rows", default="", help="comma-separated slugs (default: all)")
    ap.add_argument("--trainer", default="./train_gpt_cpu")
    ap.add_argument("--out", default=None)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--dry_run", action="store_true")
    args = ap.parse_args()
    args.out = args.out or os.path.join("runs", "task_%s_cpu" % args.task)
    rows = [r for r in ROWS if not args.rows or r[0] in args.rows.split(",")]
    if not rows:
        die("--rows %s matches none of %s" % (args.rows, ", ".join(r[0] for r in ROWS)))
    if not args.dry_run and not os.access(os.path.join(ROOT, args.trainer), os.X_OK):
        die("%s is not built (make)" % args.trainer)
    data = os.path.join(args.out, "data")
    if not args.dry_run:
        os.makedirs(data, exist_ok=True)
    gen = [sys.executable, "data/rfs_tasks.py", "--task", args.task, "--train_len", str(args.train_len),
           "--seq_len", str(args.seq_len), "--n_test", str(args.n_test), "--out_dir", data]
    if args.force or not os.path.exists(os.path.join(data, "test.bin")):
        run(gen, os.path.join(args.out, "data.log"), args.dry_run)
    timings, results = {}, []
    for slug, label, flags in rows:
        rd = os.path.join(args.out, slug)
        js = os.path.join(rd, "eval_L0_task.json")
        cmd = [args.trainer, "--model", "tiny", "--seq_len", str(args.seq_len), "--batch_size", "32", "--total_batch", "32",
               "--steps", str(args.steps), "--warmup", "50", "--val_every", "0", "--eval_len", "0", "--seed", str(args.seed),
               "--train_data", os.path.join(data, "train.bin"), "--val_data", os.path.join(data, "val.bin"),
               "--task_eval", os.path.join(data, "test.bin"), "--out_dir", rd, "--overwrite"] + flags  # the row's folder
        if args.force or not os.path.exists(js):
            if not args.dry_run:
                os.makedirs(rd, exist_ok=True)
            timings[slug] = round(run(cmd, os.path.join(rd, "train.log"), args.dry_run), 1)
        if not args.dry_run:
            with open(js) as f:
                results.append((slug, label, json.load(f)))
    if args.dry_run:
        return
    with open(os.path.join(args.out, "timings.json"), "w") as f:
        json.dump(timings, f, indent=1)
    write_report(args, results)


if __name__ == "__main__":
    main()
