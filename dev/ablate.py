"""Run one of the PosAug paper's tables with the C trainers: one command per table.

    python dev/ablate.py --table 6 --train_data 'data/openwebtext/*_train_*.bin' \\
        --val_data 'data/openwebtext/*_val_*.bin'              # GPU, 10M, the paper's settings
    python dev/ablate.py --table 7 --cpu                        # CPU scale: tiny model, built-in corpus
    python dev/ablate.py --table 15 --cpu --seeds 42,137,2024   # mean +- std over seeds
    python dev/ablate.py --table 6 --dry_run                    # print the commands only
    python dev/ablate.py --table pe-survey --cpu                # the PE survey's benchmark, 20x the window

Tables (doc/schemes.md lists every scheme and the paper's numbers):
    4   PosAug vs RPE (final protocol, eval at 16K; RPE max 16K / 32K = 8w / 16w)
    5   wider alpha ranges [1/8,8], [1/16,16], [1/32,32] (eval at 16K)
    6   is randomness necessary: fixed, discrete, cycling, random base (and PoSE, not in the paper)
    7   lower-bound isolation: [1/8,8], [1,8], [1/2,8], [1/8,1]
    8   curriculum (linear, step), log-uniform, [1/16,16]
    9   depth vs width (Deep L=12, Standard L=6, Wide L=3; one baseline per shape)
    10  per-layer scaling: bottom, top, independent
    11  PosAug vs longer training windows (same tokens: steps scale with 1/w)
    15  RoPE, ALiBi, NoPE, RoPE+PosAug (+ ALiBi+PosAug), GRU, cliff at 2w and 4w
    pe-survey  the PE survey's benchmark (seed 003): every encoding, trained at w, evaluated at
        20w, perplexity in the window and past it; the survey's scale on the GPU (C 128, 4 heads,
        2 layers, w 512); a learned table sized to 20w as the survey does (--wpe_rows)

Modes:
- GPU (default): `./train_gpt`, the 10M preset (`--model 10m`: C=384, L=6, w=2048,
  1907 steps of 128 sequences), evaluation at 8K (Tables 4 and 5: 16K), prepared data
  required (`--train_data`, `--val_data`, `--vocab_size`, default 50277 = GPT-NeoX).
- `--cpu`: `./train_gpt_cpu`, the tiny preset (C=128, L=4, w=128, 600 steps) on the
  built-in corpus unless --train_data is given, evaluation at 8w = 1024 for every table
  (Table 15: 2w and 4w). Each run takes about 1-2 minutes on 2 idle cores. The numbers
  are not the paper's; the comparison is qualitative (which row has the lower cliff).

Run it from the repository root (the trainers' default data paths are relative to it).
A run is one row and one seed. Runs go one after another, in table order; a run whose
evaluation JSON exists is skipped (rerun the same command to resume an interrupted
table; --force reruns); a run folder with a checkpoint but no evaluation resumes from it
(GPU runs write a checkpoint every --ckpt_every steps). A fine-tune row starts from its
baseline's run of the same seed only once that run has finished its evaluation. Rows
needing a flag (or a --pos / --pe value) the trainer binary does not list in its --help
are skipped with a message (rebuild with `make`).

Where the runs run (the commands, and so the table, are the same; doc/cluster.md):
    --gpus 0,1,2,3   up to one run per listed GPU at a time (CUDA_VISIBLE_DEVICES per run)
    --jobs 2         --cpu: up to 2 runs at a time, the cores split between them (--threads)
    --slurm          a Slurm job array, one task per run (<out>/slurm/ablate.sbatch), submitted
                     with sbatch; rerun the same command when it ends to write the table and
                     resubmit what failed (--collect: write and list only, submit nothing)

Output in --out (default runs/table<N>, runs/table<N>_cpu with --cpu; runs/pe-survey[_cpu]):
    <slug>_seed<S>/      one run folder per row and seed (log, checkpoint, eval_*.json/.csv,
                         train.log = the trainer's output)
    table.md             dev/eval_table.py's table (baseline row as baseline; mean +- std
                         over seeds), then ours next to the paper's numbers
    table.csv            the same numbers as CSV
    loss.png, gain.png   dev/plot_eval.py (first seed of each row)
    timings.json         wall time of every run (train, each evaluation), by row and seed
                         (each run's own in <slug>_seed<S>/timings.json)
    slurm/               with --slurm: the array script, the submitted jobs (jobs.json) and
                         each task's Slurm log (<job>_<task>.log)
"""
import argparse
import concurrent.futures
import glob
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import eval_table  # noqa: E402 (numpy)


class W:
    """A flag value in units of the row's training window: W(8) is 8w (16384 on the GPU)."""

    def __init__(self, k):
        self.k = k

POSAUG = ["--pos", "posaug", "--alpha_range", "0.125,8"]
ROPE = ["--pos", "rope"]


def row(slug, label, flags=None, paper=None, baseline=False, group=None,
        model=None, steps_scale=1.0, eval_factor=None, note=None, init=None):
    """A table row. flags: trainer flags of the scheme. paper: dict of the paper's numbers
    (cliff, G, in_dist, and for Table 15 cliff2x, cliff4x). model: 'deep' / 'wide' shape
    (Table 9). steps_scale: steps and warmup times this (Table 11). eval_factor: L_eval in
    units of the row's own window (default: the table's L_eval). init: a fine-tune: the slug
    of the row (same seed) whose checkpoint it starts from (--init_from, a new optimizer and
    schedule), for FINE_TUNE of the preset's steps and warmup."""
    return dict(slug=slug, label=label, flags=flags or [], paper=paper or {}, baseline=baseline,
                group=group, model=model, steps_scale=steps_scale,
                eval_factor=eval_factor, note=note, init=init)


# A fine-tune row's share of the preset's steps and warmup, at a constant learning rate, the
# one the baseline's cosine ends at (the preset's min_lr): the PosAug paper's retrofit is the
# last 10% of the budget (the end of the cosine); PoSE fine-tunes a trained model briefly at a
# small rate. At the peak rate instead, 60 PosAug steps took the tiny model's in-window loss
# from 0.66 to 1.85.
FINE_TUNE = 0.1


def P(cliff=None, G=None, in_dist=None, **kw):
    d = dict(cliff=cliff, G=G, in_dist=in_dist)
    d.update(kw)
    return d


# L_eval and the paper's G length C, in units of the training window w (2048 in the paper):
# 16K = 8w, 8K = 4w. In --cpu mode L_eval is always 8w (the tiny model's default).
TABLES = {
    4: dict(title="Table 4. PosAug vs RPE (10.6M, final protocol, eval at 16K)",
            eval_w=8, gain_w=4, rows=[
                row("rope", "Baseline (RoPE)", ROPE, P(1.915, -0.324, 4.087), baseline=True),
                row("posaug", "PosAug [1/8, 8]", POSAUG, P(0.060, 1.025, 4.160, penalty="1.8%")),
                row("rpe16k", "RPE max=16K (8w)", ["--pos", "rpe", "--rpe_max", W(8)],
                    P(0.117, 0.311, 4.670, penalty="14.3%")),
                row("rpe32k", "RPE max=32K (16w)", ["--pos", "rpe", "--rpe_max", W(16)],
                    P(0.107, 0.141, 5.100, penalty="24.8%")),
            ], note="The paper's G column is G(8K) although L_eval is 16K: table.md's G column is "
                    "eval_table's largest common C (L_eval); the comparison below gives G at 4w."),
    5: dict(title="Table 5. Extended alpha range (10M, eval at 16K)", eval_w=8, gain_w=None, rows=[
                row("rope", "Baseline (RoPE)", ROPE, baseline=True,
                    note="not in the paper's table; its penalties imply an in-dist of about 4.08"),
                row("posaug_8", "PosAug [1/8, 8] (L_max 16K)", POSAUG, P(0.081, None, 4.157, penalty="1.8%")),
                row("posaug_16", "PosAug [1/16, 16] (L_max 32K)", ["--pos", "posaug", "--alpha_range", "0.0625,16"],
                    P(0.168, None, 4.412, penalty="8.0%")),
                row("posaug_32", "PosAug [1/32, 32] (L_max 64K)", ["--pos", "posaug", "--alpha_range", "0.03125,32"],
                    P(0.077, None, 4.489, penalty="9.8%")),
            ], note="The paper's in-dist column is 'Val Loss'."),
    "pe-survey": dict(
        title="The PE survey's benchmark: trained at w, evaluated at 20w (perplexity in the window and past it)",
        eval_w=None, gain_w=None, evals=(20,), rows=[
            row("rope", "RoPE", ROPE, P(ppl_in=5657.39, ppl_out=1.0057), baseline=True),
            row("fape", "FAPE (sinusoidal)", ["--pe", "sinusoidal"], P(note="the survey: all four extrapolate")),
            row("lpe", "LPE (learned, 20w rows)", ["--pe", "learned", "--wpe_rows", W(20)],
                P(note="the survey: the worst in the window")),
            row("shaw", "RPE (Shaw, relative keys)", ["--pe", "shaw"]),
            row("tpe", "T-PE (keys from h(distance))", ["--pe", "tpe"]),
            row("tupe", "TUPE (untied positions, 20w rows)", ["--pe", "tupe", "--wpe_rows", W(20)]),
            row("erpe", "eRPE (a bias per distance)", ["--pe", "erpe"]),
            row("t5", "T5 bias (log buckets)", ["--pe", "t5"]),
            row("tape", "tAPE (sinusoidal, f x C/w)", ["--pe", "tape"]),
            row("alibi", "ALiBi", ["--pe", "alibi"]),
            row("kerple", "KERPLE (log variant)", ["--pe", "kerple"]),
            row("kerple_power", "KERPLE (power variant)", ["--pe", "kerple-power"]),
            row("fire", "FIRE (an MLP of the normalized distance)", ["--pe", "fire"]),
            row("nope", "NoPE", ["--pe", "nope"]),
            row("posaug", "RoPE+PosAug [1/8, 8]", POSAUG),
            row("pose", "RoPE+PoSE (L_t = 20w)", ["--pos", "pose", "--pose_target", W(20)]),
        ], preset=dict(gpu=dict(model="tiny", model_flags=["--n_layer", "2", "--n_kv_head", "4", "--seq_len", "512"],
                                w=512, steps=1907, warmup=100)),
        note="The survey trains a small encoder-decoder on synthetic data (d_model 128, 4 heads, 2 layers, w 512, "
             "evaluated at 10,240) and reports FAPE, LPE, RPE (Shaw) and RoPE; ours is decoder-only on our corpus, "
             "with every encoding the trainer has. Its perplexities are its own task's, not comparable in value: "
             "compare the ordering."),
    6: dict(title="Table 6. Is randomness necessary? (10.6M, ablation family, eval at 8K)",
            eval_w=4, gain_w=4, rows=[
                row("rope", "Baseline", ROPE, P(2.28, -0.57, 4.04, delta=0.00), baseline=True),
                row("posaug", "PosAug U[1/8, 8]", POSAUG, P(1.07, 0.42, 4.10, delta=0.06)),
                row("fixed8", "Fixed alpha = 8", ["--pos", "fixed", "--alpha", "8"], P(0.29, -0.19, 5.69, delta=1.66)),
                row("fixed4", "Fixed alpha = 4", ["--pos", "fixed", "--alpha", "4"], P(0.58, -0.22, 5.50, delta=1.46)),
                row("discrete", "Discrete {1, 2, 4, 8}", ["--pos", "discrete", "--alpha_set", "1,2,4,8"],
                    P(1.05, -0.06, 4.10, delta=0.07)),
                row("cycle", "Cycling 1 -> 2 -> 4 -> 8", ["--pos", "cycle", "--alpha_set", "1,2,4,8"],
                    P(1.14, -0.09, 4.10, delta=0.06)),
                row("random_base", "Random RoPE base [B0/8, 8 B0]", ["--pos", "random-base"],
                    P(1.09, -0.26, 4.05, delta=0.01)),
                row("pose", "PoSE, target 8w (Zhu et al. 2023)", ["--pos", "pose", "--pose_target", W(8)],
                    note="not in the paper: the nearest training-time rival, from scratch without interpolation "
                         "(this project's variant)"),
                row("rope_ft", "Baseline + 10% more RoPE steps (fine-tune control)", ROPE, init="rope",
                    note="not in the paper: the extra steps of the fine-tunes below, without a scheme"),
                row("posaug_ft", "Baseline fine-tuned with PosAug [1/8, 8] (10%)", POSAUG, init="rope",
                    note="the PosAug paper's retrofit (Section 5.6), from the baseline's end at its final learning rate"),
                row("pose_ft_linear", "Baseline fine-tuned with PoSE 8w + linear (10%)",
                    ["--pos", "pose", "--pose_target", W(8), "--pose_scaling", "linear"], init="rope",
                    note="PoSE's regime: a short fine-tune of a trained model, skips with linear interpolation s = 8"),
                row("pose_ft_yarn", "Baseline fine-tuned with PoSE 8w + YaRN (10%)",
                    ["--pos", "pose", "--pose_target", W(8), "--pose_scaling", "yarn"], init="rope",
                    note="as above with PoSE's revised YaRN (s = 8)"),
            ]),
    7: dict(title="Table 7. Lower-bound isolation (10.6M, ablation family, eval at 8K)",
            eval_w=4, gain_w=4, rows=[
                row("rope", "Baseline (for delta)", ROPE, P(2.28, -0.57, 4.04, delta=0.00), baseline=True,
                    note="Table 6's baseline"),
                row("posaug", "[1/8, 8] (reference)", POSAUG, P(1.07, 0.42, 4.10, delta=0.06)),
                row("posaug_1_8", "[1, 8] (upper-only)", ["--pos", "posaug", "--alpha_range", "1,8"],
                    P(1.15, -0.12, 4.11, delta=0.08)),
                row("posaug_half_8", "[1/2, 8]", ["--pos", "posaug", "--alpha_range", "0.5,8"],
                    P(1.15, 0.22, 4.11, delta=0.07)),
                row("posaug_8th_1", "[1/8, 1] (downscale-only)", ["--pos", "posaug", "--alpha_range", "0.125,1"],
                    P(2.17, 0.24, 4.09, delta=0.06)),
            ]),
    8: dict(title="Table 8. Curriculum, distribution and range variants (10.6M, ablation family, eval at 8K)",
            eval_w=4, gain_w=4, rows=[
                row("rope", "Baseline (no aug)", ROPE, P(2.28, -0.57, 4.04, delta=0.00), baseline=True),
                row("posaug", "PosAug U[1/8, 8] (ref)", POSAUG, P(1.07, 0.42, 4.10, delta=0.06)),
                row("curr_linear", "Curriculum linear [1/2,2] -> [1/8,8]",
                    ["--pos", "curriculum-linear", "--alpha_range", "0.125,8"], P(0.88, 0.39, 4.10, delta=0.06)),
                row("curr_step", "Curriculum step [1/8, 8]",
                    ["--pos", "curriculum-step", "--alpha_range", "0.125,8", "--curriculum_frac", "0.5"],
                    P(0.72, 0.40, 4.09, delta=0.06)),
                row("posaug_log", "Log-uniform [1/8, 8]", ["--pos", "posaug-log", "--alpha_range", "0.125,8"],
                    P(0.96, 0.59, 4.12, delta=0.08)),
                row("posaug_16", "PosAug U[1/16, 16]", ["--pos", "posaug", "--alpha_range", "0.0625,16"],
                    P(0.37, 0.38, 4.13, delta=0.09)),
                row("curr_step_16", "Curriculum step [1/16, 16]",
                    ["--pos", "curriculum-step", "--alpha_range", "0.0625,16", "--curriculum_frac", "0.5"],
                    P(0.24, 0.43, 4.12, delta=0.08)),
                row("curr_step_log", "Curriculum step + log-uniform [1/8, 8]",
                    ["--pos", "curriculum-step", "--alpha_range", "0.125,8", "--curriculum_frac", "0.5",
                     "--curriculum_dist", "log"], P(0.89, 0.61, 4.09, delta=0.05)),
            ]),
    9: dict(title="Table 9. Depth vs width (~10-15M, 500M tokens, eval at 8K)", eval_w=4, gain_w=4, rows=[
                row("deep_rope", "Deep (L=12) baseline", ROPE, P(1.87, -0.53, 4.03), baseline=True, group="deep",
                    model="deep"),
                row("deep_posaug", "Deep (L=12) PosAug", POSAUG, P(0.80, 0.50, 4.09, reduction="2.3x"),
                    group="deep", model="deep"),
                row("std_rope", "Standard (L=6) baseline", ROPE, P(2.28, -0.57, 4.04), baseline=True, group="standard"),
                row("std_posaug", "Standard (L=6) PosAug", POSAUG, P(1.07, 0.42, 4.10, reduction="2.1x"),
                    group="standard"),
                row("wide_rope", "Wide (L=3) baseline", ROPE, P(2.60, -0.60, 4.08), baseline=True, group="wide",
                    model="wide"),
                row("wide_posaug", "Wide (L=3) PosAug", POSAUG, P(1.00, 0.23, 4.21, reduction="2.6x"),
                    group="wide", model="wide"),
            ]),
    10: dict(title="Table 10. Per-layer scaling (10.6M, ablation family, eval at 8K)", eval_w=4, gain_w=4, rows=[
                row("rope", "Baseline (for delta)", ROPE, P(2.28, -0.57, 4.04, delta=0.00), baseline=True,
                    note="Table 6's baseline"),
                row("posaug", "PosAug all layers (ref)", POSAUG + ["--pos_layers", "all"], P(1.07, 0.42, 4.10, delta=0.06)),
                row("bottom", "Bottom layers only", POSAUG + ["--pos_layers", "bottom"], P(2.36, -0.64, 4.06, delta=0.02)),
                row("top", "Top layers only", POSAUG + ["--pos_layers", "top"], P(1.50, -0.19, 4.09, delta=0.05)),
                row("independent", "Independent per-layer", POSAUG + ["--pos_layers", "independent"],
                    P(0.73, 0.04, 4.19, delta=0.15)),
            ]),
    11: dict(title="Table 11. PosAug vs longer training windows (10.6M, same tokens, eval at 8K)",
             eval_w=4, gain_w=4, rows=[
                row("rope_w1", "Baseline, w", ROPE, P(2.28, -0.57, 4.04), baseline=True),
                row("posaug_w1", "PosAug [1/8, 8], w", POSAUG, P(1.07, 0.42, 4.10)),
                row("rope_w2", "Baseline, 2w", ROPE, P(1.32, -0.39, 4.39), steps_scale=0.5),
                row("posaug_w2", "PosAug [1/8, 8], 2w", POSAUG, P(0.06, 0.32, 4.52), steps_scale=0.5),
                row("rope_w4", "Baseline, 4w", ROPE, P(0.19, -0.25, 5.01), steps_scale=0.25, eval_factor=2,
                    note="evaluated at 2 x its window (the trainer needs L_eval > w; the paper's 8K = its window)"),
            ], note="Windows w, 2w, 4w (2048/4096/8192 on the GPU, 128/256/512 on the CPU); the same "
                    "sequences per step, so the same tokens means steps and warmup times w/w'. Every row "
                    "uses the gain window of w."),
    15: dict(title="Table 15. Cross-PE comparison (10.6M, w = 2048): cliff at 2w and 4w", eval_w=None, gain_w=None,
             evals=(2, 4), rows=[
                row("rope", "RoPE", ROPE, P(in_dist=4.04, cliff2x=1.80, cliff4x=2.25), baseline=True),
                row("alibi", "ALiBi", ["--pe", "alibi"], P(in_dist=3.97, cliff2x=-0.10, cliff4x=-0.01)),
                row("nope", "NoPE", ["--pe", "nope"], P(in_dist=4.30, cliff2x=1.92, cliff4x=7.46)),
                row("posaug", "RoPE+PosAug", POSAUG, P(in_dist=4.10, cliff2x=-0.08, cliff4x=0.06)),
                row("alibi_posaug", "ALiBi+PosAug", ["--pe", "alibi"] + POSAUG,
                    P(note="no numbers; Section 5: 'no benefit'")),
                row("gru", "GRU (no PE)", [], P(in_dist=4.77, cliff2x=-0.03, cliff4x=-0.10), model="gru42m",
                    note="a stacked GRU (--arch gru), 42.5M without embedding as in the paper (CPU: gru-tiny, "
                         "0.79M, as the tiny transformer)"),
            ], note="The paper's In-dist column is read as the RoPE-relative in-distribution loss; "
                    "the comparison gives the in-dist of the 2x evaluation (the two evaluations read different "
                    "validation spans, so their in-dist differ slightly)."),
}

# --cpu stand-ins for the Deep / Wide shapes (parameter ratios to the tiny preset about those
# of the paper's Deep (1.4x) and Wide (0.7x) to the 10M model).
CPU_SHAPES = {"deep": ["--n_layer", "8", "--n_embd", "96"], "wide": ["--n_layer", "2", "--n_embd", "160"]}
# --cpu stand-ins for other models: Table 15's GRU (non-embedding parameters as the tiny preset's)
CPU_MODELS = {"gru42m": ["--model", "gru-tiny"]}
PRESET = {"gpu": dict(model="10m", w=2048, steps=1907, warmup=500, gain_window=512, min_lr=6e-5),
          "cpu": dict(model="tiny", w=128, steps=600, warmup=30, gain_window=32, min_lr=3e-4)}


def die(msg):
    sys.exit("ablate.py: error: " + msg)


def fmt_cmd(cmd):
    return " ".join(shlex.quote(c) for c in cmd)


def fmt_len(n):
    return "%dK" % (n // 1024) if n % 1024 == 0 and n >= 1024 else str(n)


class Run:
    """One row x seed: its training command and evaluation commands."""

    def __init__(self, r, seed, rundir, train, evals, tags, steps):
        self.r, self.seed, self.dir = r, seed, rundir
        self.train, self.evals, self.tags = train, evals, tags
        self.steps = steps              # optimizer steps the training runs to
        self.baseline_json = None
        self.init_run = None            # a fine-tune: the run (same seed) whose checkpoint it starts from

    @property
    def name(self):
        return os.path.basename(self.dir)

    def json(self, tag):
        return os.path.join(self.dir, tag + ".json")

    @property
    def ckpt(self):
        return os.path.join(self.dir, "checkpoint.bin")

    @property
    def log(self):
        return os.path.join(self.dir, "train.log")

    def finished(self):
        """True when every evaluation of the run is on disk."""
        return all(os.path.exists(self.json(t)) for t in self.tags)


def preset(spec, mode):
    """The table's model and schedule: the mode's preset, or the table's own."""
    return dict(PRESET[mode], **spec.get("preset", {}).get(mode, {}))


def build_runs(args, spec, mode):
    pre = preset(spec, mode)
    w0 = pre["w"]
    runs = []
    data = []
    if args.train_data:
        data += ["--train_data", args.train_data]
    if args.val_data:
        data += ["--val_data", args.val_data]
    if args.vocab_size:
        data += ["--vocab_size", str(args.vocab_size)]
    for r in spec["rows"]:
        # the model: preset (or Table 9's shape), window, vocabulary; repeated by --eval_only
        model = ["--model", pre["model"]] + pre.get("model_flags", [])
        if r["model"]:
            model = (["--model", r["model"]] if mode == "gpu" else CPU_MODELS[r["model"]] if r["model"] in CPU_MODELS
                     else model + CPU_SHAPES[r["model"]])
        w = w0
        if r["steps_scale"] != 1.0:
            w = int(round(w0 / r["steps_scale"]))
            model += ["--seq_len", str(w)]
        extra = []
        if r["steps_scale"] != 1.0:
            extra += ["--steps", str(int(round(pre["steps"] * r["steps_scale"]))),
                      "--warmup", str(max(1, int(round(pre["warmup"] * r["steps_scale"]))))]
        steps = int(round(pre["steps"] * r["steps_scale"]))
        if r["init"]:
            steps = max(1, int(round(pre["steps"] * FINE_TUNE)))
            extra += ["--steps", str(steps), "--warmup", str(max(1, int(round(pre["warmup"] * FINE_TUNE)))),
                      "--lr", "%g" % pre["min_lr"], "--min_lr", "%g" % pre["min_lr"]]
        if args.table == 11:
            extra += ["--gain_window", str(pre["gain_window"])]
        if mode == "gpu" and args.ckpt_every:
            extra += ["--ckpt_every", str(args.ckpt_every)]
        flags = [str(f.k * w) if isinstance(f, W) else f for f in r["flags"]]
        for seed in args.seeds:
            rundir = os.path.join(args.out, "%s_seed%d" % (r["slug"], seed))
            init = ["--init_from", os.path.join(args.out, "%s_seed%d" % (r["init"], seed), "checkpoint.bin")] \
                if r["init"] else []
            base = [args.trainer] + model + data
            eval_base = [args.trainer] + model + data[2:] if args.train_data else base
            if spec.get("evals"):   # Table 15, pe-survey: train without evaluation, then --eval_only at k*w
                train = base + flags + extra + ["--seed", str(seed), "--out_dir", rundir, "--eval_len", "0"]
                evals, tags = [], []
                for k in spec["evals"]:
                    tag = "eval_%dx" % k
                    evals.append(eval_base + ["--resume", os.path.join(rundir, "checkpoint.bin"), "--eval_only",
                                         "--eval_len", str(k * w), "--eval_tag", tag])
                    tags.append(tag)
            else:
                L = (r["eval_factor"] or (8 if mode == "cpu" else spec["eval_w"])) * (w if r["eval_factor"] else w0)
                train = base + init + flags + extra + ["--seed", str(seed), "--out_dir", rundir, "--eval_len", str(L)]
                evals, tags = [], ["eval_L%d" % L]
            runs.append(Run(r, seed, rundir, train, evals, tags, steps))
    for run in runs:
        run.init_run = next((b for b in runs if b.r["slug"] == run.r["init"] and b.seed == run.seed), None)
    runs = [run for run in runs if not args.rows or run.r["slug"] in args.rows]
    # --baseline JSON for the non-baseline rows (same group, seed and evaluation tag)
    for run in runs:
        if run.r["baseline"] or spec.get("evals"):
            continue
        for b in runs:
            if b.r["baseline"] and b.r["group"] == run.r["group"] and b.seed == run.seed and b.tags == run.tags:
                run.baseline_json = b.json(b.tags[0])
                run.train = run.train + ["--baseline", run.baseline_json]
    return runs


def last_step(run):
    """The last step the run folder's log.jsonl records (None without one)."""
    try:
        with open(os.path.join(run.dir, "log.jsonl")) as f:
            last = [ln for ln in f if ln.strip()][-1]
        return int(json.loads(last)["step"])
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        return None


def trained(run):
    """True when the run folder's log.jsonl reaches the run's last step."""
    step = last_step(run)
    return step is not None and step >= run.steps


def help_text(trainer):
    try:
        p = subprocess.run([trainer, "--help"], capture_output=True, text=True, timeout=60)
        return p.stdout + p.stderr
    except (OSError, subprocess.SubprocessError):
        return None


def missing_in_build(cmd, help_txt):
    """Flags (and the values of --pos and --pe) of cmd that the trainer's --help does not
    mention."""
    miss = []
    for i, a in enumerate(cmd):
        if a.startswith("--"):
            if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(a), help_txt):
                miss.append(a)
            elif a in ("--pos", "--pe") and i + 1 < len(cmd):
                v = cmd[i + 1]
                if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(v), help_txt):
                    miss.append(a + " " + v)
    return miss


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def run_cmd(cmd, log_path, env=None):
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    t0 = time.time()
    with open(log_path, "a") as log:
        log.write("$ %s\n" % fmt_cmd(cmd))
        log.flush()
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    return rc, time.time() - t0


def summary(path):
    try:
        with open(path) as f:
            j = json.load(f)
        return "cliff %.3f, in-dist %.3f" % (j["cliff"], j["in_dist"])
    except (OSError, ValueError, KeyError, TypeError):
        return "no summary"


def load_timings(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def fp(x):
    """A paper number as printed there (1.915, -0.57, 4.10)."""
    if x is None:
        return "-"
    if not isinstance(x, float):
        return str(x)
    return "%.2f" % x if abs(round(x, 2) - x) < 1e-9 else "%.3f" % x


def write_report(args, spec, runs, mode, skipped_build):
    """table.md / table.csv via dev/eval_table.py, then the comparison with the paper."""
    w = preset(spec, mode)["w"]
    done = [run for run in runs if all(os.path.exists(run.json(t)) for t in run.tags)]
    if not done:
        print("no finished runs: nothing to tabulate")
        return None
    groups = []
    for run in done:
        g = run.r["group"]
        if g not in groups:
            groups.append(g)
    md = ["# %s" % spec["title"], "",
          "Mode: %s (`%s`), seeds %s, written by `python dev/ablate.py %s`." % (
              "GPU, 10M preset" if mode == "gpu" else "CPU scale, tiny preset, built-in corpus unless --train_data",
              args.trainer, ",".join(map(str, args.seeds)), " ".join(args.table_args)), ""]
    if spec.get("note"):
        md += ["Note: " + spec["note"], ""]
    csv_parts = []
    for g in groups:
        pairs = []
        for run in done:
            if run.r["group"] != g:
                continue
            for t in run.tags:
                pairs.append((run.r["label"], eval_table.Eval(run.json(t))))
        base = [run.r["label"] for run in done if run.r["group"] == g and run.r["baseline"]]
        rows, C, var = eval_table.build_rows(pairs, base[0] if base else None)
        if g:
            md += ["## %s" % g, ""]
        md += [eval_table.markdown(rows, C, var), ""]
        csv_parts.append(eval_table.to_csv(rows, C, var))
    # ours next to the paper's numbers
    gain_C = spec["gain_w"] * w if spec.get("gain_w") else None
    is15 = bool(spec.get("evals"))
    survey = args.table == "pe-survey"
    md += ["## Next to the %s numbers" % ("survey's" if survey else "paper's"), ""]
    if mode == "cpu":
        md += ["CPU scale (tiny model, w = %d, built-in corpus): compare orderings and signs, not values." % w, ""]
    if survey:
        k = spec["evals"][0]
        head = ["row", "n", "in-dist", "ppl in the window", "survey", "OOD (w, %dw]" % k, "ppl past it", "survey", "cliff"]
    elif is15:
        head = ["row", "n", "in-dist", "paper", "cliff 2x", "paper", "cliff 4x", "paper"]
    else:
        head = ["row", "n", "cliff", "paper", "G(%s) chunked" % fmt_len(gain_C) if gain_C else "G",
                "G banded", "paper G", "in-dist", "paper"]
        if args.table == 9:
            head += ["reduction", "paper"]
    if survey:
        md += ["The survey's perplexities are its synthetic task's (its in-window 5,657 exceeds its 1,000-token "
               "vocabulary, so it is not a per-token perplexity of the same kind as ours); only the ordering is "
               "comparable: the survey finds RoPE lowest in the window and past it.", ""]
    md += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    base_cliff = {}
    by_row = {}
    for run in done:
        by_row.setdefault(run.r["slug"], []).append(run)
    for slug, rs in by_row.items():
        r = rs[0].r
        p = r["paper"]
        ev = {t: [eval_table.Eval(x.json(t)) for x in rs] for t in rs[0].tags}

        def m(vals):
            return eval_table.f_ms(eval_table.mean_std(vals))
        if survey:
            e = ev[rs[0].tags[0]]
            cells = [r["label"], str(len(rs)), m([x.j.get("in_dist") for x in e]),
                     m([math.exp(x.j["in_dist"]) for x in e]), fp(p.get("ppl_in")), m([x.j.get("ood") for x in e]),
                     m([math.exp(x.j["ood"]) for x in e]), fp(p.get("ppl_out")), m([x.j.get("cliff") for x in e])]
        elif is15:
            e2, e4 = ev["eval_2x"], ev["eval_4x"]
            cells = [r["label"], str(len(rs)), m([e.j.get("in_dist") for e in e2]), fp(p.get("in_dist")),
                     m([e.j.get("cliff") for e in e2]), fp(p.get("cliff2x")),
                     m([e.j.get("cliff") for e in e4]), fp(p.get("cliff4x"))]
        else:
            es = ev[rs[0].tags[0]]
            cliff = eval_table.mean_std([e.j.get("cliff") for e in es])[0]
            if r["baseline"]:
                base_cliff[r["group"]] = cliff
            gc = m([e.G(gain_C, "chunked") for e in es]) if gain_C else "-"
            gb = m([e.G(gain_C, "banded") for e in es]) if gain_C else "-"
            cells = [r["label"], str(len(rs)), m([e.j.get("cliff") for e in es]), fp(p.get("cliff")),
                     gc, gb, fp(p.get("G")), m([e.j.get("in_dist") for e in es]), fp(p.get("in_dist"))]
            if args.table == 9:
                bc = base_cliff.get(r["group"])
                red = "%.1fx" % (bc / cliff) if (not r["baseline"] and bc and cliff and cliff > 0) else "-"
                cells += [red, p.get("reduction", "-")]
        if r.get("note") or p.get("note"):
            cells[0] += " (%s)" % "; ".join(x for x in (r.get("note"), p.get("note")) if x)
        md.append("| " + " | ".join(cells) + " |")
    md.append("")
    if skipped_build:
        md += ["## Not run", ""]
        for r, miss in skipped_build:
            md.append("- %s: the trainer binary does not list %s in --help (rebuild)" % (r["label"], ", ".join(miss)))
        md.append("")
    text = "\n".join(md)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "table.csv"), "w") as f:
        f.write("\n\n".join(csv_parts) + "\n")
    return text, done


def plots(args, spec, done):
    first = []
    seen = set()
    for run in done:
        if run.r["slug"] not in seen:
            seen.add(run.r["slug"])
            first.append(run)
    cmd = [sys.executable, os.path.join(HERE, "plot_eval.py")] + [run.dir for run in first] + \
          ["--labels", ",".join(run.r["slug"] for run in first)]
    if spec.get("evals"):
        cmd += ["--tag", "eval_%dx" % max(spec["evals"])]
    else:
        # every run folder holds exactly its own tag; keep only it (a folder may hold extra evaluations)
        tags = {run.tags[0] for run in first}
        if len(tags) == 1:
            cmd += ["--tag", tags.pop()]
    for name, extra in (("loss.png", []), ("gain.png", ["--gain"])):
        c = cmd + extra + ["--out", os.path.join(args.out, name),
                           "--title", "%s (first seed of each row)" % spec["title"].split(" (")[0]]
        p = subprocess.run(c, capture_output=True, text=True)
        out = (p.stdout + p.stderr).strip()
        print(out if p.returncode == 0 else "plot failed (%s): %s" % (name, out.splitlines()[-1] if out else p.returncode))


# ---- running the runs: one after another, on several GPUs or cores, or as a Slurm task --------

def baseline_state(b):
    """Where a fine-tune's baseline run stands, for the message that refuses the fine-tune."""
    if os.path.exists(b.ckpt):
        step = last_step(b)
        return "%s: a checkpoint at step %s of %d, no evaluation" % (b.dir, "?" if step is None else step, b.steps)
    return "%s: %s" % (b.dir, "no checkpoint" if os.path.isdir(b.dir) else "not run")


def unready_fine_tunes(runs):
    """One line per fine-tune row of runs whose baseline run (same seed) has no finished
    evaluation, naming the row to run or finish first."""
    by_row = {}
    for run in runs:
        b = run.init_run
        if b is not None and not b.finished():
            by_row.setdefault((run.r["slug"], b.r["slug"]), []).append(b)
    lines = []
    for (ft, base), bs in by_row.items():
        resumes = any(os.path.exists(b.ckpt) for b in bs)
        lines.append("row '%s' fine-tunes row '%s' of the same seed, whose evaluation is not finished: %s: run "
                     "--rows %s first%s" % (ft, base, "; ".join("seed %d (%s)" % (b.seed, baseline_state(b)) for b in bs),
                                             base, " (it resumes from the checkpoint)" if resumes else ""))
    return lines


def train_command(args, run):
    """The run's training command as its folder stands: resumed from its own checkpoint, else a
    new run (--overwrite: the row's own folder); --baseline only once that JSON exists."""
    cmd = run.train
    if os.path.exists(run.ckpt) and not args.force:
        if "--init_from" in cmd:                 # a fine-tune continues from its own checkpoint
            i = cmd.index("--init_from")
            cmd = cmd[:i] + cmd[i + 2:]
        cmd = cmd + ["--resume", run.ckpt]       # interrupted (or evaluation missing): continue
    else:
        cmd = cmd + ["--overwrite"]
    if run.baseline_json and not os.path.exists(run.baseline_json):
        i = cmd.index("--baseline")
        cmd = cmd[:i] + cmd[i + 2:]
    return cmd


SAY = threading.Lock()


def say(text):
    """One whole line (or lines) on stdout at a time: runs in parallel print from their threads."""
    with SAY:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def execute(args, run, name, gpu=None, threads=None):
    """One run, as every mode runs it: skipped when finished, refused when it fine-tunes a run
    that is not, else trained and evaluated (the trainer's output in its train.log, its wall
    times in its timings.json). gpu: CUDA_VISIBLE_DEVICES; threads: --threads. Returns True
    when its evaluations are on disk."""
    if run.finished() and not args.force:
        say("%s: done already (%s), skipped" % (name, summary(run.json(run.tags[0]))))
        return True
    why = unready_fine_tunes([run])
    if why:
        say("%s: not started: %s" % (name, why[0]))
        return False
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu) if gpu is not None else None
    more = ["--threads", str(threads)] if threads else []
    say("%s: running%s (log %s)" % (name, " on GPU %s" % gpu if gpu is not None else "", run.log))
    entry = {}
    t0 = time.time()
    rc = 0
    if args.force or not (run.evals and trained(run)):   # Table 15: skip a finished training
        rc, dt = run_cmd(train_command(args, run) + more, run.log, env)
        entry["train_s"] = round(dt, 1)
    for tag, e in zip(run.tags, run.evals):
        if rc != 0:
            break
        if os.path.exists(run.json(tag)) and not args.force:
            continue
        rc, dt = run_cmd(e + more, run.log, env)
        entry[tag + "_s"] = round(dt, 1)
    dt = time.time() - t0
    entry["total_s"] = round(dt, 1)
    with open(os.path.join(run.dir, "timings.json"), "w") as f:
        json.dump(entry, f)
    if rc == 0 and run.finished():
        res = "; ".join("%s %s" % (t, summary(run.json(t))) for t in run.tags) if len(run.tags) > 1 \
            else summary(run.json(run.tags[0]))
        say("%s: done in %.1fs (%s)" % (name, dt, res))
        return True
    say("%s: FAILED (exit %d) after %.1fs (log %s):\n%s" % (name, rc, dt, run.log, tail(run.log)))
    return False


def cpu_count():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_all(args, runs, gpus=None, jobs=1):
    """Runs in table order, up to one per GPU of gpus (CUDA_VISIBLE_DEVICES), else jobs at a time
    with the cores split between them; a fine-tune starts once its baseline's run, when it is
    one of runs, has ended. Ctrl-C: the running trainers stop with a checkpoint, nothing new
    starts, KeyboardInterrupt once they have."""
    slots = list(gpus) if gpus else [None] * jobs
    threads = max(1, cpu_count() // jobs) if jobs > 1 else None
    waiting, running = list(runs), {}

    def start(run, gpu):
        name = "[%d/%d] %s, seed %d" % (runs.index(run) + 1, len(runs), run.r["label"], run.seed)
        return execute(args, run, name, gpu, threads)

    with concurrent.futures.ThreadPoolExecutor(len(slots)) as pool:
        try:
            while waiting or running:
                unended = set(waiting) | {run for run, _ in running.values()}
                for run in list(waiting):
                    if slots and run.init_run not in unended:
                        waiting.remove(run)
                        gpu = slots.pop(0)
                        running[pool.submit(start, run, gpu)] = (run, gpu)
                ended, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for f in ended:
                    slots.append(running.pop(f)[1])
                    f.result()
        except KeyboardInterrupt:
            say("\ninterrupted: the running trainers stop with a checkpoint (rerun the same command to "
                "resume); a second Ctrl-C stops them at once")
            waiting.clear()
            concurrent.futures.wait(running)
            raise


def write_timings(args, runs):
    """<out>/timings.json: every run's own timings.json, by row and seed."""
    path = os.path.join(args.out, "timings.json")
    timings = load_timings(path)
    for run in runs:
        entry = load_timings(os.path.join(run.dir, "timings.json"))
        if entry:
            timings.setdefault(run.r["slug"], {"label": run.r["label"], "seeds": {}})["seeds"][str(run.seed)] = entry
    with open(path, "w") as f:
        json.dump(timings, f, indent=1)
    return path


def unfinished_lines(args, runs, active):
    """By row and seed, each run without its evaluation: queued or running (active: name ->
    state), failed or stopped (with its logs), or not run."""
    task_logs = slurm_task_logs(args)
    lines = []
    for run in runs:
        if run.finished():
            continue
        what = "%s seed %d (%s)" % (run.r["slug"], run.seed, run.r["label"])
        logs = [p for p in (run.log, task_logs.get(run.name)) if p and os.path.exists(p)]
        state = active.get(run.name) or ("failed or stopped; log " + ", ".join(logs) if logs else "not run")
        lines.append("  %s: %s" % (what, state))
    return lines


def finish(args, spec, runs, runnable, mode, skipped_build, active=None):
    """table.md, table.csv, timings.json and the plots from the finished runs, then the
    runnable ones that are not: returns 1 when some are."""
    rep = write_report(args, spec, runs, mode, skipped_build)
    if rep:
        text, done = rep
        print()
        print(text)
        print("wrote %s, %s, %s" % (os.path.join(args.out, "table.md"), os.path.join(args.out, "table.csv"),
                                    write_timings(args, runs)))
        plots(args, spec, done)
    lines = unfinished_lines(args, runnable, active or {})
    if lines:
        print("%d of %d runs not finished:" % (len(lines), len(runnable)))
        print("\n".join(lines))
        return 1
    return 0


# ---- Slurm: one job array per table, submitted with sbatch, followed with squeue -------------

def slurm_dir(args):
    return os.path.join(args.out, "slurm")


def load_jobs(args):
    """The arrays submitted for this table: [{"job": id, "tasks": {index: run name}}]."""
    try:
        with open(os.path.join(slurm_dir(args), "jobs.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        die("%s: unreadable (%s): move it aside to forget the submitted jobs" % (
            os.path.join(slurm_dir(args), "jobs.json"), e))


def slurm_task_logs(args):
    """Run name -> the Slurm log of its last submitted task that wrote one."""
    logs = {}
    for job in load_jobs(args):
        for index, name in job["tasks"].items():
            p = os.path.join(slurm_dir(args), "%s_%s.log" % (job["job"], index))
            if os.path.exists(p):
                logs[name] = p
    return logs


def slurm_active(args, jobs):
    """Run name -> 'pending (job 12_3)' for the tasks of jobs that squeue still lists."""
    if not jobs:
        return {}
    if not shutil.which("squeue"):
        print("# note: squeue not found: the runs of the jobs in %s count as ended" % os.path.join(slurm_dir(args),
                                                                                                "jobs.json"))
        return {}
    try:
        p = subprocess.run(["squeue", "--noheader", "--array", "--user=%d" % os.getuid(), "--format=%i %T"],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        die("squeue: %s (the table's jobs are in %s)" % (e, os.path.join(slurm_dir(args), "jobs.json")))
    if p.returncode != 0:
        die("squeue failed: %s" % (p.stderr.strip() or "exit %d" % p.returncode))
    names = {(job["job"], index): name for job in jobs for index, name in job["tasks"].items()}
    active = {}
    for line in p.stdout.splitlines():
        task, _, state = line.strip().partition(" ")
        name = names.get(tuple(task.split("_", 1)))
        if name:
            active[name] = "%s (job %s)" % (state.lower(), task)
    return active


def index_ranges(indices):
    """[0, 1, 2, 5] -> '0-2,5' (sbatch --array)."""
    parts, i = [], 0
    while i < len(indices):
        j = i
        while j + 1 < len(indices) and indices[j + 1] == indices[j] + 1:
            j += 1
        parts.append(str(indices[i]) if i == j else "%d-%d" % (indices[i], indices[j]))
        i = j + 1
    return ",".join(parts)


def slurm_script(args, spec, runs):
    """The table's array script: task i runs runs[i] through this script's --task."""
    cmd = [sys.executable, os.path.abspath(__file__)] + args.table_args + ["--task"]
    lines = ["#!/bin/bash",
             "# %s" % spec["title"],
             "# One array task per row and seed, written by dev/ablate.py --slurm. Task i runs RUNS[i]",
             "# with the table's dev/ablate.py command and --task: the trainer commands the sequential",
             "# path runs for it (a finished run skipped, an interrupted one resumed from its checkpoint,",
             "# a fine-tune refused until its baseline's evaluation exists), the trainer's output in",
             "# <out>/<run>/train.log, this task's in the --output file below.",
             "#SBATCH --job-name=ablate-%s" % os.path.basename(os.path.abspath(args.out)),
             "#SBATCH --chdir=%s" % shlex.quote(os.getcwd()),
             "#SBATCH --output=%s" % shlex.quote(os.path.join(os.path.abspath(slurm_dir(args)), "%A_%a.log")),
             "RUNS=("]
    lines += ["    %s  # %d: %s, seed %d" % (run.name, i, run.r["label"], run.seed) for i, run in enumerate(runs)]
    lines += [")", "exec %s \"${RUNS[$SLURM_ARRAY_TASK_ID]}\"" % fmt_cmd(cmd), ""]
    return "\n".join(lines)


def slurm_submit(args, spec, runs):
    """Submits the runs not finished as one array, and the fine-tunes of its runs as a second
    array that starts once the first's tasks of their baselines have ended, successful or not
    (afterany: each fine-tune then checks its own baseline's evaluation, so a failed baseline
    holds back only its own fine-tunes, and nothing waits forever on a dependency)."""
    todo = [run for run in runs if args.force or not run.finished()]
    if not todo:
        return
    first = [run for run in todo if run.init_run not in todo]
    second = [run for run in todo if run.init_run in todo]
    path = os.path.join(slurm_dir(args), "ablate.sbatch")
    arrays = [(first, False)] + ([(second, True)] if second else [])

    def sbatch(part, first_job=None):
        """The sbatch command of an array; the second's waits for its baselines' tasks in the first."""
        after = sorted({runs.index(r.init_run) for r in part}) if first_job else []
        return ["sbatch", "--parsable", "--array=" + index_ranges([runs.index(r) for r in part])] + \
            (["--dependency=afterany:" + ":".join("%s_%d" % (first_job, i) for i in after)] if after else []) + \
            shlex.split(args.slurm_args or "") + [path]
    if args.dry_run:
        print("# %s:\n%s" % (path, slurm_script(args, spec, runs)))
        print("FIRST=$(%s)" % fmt_cmd(sbatch(first)))
        if second:
            print(fmt_cmd(sbatch(second, "FIRST")).replace("FIRST_", "${FIRST}_"))
        return
    os.makedirs(slurm_dir(args), exist_ok=True)
    with open(path, "w") as f:
        f.write(slurm_script(args, spec, runs))
    jobs = load_jobs(args)
    first_id = None
    for part, dependent in arrays:
        cmd = sbatch(part, first_id if dependent else None)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            die("%s failed%s: %s" % (fmt_cmd(cmd), " (job %s was submitted)" % first_id if first_id else "",
                                     (p.stderr or p.stdout).strip() or "exit %d" % p.returncode))
        job = p.stdout.strip().split(";")[0]
        first_id = first_id or job
        jobs.append({"job": job, "tasks": {str(runs.index(r)): r.name for r in part}})
        with open(os.path.join(slurm_dir(args), "jobs.json"), "w") as f:
            json.dump(jobs, f, indent=1)
        print("submitted job %s: %d run(s)%s, %s" % (job, len(part), " (fine-tunes, after their baselines' tasks of "
                                                     "job %s)" % first_id if dependent else "",
                                                     ", ".join(r.name for r in part)))
    print("script %s, task logs %s/<job>_<task>.log\nwhen the jobs end (squeue --me), rerun this command to write "
          "%s and resubmit what failed, or only write it and list what failed: %s" % (
              path, slurm_dir(args), os.path.join(args.out, "table.md"),
              fmt_cmd(["python", "dev/ablate.py"] + args.table_args + ["--collect"])))


def where_flags(ap):
    """Where the runs run, not what they compute: the options that table.md's command and the
    array tasks' command leave out."""
    g = ap.add_argument_group("where the runs run (the commands, and so the table, are the same)")
    return [
        g.add_argument("--gpus", default=None, metavar="LIST",
                       help="GPU mode: up to one run per listed GPU at a time, e.g. 0,1,2,3 (CUDA_VISIBLE_DEVICES "
                            "per run)"),
        g.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="--cpu: up to N runs at a time, the cores split between them (--threads)"),
        g.add_argument("--slurm", action="store_true",
                       help="submit a Slurm job array, one task per run (<out>/slurm/); rerun the same command when "
                            "it ends to write the table and resubmit what failed"),
        g.add_argument("--slurm_args", default=None, metavar="OPTIONS",
                       help="more sbatch options, one string: '--partition=gpu --gres=gpu:1 --time=1:00:00' "
                            "(a single one as --slurm_args=--gres=gpu:1)"),
        g.add_argument("--collect", action="store_true",
                       help="run nothing: write the table from the finished runs, list the others by row and seed"),
        g.add_argument("--task", default=None, metavar="RUN",
                       help="run only RUN (<slug>_seed<S>), write no table: what each task of --slurm runs"),
        g.add_argument("--dry_run", action="store_true", help="print the commands (with --slurm: the script) only"),
    ]


def table_argv(actions, argv):
    """argv without the options of actions (as typed: --flag value or --flag=value)."""
    takes_value = {o: a.nargs != 0 for a in actions for o in a.option_strings}
    out, skip = [], False
    for tok in argv:
        key = tok.split("=", 1)[0]
        if skip:
            skip = False
        elif key in takes_value:
            skip = takes_value[key] and "=" not in tok
        else:
            out.append(tok)
    return out


def parse_gpus(v):
    gpus = [g.strip() for g in v.split(",")]
    bad = [g for g in gpus if not re.fullmatch(r"\d+|(GPU|MIG)-[0-9A-Za-z/-]+", g)]
    if bad or not gpus:
        die("--gpus: comma-separated GPU indices or UUIDs (as CUDA_VISIBLE_DEVICES takes them), got %r" % v)
    twice = sorted({g for g in gpus if gpus.count(g) > 1})
    if twice:
        die("--gpus: %s listed twice (one run per GPU at a time)" % ", ".join(twice))
    return gpus


def check_where(args, mode):
    """The where-flags' values and combinations."""
    if args.gpus is not None:
        if mode == "cpu":
            die("--gpus: GPU mode only (--cpu runs split the cores: --jobs N)")
        args.gpus = parse_gpus(args.gpus)
    if args.jobs < 1:
        die("--jobs: at least 1, got %d" % args.jobs)
    if args.jobs > 1 and mode == "gpu":
        die("--jobs: --cpu runs only (GPU runs: list the GPUs with --gpus)")
    if args.jobs > cpu_count():
        die("--jobs %d: more runs at a time than the %d cores (each run needs one)" % (args.jobs, cpu_count()))
    if args.slurm_args is not None and not args.slurm:
        die("--slurm_args without --slurm")
    local = args.gpus is not None or args.jobs > 1
    if args.slurm and local:
        die("--slurm with --gpus/--jobs: the cluster places the runs (ask for GPUs with --slurm_args)")
    if args.collect and args.dry_run:
        die("--collect with --dry_run: --collect runs nothing already")
    if args.task and (args.slurm or args.collect or args.dry_run or local):
        die("--task runs one run here: not with --slurm, --collect, --dry_run, --gpus or --jobs")
    if args.slurm and not args.collect and not args.dry_run and not shutil.which("sbatch"):
        die("--slurm: sbatch not found: run it where Slurm's commands are (a login node)")


def parse_args(argv):
    """The flags, checked: every bad value or combination ends here with one line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                 epilog="Details: the module docstring, doc/schemes.md and doc/cluster.md.",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", type=lambda v: int(v) if v.isdigit() else v, required=True,
                    choices=list(TABLES), metavar="{%s}" % ",".join(map(str, TABLES)))
    ap.add_argument("--cpu", action="store_true", help="CPU scale: ./train_gpt_cpu, tiny preset, built-in corpus")
    ap.add_argument("--seeds", default="42", help="comma-separated seeds (default 42; the paper's: 42,137,2024)")
    ap.add_argument("--trainer", default=None, help="trainer binary (default ./train_gpt, or ./train_gpt_cpu with --cpu)")
    ap.add_argument("--train_data", default=None, help="glob of training shards (required on the GPU)")
    ap.add_argument("--val_data", default=None, help="glob of validation shards (required on the GPU)")
    ap.add_argument("--vocab_size", type=int, default=None, help="real vocab size (GPU default 50277, GPT-NeoX)")
    ap.add_argument("--out", default=None, help="output folder (default runs/table<N>[_cpu])")
    ap.add_argument("--rows", default=None, help="only these row slugs (comma-separated; see --dry_run)")
    ap.add_argument("--ckpt_every", type=int, default=250, help="GPU runs: checkpoint every N steps (0: end only)")
    ap.add_argument("--force", action="store_true", help="rerun rows whose evaluation exists")
    where = where_flags(ap)
    args = ap.parse_args(argv)
    missing.check()
    mode = "cpu" if args.cpu else "gpu"
    spec = TABLES[args.table]
    try:
        args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        die("--seeds: comma-separated integers, got %r" % args.seeds)
    if not args.seeds:
        die("--seeds: no seed")
    twice = sorted({s for s in args.seeds if args.seeds.count(s) > 1})
    if twice:
        die("--seeds: %s listed twice (a seed is one run: the mean and std would count it twice)"
            % ", ".join(map(str, twice)))
    args.rows = set(args.rows.split(",")) if args.rows else None
    if args.rows:
        unknown = args.rows - {r["slug"] for r in spec["rows"]}
        if unknown:
            die("--rows: unknown %s (table %s has %s)" % (", ".join(sorted(unknown)), args.table,
                                                          ", ".join(r["slug"] for r in spec["rows"])))
    check_where(args, mode)
    args.table_args = table_argv(where, argv)
    args.trainer = args.trainer or ("./train_gpt_cpu" if args.cpu else "./train_gpt")
    args.out = args.out or os.path.join("runs", ("table%d" % args.table if isinstance(args.table, int) else args.table)
                                        + ("_cpu" if args.cpu else ""))
    if mode == "gpu":
        if args.vocab_size is None:
            args.vocab_size = 50277
        if not args.train_data or not args.val_data:
            if not args.dry_run:
                die("GPU mode needs prepared data: --train_data GLOB --val_data GLOB [--vocab_size V] "
                    "(python data/prepare.py --dataset openwebtext --tokenizer neox), or use --cpu")
            args.train_data = args.train_data or "data/openwebtext/*_train_*.bin"
            args.val_data = args.val_data or "data/openwebtext/*_val_*.bin"
            print("# dry run without --train_data/--val_data: showing the README's OpenWebText paths")
        elif not (args.dry_run or args.collect):
            for flag, g in (("--train_data", args.train_data), ("--val_data", args.val_data)):
                if not glob.glob(g):
                    die("%s %r matches no file" % (flag, g))
    elif args.train_data and not args.val_data:
        die("--train_data without --val_data: give both (the built-in validation set is byte-level)")
    return args, spec, mode


def available(args, runs):
    """The runs whose flags the trainer's --help lists, and the rows it cannot run."""
    htxt = help_text(args.trainer) if os.access(args.trainer, os.X_OK) else None
    if htxt is None and not args.collect:
        msg = "%s is not built (make%s; run this script from the repository root)" % (
            args.trainer, "" if args.cpu else " on a machine with nvcc, or use --cpu")
        if not args.dry_run:
            die(msg)
        print("# note: " + msg)
    skipped_build, runnable = [], []
    seen_bad = set()
    for run in runs:
        miss = sorted(set(sum((missing_in_build(c, htxt) for c in [run.train] + run.evals), []))) if htxt else []
        if miss:
            if run.r["slug"] not in seen_bad:
                seen_bad.add(run.r["slug"])
                skipped_build.append((run.r, miss))
                print("unavailable: row '%s' needs %s, which %s --help does not list (rebuild with make); skipped"
                      % (run.r["label"], ", ".join(miss), args.trainer))
            continue
        runnable.append(run)
    return runnable, skipped_build


def print_plan(args, runs, runnable):
    """--dry_run: the commands, as the chosen way runs them."""
    threads = max(1, cpu_count() // args.jobs) if args.jobs > 1 else None
    more = ["--threads", str(threads)] if threads else []
    if args.gpus:
        print("# up to %d runs at a time, one per GPU: CUDA_VISIBLE_DEVICES=%s" % (len(args.gpus), "|".join(args.gpus)))
    elif threads:
        print("# up to %d runs at a time, %d threads each" % (args.jobs, threads))
    for run in runnable:
        print("\n# %s, seed %d" % (run.r["label"], run.seed))
        print(fmt_cmd(run.train + more))
        for e in run.evals:
            print(fmt_cmd(e + more))
    print("\n# then: dev/eval_table.py on the run folders -> %s/table.md (baseline: %s), dev/plot_eval.py -> "
          "%s/loss.png, %s/gain.png" % (args.out, ", ".join(sorted({r.r["label"] for r in runs if r.r["baseline"]}))
                                         or "-", args.out, args.out))


def slurm_or_collect(args, spec, mode, runs, runnable, skipped_build):
    """--collect: the table and what is missing. --slurm: nothing while the table's tasks are
    queued or running; else the table (after a submission, or when every run is finished),
    then the unfinished runs submitted."""
    active = slurm_active(args, load_jobs(args))
    if args.collect:
        return finish(args, spec, runs, runnable, mode, skipped_build, active)
    if active:
        print("%d run(s) still queued or running: rerun this command when they end (squeue --me)\n%s" % (
            len(active), "\n".join(unfinished_lines(args, runnable, active))))
        return 0
    if not args.dry_run and (load_jobs(args) or all(run.finished() for run in runnable)):
        finish(args, spec, runs, runnable, mode, skipped_build)
    slurm_submit(args, spec, runnable)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    args, spec, mode = parse_args(argv)
    runs = build_runs(args, spec, mode)
    if args.task:
        runs = [run for run in runs if run.name == args.task]
        if not runs:
            die("--task: no run %r in table %s with these --rows and --seeds" % (args.task, args.table))
    print("# %s | %s mode | %d rows x %d seeds | out %s" % (
        spec["title"], mode.upper(), len({r.r["slug"] for r in runs}), len({r.seed for r in runs}), args.out))
    runnable, skipped_build = available(args, runs)
    if not args.collect:   # a fine-tune needs its baseline's evaluation, or its baseline among the runs
        bad = unready_fine_tunes([run for run in runnable if (args.force or not run.finished())
                                  and (args.task or run.init_run not in runnable)])
        if bad and not args.dry_run:
            die("; ".join(bad))
        for line in bad:
            print("# note: " + line)
    if args.dry_run and not args.slurm:
        print_plan(args, runs, runnable)
        return 0
    if args.collect or args.slurm:
        return slurm_or_collect(args, spec, mode, runs, runnable, skipped_build)
    os.makedirs(args.out, exist_ok=True)
    try:
        run_all(args, runnable, args.gpus, args.jobs)
    except KeyboardInterrupt:
        return 130
    if args.task:
        return 0 if all(run.finished() for run in runnable) else 1
    return finish(args, spec, runs, runnable, mode, skipped_build)


if __name__ == "__main__":
    sys.exit(main())
