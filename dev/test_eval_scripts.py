"""Tests for dev/plot_eval.py, dev/eval_table.py, data/passkey_prompts.py and data/hellaswag.py on synthetic fixtures,
and for every dev/ script's --help and missing-package line (dev/needs.py; data/test_data.py has data/'s).

    python dev/test_eval_scripts.py

Writes hand-made run folders (eval_*.json + eval_*.csv, in the trainer's output
contract) and a tiny locally trained BPE into a temp dir. Prints PASS/FAIL/SKIP per test
and ends with "N passed, N failed, N skipped"; exits 1 if any test failed. Tests that
need matplotlib or tokenizers SKIP without them. Takes about 10-20 s.
"""
import glob
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:  # the scripts under test need numpy: the whole suite skips
    print("SKIP: the evaluation-script tests: numpy is not installed (make test installs it into .venv "
          "from dev/requirements.txt)")
    print("0 passed, 0 failed, 1 skipped")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "data"))
import eval_table  # noqa: E402
import tensorfile  # noqa: E402
from testkit import Skip, Suite, check  # noqa: E402

TMP = tempfile.mkdtemp(prefix="test_eval_scripts_")
SUITE = Suite()
test = SUITE.test


def close(a, b, tol=1e-9):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


# ---- fixtures ------------------------------------------------------------------------
L, W_TRAIN, W_GAIN = 1024, 128, 64


def write_eval(run_dir, tag, in_dist, cliff, gain=None, penalty=None, scaling="none",
               columns=("loss_banded", "loss_chunked", "entropy"), seed=42, banded_offset=0.25):
    os.makedirs(run_dir, exist_ok=True)
    i = np.arange(L)
    loss = np.where(i < W_TRAIN, in_dist + 1.0 / (1 + i), in_dist + cliff) + 0.01 * np.sin(i)
    cols = {"loss": loss,
            "loss_banded": loss + np.where(i >= W_GAIN, banded_offset, 0.0),
            "loss_chunked": loss + np.where(i >= W_GAIN, 0.1 * np.log1p(i / W_GAIN), 0.0),
            "entropy": 1.0 + i / L}
    head = ["position", "loss"] + list(columns)
    with open(os.path.join(run_dir, tag + ".csv"), "w") as f:
        f.write(",".join(head) + "\n")
        for p in range(L):
            f.write(",".join([str(p)] + ["%.6f" % cols[h][p] for h in head[1:]]) + "\n")
    j = {"tag": tag, "run": run_dir, "model": "tiny", "pos_scheme": "rope", "alpha_range": [0.125, 8],
         "seed": seed, "L_eval": L, "train_window": W_TRAIN, "n_sequences": 20, "indist_start": 64,
         "scaling": scaling, "scale_factor": 1.0 if scaling == "none" else L / W_TRAIN,
         "in_dist": in_dist, "ood": in_dist + cliff, "cliff": cliff, "penalty": penalty,
         "baseline": None, "entropy_ratio": 1.2, "gain": gain, "passkey": None}
    with open(os.path.join(run_dir, tag + ".json"), "w") as f:
        json.dump(j, f)


def gain(chunked, banded=None):
    return {"window": W_GAIN, "chunk": W_GAIN, "lengths": [256, 512, 1024],
            "chunked": chunked, "banded": banded if banded is not None else [0.0, 0.0, 0.0]}


RUNS = os.path.join(TMP, "runs")
# rope baseline, two seeds; posaug three seeds; nope one seed; the hand-made numbers:
#   rope in-dist 2.0, 2.2 -> 2.1 +- 0.141421; cliff 1.0, 1.4 -> 1.2 +- 0.282843; G(1K) -0.5, -0.7 -> -0.6 +- 0.141421
#   posaug in-dist 2.1, 2.2, 2.3 -> 2.2 +- 0.1; cliff 0.1, 0.2, 0.3 -> 0.2 +- 0.1; G(1K) 0.3, 0.4, 0.5 -> 0.4 +- 0.1
#   delta = 0.1, penalty = 0.1 / 2.1 = 4.762%
write_eval(f"{RUNS}/tiny_rope_seed42", "eval_L1024", 2.0, 1.0, gain([-0.1, -0.3, -0.5]))
write_eval(f"{RUNS}/tiny_rope_seed137", "eval_L1024", 2.2, 1.4, gain([-0.1, -0.3, -0.7]), seed=137)
for s, ind, cl, g in ((42, 2.1, 0.1, 0.3), (137, 2.2, 0.2, 0.4), (2024, 2.3, 0.3, 0.5)):
    write_eval(f"{RUNS}/tiny_posaug_seed{s}", "eval_L1024", ind, cl, gain([0.1, 0.2, g]), seed=s,
               penalty=(ind - 2.1) / 2.1)
write_eval(f"{RUNS}/tiny_nope", "eval_L1024", 2.5, 0.05, gain([0.0, 0.0, 0.02]))
# a second tag in one run folder (YaRN), and a run with only CSV gain columns
write_eval(f"{RUNS}/tiny_rope_seed42", "eval_L1024_yarn", 2.05, 0.3, None, scaling="yarn")
write_eval(f"{TMP}/csvonly/tiny_band", "eval_L1024", 2.0, 0.5, None, columns=("loss_banded",))


def run_py(script, *args, timeout=60):
    p = subprocess.run([sys.executable, os.path.join(ROOT, script)] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def table_rows(md):
    """Parse a markdown table into (header cells, {method: cells})."""
    lines = [l for l in md.strip().splitlines() if l.startswith("|")]
    cells = [[c.strip() for c in l.strip("|").split("|")] for l in lines]
    return cells[0], {r[0]: r for r in cells[2:]}


# ---- eval_table ----------------------------------------------------------------------
@test
def table_mean_std_penalty():
    rc, out, err = run_py("dev/eval_table.py", *[f"{RUNS}/tiny_rope_seed{s}" for s in (42, 137)],
                          *[f"{RUNS}/tiny_posaug_seed{s}" for s in (42, 137, 2024)],
                          "--tag", "eval_L1024", "--baseline", "tiny_rope")
    check(rc == 0, "exit %d: %s" % (rc, err))
    head, rows = table_rows(out)
    check(head == ["method", "cliff", "G(1K), chunked", "in-dist", "delta", "penalty", "OOD/in-dist"], "header %s" % head)
    check(set(rows) == {"tiny_rope (2 seeds) (baseline)", "tiny_posaug (3 seeds)"}, "rows %s" % list(rows))
    r = rows["tiny_posaug (3 seeds)"]
    # the fixtures have no "ratio" key: (in_dist + cliff) / in_dist per seed, mean and sample std
    ratios = [(i + c) / i for i, c in ((2.1, 0.1), (2.2, 0.2), (2.3, 0.3))]
    want = "%.3f ± %.3f" % (statistics.mean(ratios), statistics.stdev(ratios))
    check(r[1:] == ["0.200 ± 0.100", "0.400 ± 0.100", "2.200 ± 0.100", "+0.100", "+4.8%", want], "posaug row %s" % r)
    b = rows["tiny_rope (2 seeds) (baseline)"]
    check(b[1:6] == ["1.200 ± 0.283", "-0.600 ± 0.141", "2.100 ± 0.141", "+0.000", "+0.0%"], "rope row %s" % b)


@test
def ood_ratio_field_or_computed():
    check(eval_table.ood_ratio({"ratio": 0.97, "ood": 1.0, "in_dist": 2.0}) == 0.97, "the JSON's ratio is used")
    check(eval_table.ood_ratio({"ood": 3.0, "in_dist": 2.0}) == 1.5, "computed from ood and in_dist without it")
    check(eval_table.ood_ratio({"ood": 3.0, "in_dist": 0.0}) is None, "none for in_dist 0")
    check(eval_table.ood_ratio({"ratio": None, "ood": None, "in_dist": 2.0}) is None, "none without ood")


@test
def table_csv_exact_numbers():
    rc, out, err = run_py("dev/eval_table.py", f"{RUNS}/tiny_rope_seed42", f"{RUNS}/tiny_rope_seed137",
                          f"{RUNS}/tiny_posaug_seed42", f"{RUNS}/tiny_posaug_seed137",
                          f"{RUNS}/tiny_posaug_seed2024", "--tag", "eval_L1024", "--baseline", "tiny_rope", "--csv")
    check(rc == 0, "exit %d: %s" % (rc, err))
    import csv as _csv
    rows = {r["method"]: r for r in _csv.DictReader(io.StringIO(out))}
    p = rows["tiny_posaug"]
    check(p["n"] == "3" and p["G_C"] == "1024" and p["G_variant"] == "chunked", "meta %s" % p)
    check(close(float(p["in_dist_std"]), 0.1, 1e-9), "in-dist std %s (n-1)" % p["in_dist_std"])
    check(close(float(p["penalty_pct"]), 100 * 0.1 / 2.1, 1e-9), "penalty %s" % p["penalty_pct"])
    check(close(float(p["delta"]), 0.1, 1e-9), "delta %s" % p["delta"])
    check(close(float(p["ratio_mean"]), statistics.mean([2.2 / 2.1, 2.4 / 2.2, 2.6 / 2.3]), 1e-9), "ratio %s" % p["ratio_mean"])
    r = rows["tiny_rope"]
    check(close(float(r["cliff_std"]), math.sqrt(0.08), 1e-9), "rope cliff std %s" % r["cliff_std"])


@test
def table_single_seed_mean_only_and_default_grouping():
    rc, out, err = run_py("dev/eval_table.py", f"{RUNS}/tiny_nope", f"{RUNS}/tiny_posaug_seed42",
                          f"{RUNS}/tiny_posaug_seed137", "--tag", "eval_L1024")
    check(rc == 0, "exit %d: %s" % (rc, err))
    _, rows = table_rows(out)
    check(set(rows) == {"tiny_nope", "tiny_posaug (2 seeds)"}, "rows %s" % list(rows))
    n = rows["tiny_nope"]
    check(n[1] == "0.050" and n[2] == "0.020" and n[3] == "2.500", "single-seed row %s" % n)
    check(n[4] == "-" and n[5] == "-", "no baseline, no penalty in JSON -> '-': %s" % n)
    # without --baseline, penalty comes from the JSONs (fractions): mean of 0 and 0.1/2.1
    p = rows["tiny_posaug (2 seeds)"]
    check(p[5] == "+2.4%", "JSON penalty mean %s" % p[5])
    check(p[4] == "+0.050", "delta derived from JSON penalty %s" % p[4])


@test
def table_group_by_and_labels():
    rc, out, err = run_py("dev/eval_table.py", *[f"{RUNS}/tiny_posaug_seed{s}" for s in (42, 137, 2024)],
                          "--tag", "eval_L1024", "--group_by", r"^tiny_(\w+?)_seed(?:42|137)$")
    check(rc == 0, "exit %d: %s" % (rc, err))
    _, rows = table_rows(out)
    check(set(rows) == {"posaug (2 seeds)", "tiny_posaug_seed2024"}, "group_by rows %s" % list(rows))
    rc, out, err = run_py("dev/eval_table.py", f"{RUNS}/tiny_nope", f"{RUNS}/tiny_posaug_seed42",
                          "--tag", "eval_L1024", "--labels", "A,A")
    _, rows = table_rows(out)
    check(rc == 0 and list(rows) == ["A (2 seeds)"], "labels rows %s %s" % (list(rows), err))
    rc, out, err = run_py("dev/eval_table.py", f"{RUNS}/tiny_nope", "--labels", "A,B")
    check(rc != 0 and "--labels" in err, "label count mismatch should fail: %d %s" % (rc, err))


@test
def table_multi_tag_rows_and_baseline_by_tag():
    rc, out, err = run_py("dev/eval_table.py", f"{RUNS}/tiny_rope_seed42", "--baseline", "tiny_rope")
    check(rc == 0, "exit %d: %s" % (rc, err))
    head, rows = table_rows(out)
    check(set(rows) == {"tiny_rope [eval_L1024] (baseline)", "tiny_rope [eval_L1024_yarn] (baseline)"},
          "rows %s" % list(rows))
    # the yarn eval has no gain data: '-' in G; its baseline is the same tag -> delta 0
    y = rows["tiny_rope [eval_L1024_yarn] (baseline)"]
    check(y[2] == "-" and y[4] == "+0.000", "yarn row %s" % y)


@test
def table_gain_from_csv_column():
    # no JSON gain, only a loss_banded column: G(C) from the CSV at C = L_eval, window from --... JSON has none
    ev = eval_table.Eval(f"{TMP}/csvonly/tiny_band/eval_L1024.json")
    check(ev.G(1024, "banded") is None, "no window known -> None")
    check(close(ev.G(1024, "banded", window=W_GAIN), 0.25, 1e-6), "G from CSV %s" % ev.G(1024, "banded", W_GAIN))
    loss = np.array([1.0, 2.0, 3.0, 4.0])
    lv = np.array([1.0, 2.5, 3.0, 5.0])
    check(close(eval_table.gain_from_columns(loss, lv, 1, 4), (0.5 + 0.0 + 1.0) / 3), "gain_from_columns")
    check(close(eval_table.gain_from_columns(loss, lv, 1, 2), 0.5), "gain_from_columns C=2")


@test
def table_bad_inputs():
    rc, _, err = run_py("dev/eval_table.py", f"{TMP}/does_not_exist")
    check(rc != 0 and "not a run folder" in err, "missing path: %d %s" % (rc, err))
    rc, _, err = run_py("dev/eval_table.py", f"{RUNS}/tiny_nope", "--tag", "eval_L9")
    check(rc != 0 and "eval_L9" in err, "missing tag: %d %s" % (rc, err))


@test
def table_finds_evaluations_by_tag():
    """An evaluation is <tag>.json whose first field names <tag>, whatever the tag; a user's
    own JSON beside it is not one; a folder with an unfinished set commit is refused."""
    run = os.path.join(TMP, "tagged")
    write_eval(run, "long_context", 2.0, 0.5)
    with open(os.path.join(run, "notes.json"), "w") as f:
        json.dump({"note": "mine", "tag": "notes"}, f)  # the user's: its first field is not the tag
    rc, out, err = run_py("dev/eval_table.py", run, "--csv")
    rows = [l.split(",") for l in out.splitlines()[1:] if l]
    check(rc == 0 and len(rows) == 1 and rows[0][2] == "1" and rows[0][9] == "2.0",
          "one evaluation (long_context), notes.json not one: %d %s %s" % (rc, out, err))
    rc, out, err = run_py("dev/eval_table.py", run, "--tag", "long_context", "--csv")
    rows = [l.split(",") for l in out.splitlines()[1:] if l]
    check(rc == 0 and len(rows) == 1 and rows[0][2] == "1", "--tag long_context: %d %s %s" % (rc, out, err))
    if need_matplotlib_or_none():
        png = os.path.join(TMP, "plots", "tagged.png")
        rc, so, err = run_py("dev/plot_eval.py", run, "--tag", "long_context", "--out", png)
        check(rc == 0 and is_png(png) and "1 curves" in so, "plot --tag long_context: %d %s %s" % (rc, so, err))
    with open(os.path.join(run, "long_context.commit"), "w") as f:
        f.write("long_context.csv\nlong_context.json\n")
    rc, _, err = run_py("dev/eval_table.py", run)
    check(rc != 0 and "long_context" in err and "Traceback" not in err, "pending commit refused: %d %s" % (rc, err))


@test
def pending_commit_refuses_a_json_named_directly():
    """A JSON named directly in a folder with a pending commit is refused as the folder is, by
    eval_table.py and plot_eval.py (its CSV may be the new set's, the JSON the old one's), and
    the refusal makes no file or folder (plot_eval's --out folder); a journal that is not
    whole is named as such."""
    run = os.path.join(TMP, "pending")
    write_eval(run, "eval_L1024", 2.0, 0.5)
    js = os.path.join(run, "eval_L1024.json")
    for journal, says in (("eval_L1024.csv\neval_L1024.json\nend 2\n", "stopped while its files were renamed"),
                          ("", "is not a whole journal")):
        with open(os.path.join(run, "eval_L1024.commit"), "w") as f:
            f.write(journal)
        rc, out, err = run_py("dev/eval_table.py", js)
        check(rc == 1 and says in err and "eval_L1024" in err and not out and "Traceback" not in err,
              "eval_table.py %s with %r: %d %s %s" % (js, journal, rc, out, err))
        if need_matplotlib_or_none():
            png = os.path.join(TMP, "pending_plots", "x.png")
            rc, out, err = run_py("dev/plot_eval.py", js, "--out", png)
            check(rc == 1 and says in err and not os.path.exists(os.path.dirname(png)),
                  "plot_eval.py %s with %r: %d %s, folder made: %s" % (js, journal, rc, err,
                                                                       os.path.exists(os.path.dirname(png))))


@test
def plot_refusals_make_no_folder():
    """plot_eval.py refusing its input (a missing run, a number out of range) makes no --out folder."""
    need_matplotlib()
    for args, says in (([f"{TMP}/no_such_run"], "not a run folder"), ([f"{RUNS}/tiny_nope", "--points", "0"], "--points"),
                       ([f"{RUNS}/tiny_nope", "--window", "-3"], "--window")):
        png = os.path.join(TMP, "refused_plots", "x.png")
        rc, out, err = run_py("dev/plot_eval.py", *args, "--out", png)
        check(rc == 1 and says in err and not os.path.exists(os.path.dirname(png)),
              "%s: %d %s, folder made: %s" % (args, rc, err, os.path.exists(os.path.dirname(png))))


@test
def test_gpt_reads_its_arguments_strictly():
    """./test_gpt refuses THREADS that is not a whole number in [1, 1024] and an argument that is
    neither a flag nor a readable reference file (a forgotten --only), with one line, before any check."""
    exe = os.path.join(ROOT, "test_gpt")
    if not os.path.exists(exe):
        raise Skip("./test_gpt is not built (make test_gpt)")
    cases = [({"THREADS": v}, ["--only", "files"], "THREADS") for v in ("2junk", "1.9", "4294967298", "0", "")]
    cases.append(({}, ["kerple", "--only", "files"], "'kerple' is neither a flag nor a reference file"))
    for env, args, says in cases:
        r = subprocess.run([exe, *args], cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)
        err = r.stderr.strip().splitlines()
        check(r.returncode == 1 and len(err) == 1 and says in err[0] and "PASS" not in r.stdout,
              "%s ./test_gpt %s: exit %d, %s" % (env, " ".join(args), r.returncode, r.stderr.strip()[-300:]))


@test
def table_compare_difference_in_spreads():
    """--compare A,B: B - A and |B - A| / max(std_A, std_B) per metric, from the fixtures' numbers."""
    runs = [f"{RUNS}/tiny_rope_seed{s}" for s in (42, 137)] + [f"{RUNS}/tiny_posaug_seed{s}" for s in (42, 137, 2024)]
    rc, out, err = run_py("dev/eval_table.py", *runs, f"{RUNS}/tiny_nope", "--tag", "eval_L1024",
                          "--compare", "tiny_rope,tiny_posaug", "--compare", "tiny_nope,tiny_posaug", "--csv")
    check(rc == 0, "exit %d: %s" % (rc, err))
    import csv as _csv
    got = {(r["a"], r["b"], r["metric"]): r for r in _csv.DictReader(io.StringIO(out))}
    rope = {"in-dist": [2.0, 2.2], "OOD": [3.0, 3.6], "cliff": [1.0, 1.4], "G": [-0.5, -0.7],
            "OOD/in-dist": [3.0 / 2.0, 3.6 / 2.2]}
    posaug = {"in-dist": [2.1, 2.2, 2.3], "OOD": [2.2, 2.4, 2.6], "cliff": [0.1, 0.2, 0.3], "G": [0.3, 0.4, 0.5],
              "OOD/in-dist": [2.2 / 2.1, 2.4 / 2.2, 2.6 / 2.3]}
    check(len(got) == 10, "5 metrics x 2 pairs: %s" % sorted(got))
    for metric in rope:
        a, b = rope[metric], posaug[metric]
        d = statistics.mean(b) - statistics.mean(a)
        k = abs(d) / max(statistics.stdev(a), statistics.stdev(b))
        r = got[("tiny_rope", "tiny_posaug", metric)]
        check(close(float(r["diff"]), d, 1e-9) and close(float(r["spreads"]), k, 1e-9),
              "%s: diff %s spreads %s, want %r %r" % (metric, r["diff"], r["spreads"], d, k))
        check(r["a_n"] == "2" and r["b_n"] == "3" and close(float(r["a_std"]), statistics.stdev(a), 1e-9),
              "%s: n and std %s" % (metric, r))
    n = got[("tiny_nope", "tiny_posaug", "cliff")]
    check(close(float(n["diff"]), 0.2 - 0.05, 1e-9) and close(float(n["spreads"]), 0.15 / 0.1, 1e-9)
          and n["a_n"] == "1", "one seed has no std: the other row's stands for it: %s" % n)
    # the markdown: the table, then the comparisons (in-dist 0.1 / 0.1414 = 0.7 spreads, cliff 1.0 / 0.2828 = 3.5)
    rc, out, err = run_py("dev/eval_table.py", *runs, "--tag", "eval_L1024", "--compare", "tiny_rope,tiny_posaug")
    check(rc == 0, "exit %d: %s" % (rc, err))
    tables = out.strip().split("\n\n")
    check(len(tables) == 2 and table_rows(tables[0])[0][0] == "method", "table then comparisons: %s" % out)
    head, rows = table_rows(tables[1])
    cells = {r[1]: r for r in [l.strip("|").split("|") for l in tables[1].splitlines()[2:]]}
    cells = {k.strip(): [c.strip() for c in v] for k, v in cells.items()}
    check(head[0] == "B - A" and cells["in-dist"] == ["tiny_posaug - tiny_rope", "in-dist", "2.100 ± 0.141 (2)",
                                                      "2.200 ± 0.100 (3)", "+0.100", "0.7"], "in-dist %s" % cells)
    check(cells["cliff"][4:] == ["-1.000", "3.5"], "cliff %s" % cells["cliff"])


@test
def table_compare_names_and_bad_pairs():
    # two tags in one folder: rows are 'label [tag]'; the bare label is ambiguous
    rc, out, err = run_py("dev/eval_table.py", f"{RUNS}/tiny_rope_seed42", "--csv",
                          "--compare", "tiny_rope [eval_L1024],tiny_rope [eval_L1024_yarn]")
    rows = [l.split(",") for l in out.splitlines()[1:]]
    ind = [r for r in rows if r[2] == "in-dist"]
    check(rc == 0 and len(ind) == 1 and close(float(ind[0][9]), 2.05 - 2.0, 1e-9) and ind[0][10] == "",
          "tagged rows: %d %s %s" % (rc, out, err))
    for pair, want in (("tiny_rope,tiny_rope [eval_L1024]", "names 2 rows"), ("tiny_rope [eval_L1024],nope", "no row"),
                       ("tiny_rope [eval_L1024]", "two row names")):
        rc, _, err = run_py("dev/eval_table.py", f"{RUNS}/tiny_rope_seed42", "--compare", pair)
        check(rc != 0 and want in err and "--compare" in err and "Traceback" not in err,
              "%r: %d %s" % (pair, rc, err))
    check(eval_table.spreads((1.0, 0.0, 3), (2.0, 0.0, 3)) == (1.0, None), "no spread when both stds are 0")
    check(eval_table.spreads((1.0, None, 1), (2.0, None, 1)) == (1.0, None), "no spread with one seed each")
    check(eval_table.spreads((1.0, 0.5, 3), (2.0, None, 1)) == (1.0, 2.0), "one seed: the other's std")
    check(eval_table.spreads((1.0, 0.5, 3), (2.0, 0.25, 3)) == (1.0, 2.0), "max of the two stds")


# ---- plot_eval -----------------------------------------------------------------------
def need_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise Skip("matplotlib is not installed (pip install matplotlib)")


def need_matplotlib_or_none():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 2000


@test
def plot_loss_curves():
    need_matplotlib()
    out = os.path.join(TMP, "plots", "cliff.png")
    rc, so, err = run_py("dev/plot_eval.py", f"{RUNS}/tiny_rope_seed42", f"{RUNS}/tiny_posaug_seed42/eval_L1024.json",
                         "--out", out, "--smooth", "16")
    check(rc == 0, "exit %d: %s" % (rc, err))
    check(os.path.exists(out) and is_png(out), "not a non-empty PNG")
    check("3 curves" in so, "a run folder expands to all its evals: %s" % so)


@test
def plot_gain_panel_and_labels():
    need_matplotlib()
    out = os.path.join(TMP, "plots", "gain.png")
    rc, so, err = run_py("dev/plot_eval.py", f"{RUNS}/tiny_rope_seed42", f"{RUNS}/tiny_posaug_seed42",
                         "--tag", "eval_L1024", "--labels", "rope,posaug", "--gain", "--smooth", "0", "--out", out)
    check(rc == 0, "exit %d: %s" % (rc, err))
    check(is_png(out), "not a non-empty PNG")
    check("4 gain curves" in so, "two variants x two runs: %s" % so)
    # CSV-only run without gain.window needs --window
    out2 = os.path.join(TMP, "plots", "band.png")
    rc, so, err = run_py("dev/plot_eval.py", f"{TMP}/csvonly/tiny_band", "--gain", "--window", "64", "--out", out2)
    check(rc == 0 and is_png(out2) and "1 gain curves" in so, "banded-only: %d %s %s" % (rc, so, err))


@test
def plot_bad_out_is_one_line():
    need_matplotlib()
    blocker = os.path.join(TMP, "plots_file")
    with open(blocker, "w") as f:
        f.write("a file, not a folder\n")
    for out, says in ((os.path.join(blocker, "x.png"), "cannot make its folder"), (os.path.join(TMP, "x.pngg"), "give a file ending"),
                      (os.path.join(TMP, "plots"), "give a file ending")):
        rc, so, err = run_py("dev/plot_eval.py", f"{RUNS}/tiny_nope", "--out", out)
        lines = [l for l in err.strip().splitlines() if l]
        check(rc != 0 and len(lines) == 1 and "--out" in err and says in err and "Traceback" not in err,
              "--out %s: exit %d, %r" % (out, rc, err))


@test
def plot_helpers():
    sys.path.insert(0, HERE)
    import plot_eval
    y = np.arange(10, dtype=float)
    s = plot_eval.smooth(y, 3)
    check(np.allclose(s[1:-1], y[1:-1]) and close(s[0], 0.5) and close(s[-1], 8.5), "smooth %s" % s)
    check(plot_eval.smooth(y, 1) is y, "smooth 1 is identity")
    g = plot_eval.gain_grid(64, 1024, 16)
    check(g[0] == 65 and g[-1] == 1024 and len(g) == 16, "grid %s" % g)


# ---- passkey prompts -----------------------------------------------------------------
def tiny_bpe():
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise Skip("the tokenizers library is not installed (pip install tokenizers)")
    path = os.path.join(TMP, "tok.json")
    if not os.path.exists(path):
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tr = trainers.BpeTrainer(vocab_size=350, special_tokens=["<|endoftext|>"],
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        text = ["The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."] * 30 \
            + ["There is an important info hidden. What is the pass key? Remember it. 12345 67890"] * 10
        tok.train_from_iterator(text, tr)
        tok.save(path)
    return path, Tokenizer.from_file(path)


def passkey(*args):
    rc, so, err = run_py("data/passkey_prompts.py", *args)
    check(rc == 0, "passkey_prompts exit %d: %s" % (rc, err))


def check_prompts(t, decode, lengths, n, kmin, kmax, eot):
    import passkey_prompts as pp
    off = t["offsets"]
    check(len(off) == len(lengths) * n + 1 and off[0] == 0 and off[-1] == len(t["tokens"]), "offsets")
    check(list(t["lengths"]) == [L for L in lengths for _ in range(n)], "lengths tensor")
    for i in range(len(off) - 1):
        ids = [int(x) for x in t["tokens"][off[i]:off[i + 1]]]
        L, K = int(t["lengths"][i]), int(t["keys"][i])
        check(len(ids) <= L, "prompt %d has %d > %d tokens" % (i, len(ids), L))
        check(len(ids) >= L - 8, "prompt %d has %d tokens, far below %d" % (i, len(ids), L))
        check(kmin <= K <= kmax, "key %d out of [%d, %d]" % (K, kmin, kmax))
        check(ids[0] == eot, "prompt %d does not start with EOT" % i)
        text = decode(ids[1:])
        check(text.startswith(pp.INTRO + "\n"), "prompt %d intro" % i)
        check(pp.NEEDLE.format(k=K) in text, "prompt %d: needle with key %d missing" % (i, K))
        check(text.endswith("\n" + pp.QUESTION), "prompt %d question" % i)
        check(text.count(str(K)) == 2, "key %d should appear exactly twice" % K)
        check(pp.FILLER in text, "prompt %d: no filler" % i)
        d = float(t["depths"][i])
        check(0.0 <= d <= 1.0, "depth %f" % d)
        before = text.split(pp.NEEDLE.format(k=K))[0]
        # the needle starts a line and sits between whole filler repeats
        check(before.endswith("\n") and (before == pp.INTRO + "\n" or before.endswith("again.\n")),
              "prompt %d: needle not between whole filler repeats" % i)
    check(len(set(int(k) for k in t["keys"])) > len(t["keys"]) // 2, "keys look constant")


@test
def passkey_bpe_needle_lengths():
    path, tok = tiny_bpe()
    out = os.path.join(TMP, "pk_bpe.bin")
    passkey("--tokenizer_file", path, "--lengths", "300,700", "--n", "12", "--seed", "7", "--out", out)
    kind, t = tensorfile.read_with_kind(out)
    check(kind == 3, "kind %d" % kind)
    check(list(t) == ["tokens", "offsets", "keys", "lengths", "depths"], "tensor names %s" % list(t))
    check(t["tokens"].dtype == np.int32 and t["depths"].dtype == np.float32, "dtypes")
    check_prompts(t, lambda ids: tok.decode(ids, skip_special_tokens=False), [300, 700], 12, 1, 50000,
                  tok.token_to_id("<|endoftext|>"))
    check(float(t["depths"].min()) < 0.35 and float(t["depths"].max()) > 0.65, "depths not spread")


@test
def passkey_determinism_and_digits():
    path, _ = tiny_bpe()
    a, b, c = (os.path.join(TMP, "pk_%s.bin" % x) for x in "abc")
    passkey("--tokenizer_file", path, "--lengths", "256,512", "--n", "6", "--digits", "5", "--out", a)
    passkey("--tokenizer_file", path, "--lengths", "256,512", "--n", "6", "--digits", "5", "--out", b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        check(fa.read() == fb.read(), "two runs differ")
    ta = tensorfile.read(a)
    check(ta["keys"].min() >= 10000 and ta["keys"].max() <= 99999, "5-digit keys %s" % ta["keys"])
    # the prompts of one length do not depend on the other lengths requested
    passkey("--tokenizer_file", path, "--lengths", "512", "--n", "6", "--digits", "5", "--out", c)
    tc = tensorfile.read(c)
    check(np.array_equal(tc["keys"], ta["keys"][6:]), "length-512 keys depend on other lengths")
    check(np.array_equal(tc["tokens"], ta["tokens"][ta["offsets"][6]:]), "length-512 prompts differ")
    passkey("--tokenizer_file", path, "--lengths", "256,512", "--n", "6", "--digits", "5", "--seed", "99", "--out", c)
    check(not np.array_equal(tensorfile.read(c)["keys"], ta["keys"]), "--seed has no effect")


@test
def passkey_byte_tokens():
    out = os.path.join(TMP, "pk_byte.bin")
    passkey("--tokenizer", "byte", "--lengths", "400,1000", "--n", "5", "--out", out)
    t = tensorfile.read(out)
    check_prompts(t, lambda ids: bytes(ids).decode("utf-8"), [400, 1000], 5, 1, 50000, 256)


@test
def passkey_bad_inputs():
    rc, _, err = run_py("data/passkey_prompts.py", "--tokenizer", "byte", "--lengths", "50",
                        "--out", os.path.join(TMP, "x.bin"))
    check(rc != 0 and "shorter than the prompt" in err, "too-short length: %d %s" % (rc, err))
    rc, _, err = run_py("data/passkey_prompts.py", "--tokenizer", "byte", "--lengths", "1k",
                        "--out", os.path.join(TMP, "x.bin"))
    check(rc != 0 and "--lengths" in err, "bad --lengths: %d %s" % (rc, err))


def check_ruler_prompts(t, decode, lengths, n, eot, slack):
    import passkey_prompts as pp
    off = t["offsets"]
    check(len(off) == len(lengths) * n + 1 and off[-1] == len(t["tokens"]), "offsets")
    check(list(t["lengths"]) == [L for L in lengths for _ in range(n)], "lengths tensor")
    for i in range(len(off) - 1):
        ids = [int(x) for x in t["tokens"][off[i]:off[i + 1]]]
        L, V = int(t["lengths"][i]), int(t["keys"][i])
        check(L - slack <= len(ids) <= L, "prompt %d has %d tokens for length %d" % (i, len(ids), L))
        check(1000000 <= V <= 9999999 and ids[0] == eot, "prompt %d: value %d, first token %d" % (i, V, ids[0]))
        text = decode(ids[1:])
        head, body, question = text.split("\n")
        check(head == pp.RULER_INTRO, "prompt %d intro" % i)
        words = [w for w in (a + "-" + b for a in pp.RULER_ADJ for b in pp.RULER_NOUN)
                 if "One of the special magic numbers for %s is: %d." % (w, V) in body]
        check(len(words) == 1 and body.count("special magic") == 1, "prompt %d: one needle with value %d" % (i, V))
        check(question.startswith("What is the special magic number for %s mentioned" % words[0])
              and question.endswith("for %s mentioned in the provided text is" % words[0]), "prompt %d question" % i)
        check(body.replace("One of the special magic numbers for %s is: %d." % (words[0], V), pp.FILLER)
              == " ".join([pp.FILLER] * (body.count(pp.FILLER) + 1)), "prompt %d: fillers not whole blocks" % i)


@test
def ruler_prompts_bpe_and_bytes():
    path, tok = tiny_bpe()
    out = os.path.join(TMP, "ruler_bpe.bin")
    passkey("--task", "ruler", "--tokenizer_file", path, "--lengths", "400,800", "--n", "6", "--out", out)
    kind, t = tensorfile.read_with_kind(out)
    check(kind == 3 and list(t) == ["tokens", "offsets", "keys", "lengths", "depths"], "kind %d, %s" % (kind, list(t)))
    block = len(tok.encode(" " + "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back "
                           "again.").ids)
    check_ruler_prompts(t, lambda ids: tok.decode(ids, skip_special_tokens=False), [400, 800], 6,
                        tok.token_to_id("<|endoftext|>"), block + 2)
    out = os.path.join(TMP, "ruler_byte.bin")
    passkey("--task", "ruler", "--tokenizer", "byte", "--lengths", "600,1200", "--n", "5", "--out", out)
    t = tensorfile.read(out)
    check_ruler_prompts(t, lambda ids: bytes(ids).decode("utf-8"), [600, 1200], 5, 256, 89)
    check(float(t["depths"].min()) < 0.5 < float(t["depths"].max()) or len(set(t["depths"])) > 1, "depths constant")
    rc, _, err = run_py("data/passkey_prompts.py", "--task", "ruler", "--tokenizer", "byte", "--digits", "5",
                        "--out", os.path.join(TMP, "x.bin"))
    check(rc != 0 and "RULER's values have 7 digits" in err, "--digits with ruler: %d %s" % (rc, err))


HS_ROWS = [
    {"activity_label": "Removing ice from car", "ctx_a": "Then, the man writes over the snow covering the window.",
     "ctx_b": "then", "endings": [", the man adds wax.", ", a person boards a ski lift.", ", the man puts on a coat.",
                                  ", the man continues removing the snow."], "label": 3},
    {"activity_label": "Personal Care and Style", "ctx_a": "[header] How to dye your hair [title] Wash your hair.",
     "ctx_b": "", "endings": ["[step] Use a gentle shampoo.  Rinse well.", "Eat a sandwich.", "Paint the wall.",
                              "Drive to the store."], "label": 0},
]


def write_hs_jsonl(rows):
    path = os.path.join(TMP, "hs.jsonl")
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


@test
def hellaswag_file_from_jsonl():
    out = os.path.join(TMP, "hs.bin")
    rc, _, err = run_py("data/hellaswag.py", "--input", write_hs_jsonl(HS_ROWS), "--tokenizer", "byte", "--out", out)
    check(rc == 0, "hellaswag.py exit %d: %s" % (rc, err))
    kind, t = tensorfile.read_with_kind(out)
    check(kind == 3 and list(t) == ["ctx_tokens", "ctx_offsets", "end_tokens", "end_offsets", "end_chars", "labels"],
          "kind %d, %s" % (kind, list(t)))
    ctx = lambda i: bytes(t["ctx_tokens"][t["ctx_offsets"][i] + 1:t["ctx_offsets"][i + 1]].tolist()).decode()  # noqa: E731
    end = lambda e: bytes(t["end_tokens"][t["end_offsets"][e]:t["end_offsets"][e + 1]].tolist()).decode()  # noqa: E731
    # lm-evaluation-harness's preprocessing, written out by hand
    check(ctx(0) == "Removing ice from car: Then, the man writes over the snow covering the window. Then", ctx(0))
    check(ctx(1) == "Personal Care and Style: How to dye your hair. Wash your hair.", ctx(1))
    check(end(3) == " , the man continues removing the snow." and end(4) == "  Use a gentle shampoo. Rinse well.",
          "%r %r" % (end(3), end(4)))
    check(all(t["ctx_tokens"][t["ctx_offsets"][i]] == 256 for i in range(2)), "contexts start with EOT")
    check(list(t["labels"]) == [3, 0] and list(t["end_chars"]) == [len(end(e)) - 1 for e in range(8)],
          "labels %s, chars %s" % (list(t["labels"]), list(t["end_chars"])))
    rc, _, err = run_py("data/hellaswag.py", "--input", write_hs_jsonl(HS_ROWS[:1] + [dict(HS_ROWS[1], label=5)]),
                        "--tokenizer", "byte", "--out", out)
    check(rc != 0 and "line 2" in err and "label" in err, "bad label: %d %s" % (rc, err))
    rc, _, err = run_py("data/hellaswag.py", "--input", os.path.join(TMP, "none.jsonl"), "--tokenizer", "byte")
    check(rc != 0 and "does not exist" in err, "missing input: %d %s" % (rc, err))


def rfs_tasks(*args):
    rc, so, err = run_py("data/rfs_tasks.py", *args)
    check(rc == 0, "rfs_tasks exit %d: %s" % (rc, err))


def expected_answer(task, prompt):
    """The answer by Python's own reading of the prompt."""
    body = prompt.split(":", 1)[1] if task in ("copy", "reverse") else prompt
    if task == "copy":
        return body.strip()
    if task == "reverse":
        return " ".join(body.split()[::-1])
    if task == "addition":
        a, b = prompt[len("Compute "):-2].split(" + ")
        return "The answer is %s." % " ".join(str(int(a.replace(" ", "")) + int(b.replace(" ", ""))))
    if task == "sort":
        items = [x.strip() for x in prompt[prompt.index("[") + 1:prompt.index("]")].split(",")]
        items = sorted(items, key=lambda x: int(x.replace(" ", "")))
        return "The sorted list is [ %s ]." % ", ".join(items)
    terms = [int(x) for x in prompt[len("Compute: "):-2].split(" + ")]
    return "The answer is %d ." % (sum(terms) % 10)


@test
def rfs_tasks_answers_masks_lengths():
    sys.path.insert(0, os.path.join(ROOT, "data"))
    import shards
    for task, L, T in (("copy", 6, 32), ("reverse", 6, 40), ("addition", 4, 64), ("sort", 4, 96), ("summation", 5, 48)):
        d = os.path.join(TMP, "task_" + task)
        rfs_tasks("--task", task, "--train_len", str(L), "--seq_len", str(T), "--n_train", "60", "--n_val", "5",
                  "--n_test", "3", "--out_dir", d)
        toks, mask = shards.read_shard(os.path.join(d, "train.bin"), 257, with_mask=True)
        check(len(toks) == 60 * T + 1, "%s: %d tokens, not 60 windows of %d + 1" % (task, len(toks), T))
        for e in range(60):  # window e starts with EOT; the mask covers exactly the answer after the prompt's newline
            w, m = list(toks[e * T:(e + 1) * T]), list(mask[e * T:(e + 1) * T])
            text = bytes(x for x in w if x < 256).decode()
            prompt, answer = text.split("\n", 1)
            check(w[0] == 256 and bytes(x for x, k in zip(w, m) if k).decode() == answer, "%s window %d mask" % (task, e))
            check(answer == expected_answer(task, prompt + "\n"), "%s: %r -> %r" % (task, prompt, answer))
        vt, vm = shards.read_shard(os.path.join(d, "val.bin"), 257, with_mask=True)
        check(len(vt) == 5 * T + 1 and vm is not None and 0 < sum(vm) < len(vm), "%s: val.bin holds 5 masked windows" % task)
        t = tensorfile.read(os.path.join(d, "test.bin"))
        check(sorted(set(t["lengths"].tolist())) == list(range(1, 3 * L + 1)), "%s test lengths" % task)
        for i in range(len(t["lengths"])):
            p = bytes(t["prompt_tokens"][t["prompt_offsets"][i] + 1:t["prompt_offsets"][i + 1]].tolist()).decode()
            a = bytes(t["answer_tokens"][t["answer_offsets"][i]:t["answer_offsets"][i + 1]].tolist()).decode()
            check(a == expected_answer(task, p), "%s test %d: %r -> %r" % (task, i, p, a))
    rc, _, err = run_py("data/rfs_tasks.py", "--task", "copy", "--train_len", "40", "--seq_len", "32",
                        "--out_dir", os.path.join(TMP, "x"))
    check(rc != 0 and "more than --seq_len 32" in err, "an example longer than the window: %d %s" % (rc, err))


# ---- every script: --help, and one line for a missing package (issue 25) ------------------
from needs import hiding_env, pythons, venv_packages  # noqa: E402  (shared with data/test_data.py)

MAKE_VENV = venv_packages()  # the packages `make venv` installs: the line names it
# scripts whose --help itself needs a package: gru_reference.py's model class derives from
# torch.nn.Module when the file loads
HELP_NEEDS = {"dev/gru_reference.py": "numpy"}


def hiding(*packages):
    """os.environ hiding `packages` (default: all needs.HIDEABLE), in one folder per set under TMP."""
    return hiding_env(os.path.join(TMP, "hide_" + "_".join(packages or ("all",))), *packages)


def dev_scripts():
    """dev/*.py with a __main__ entry (the test suites aside), and dev/cuda_emu/transform.py."""
    out = []
    for p in sorted(glob.glob(os.path.join(HERE, "*.py"))) + [os.path.join(HERE, "cuda_emu", "transform.py")]:
        with open(p, encoding="utf-8") as f:
            if not os.path.basename(p).startswith("test_") and '__name__ == "__main__"' in f.read():
                out.append(os.path.relpath(p, ROOT))
    return out


def check_missing(r, rel, pkg):
    """Exit 1 and one stderr line naming the package, nothing else."""
    err = r.stderr.strip()
    what = "%s (exit %d): %r" % (rel, r.returncode, err[-1500:])
    check(r.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1 and not r.stdout, what)
    check(err.startswith("error: %s needs %s" % (rel, pkg))
          and (err.endswith("pip install %s" % pkg) or err.endswith("(or pip install %s)" % pkg)), what)
    if pkg in MAKE_VENV:
        check(err == "error: %s needs %s: run `make venv` and use .venv/bin/python (or pip install %s)" % (rel, pkg, pkg),
              what)


@test
def dev_scripts_answer_help_without_packages():
    scripts = dev_scripts()
    check(len(scripts) >= 13 and "dev/import_hf.py" in scripts and "dev/tensorfile.py" in scripts, scripts)
    for py in pythons():
        for rel in scripts:
            for flag in ("-h", "--help"):
                r = subprocess.run([py, os.path.join(ROOT, rel), flag], capture_output=True, text=True, timeout=60,
                                   env=hiding(), cwd=TMP)
                if rel in HELP_NEEDS:
                    check_missing(r, rel, HELP_NEEDS[rel])
                    continue
                check(r.returncode == 0 and r.stdout.startswith("usage: ") and not r.stderr,
                      "%s %s %s: exit %d, %r" % (py, rel, flag, r.returncode, (r.stderr or r.stdout)[-800:]))
    import importlib.util
    if importlib.util.find_spec("torch"):
        rc, out, err = run_py("dev/gru_reference.py", "--help")
        check(rc == 0 and out.startswith("usage: "), "gru_reference.py --help with torch: %d %s" % (rc, err[-500:]))
    return "%d scripts, %s" % (len(scripts), ", ".join(pythons()))


@test
def ablate_pe_survey_plan():
    """The PE survey's benchmark as ablate.py plans it: every encoding trained at w and evaluated
    at 20w, the learned table sized to 20w; the GPU plan at the survey's scale (w 512, 10,240)."""
    rc, out, err = run_py("dev/ablate.py", "--table", "pe-survey", "--cpu", "--dry_run", "--out", os.path.join(TMP, "pes"))
    check(rc == 0 and "unavailable" not in out, "cpu plan: %d %s %s" % (rc, out[-800:], err[-800:]))
    lines = out.splitlines()
    trains = [l for l in lines if l.startswith("./train_gpt_cpu") and "--eval_only" not in l]
    evals = [l for l in lines if "--eval_only" in l]
    check(len(trains) == 16 and len(evals) == 16, "%d trainings, %d evaluations" % (len(trains), len(evals)))
    check(all("--eval_len 0" in t for t in trains) and all("--eval_len 2560 --eval_tag eval_20x" in e for e in evals),
          "the tiny model (w 128) trains without evaluation, then evaluates at 20w: %s" % evals[:1])
    for flags in ("--pe sinusoidal", "--pe learned --wpe_rows 2560", "--pe shaw", "--pe tpe", "--pe tupe --wpe_rows 2560", "--pe erpe", "--pe t5", "--pe tape",
                  "--pe alibi", "--pe kerple", "--pe kerple-power", "--pe fire", "--pe nope", "--pos posaug", "--pos pose --pose_target 2560"):
        check(any(flags in t for t in trains), "no row trains with %s" % flags)
    rc, out, err = run_py("dev/ablate.py", "--table", "pe-survey", "--dry_run", "--trainer", "./no_such_trainer",
                          "--out", os.path.join(TMP, "pes_gpu"))
    check(rc == 0 and "--n_layer 2 --n_kv_head 4 --seq_len 512" in out and "--eval_len 10240 --eval_tag eval_20x" in out,
          "gpu plan: %d %s %s" % (rc, out[-800:], err[-800:]))
    return "%d rows" % len(trains)


@test
def ablate_fine_tune_rows():
    """Table 6's fine-tune rows start from the baseline's checkpoint of the same seed with 10% of
    the steps and warmup (PoSE's regime, the PosAug paper's retrofit); a fine-tune whose
    checkpoint is missing fails naming the row to run first, without training anything."""
    out_dir = os.path.join(TMP, "t6ft")
    rc, out, err = run_py("dev/ablate.py", "--table", "6", "--cpu", "--dry_run", "--seeds", "42,7", "--out", out_dir,
                          "--rows", "rope,pose_ft_linear,posaug_ft")
    check(rc == 0, "dry run: %d %s %s" % (rc, out[-800:], err[-800:]))
    trains = [l for l in out.splitlines() if l.startswith("./train_gpt_cpu")]
    ft = [l for l in trains if "--init_from" in l]
    check(len(trains) == 6 and len(ft) == 4, "%d trainings, %d fine-tunes" % (len(trains), len(ft)))
    for seed in (42, 7):
        src = "--init_from %s/rope_seed%d/checkpoint.bin" % (out_dir, seed)
        check(sum(src in l and "--seed %d " % seed in l for l in ft) == 2, "seed %d: %s" % (seed, ft))
    check(all("--steps 60 --warmup 3 --lr 0.0003 --min_lr 0.0003" in l for l in ft),
          "10%% of 600 steps and 30 warmup, at the final rate: %s" % ft[:1])
    check(any("--pos pose --pose_target 1024 --pose_scaling linear" in l for l in ft), "PoSE + linear: %s" % ft)
    rc, out, err = run_py("dev/ablate.py", "--table", "6", "--cpu", "--rows", "posaug_ft", "--out", out_dir)
    check(rc == 1 and "fine-tunes row 'rope'" in err and "run --rows rope first" in err
          and not os.path.exists(os.path.join(out_dir, "posaug_ft_seed42", "log.jsonl")),
          "missing baseline: %d %s %s" % (rc, out[-800:], err[-800:]))
    return "%d fine-tunes over 2 seeds" % len(ft)


# (script, arguments that parse, packages hidden (none named: all), the package the line names)
MISSING_CASES = [
    ("dev/ablate.py", ["--table", "6", "--cpu", "--dry_run"], (), "numpy"),
    ("dev/bench_torch.py", ["--steps", "1"], (), "torch"),
    ("dev/bf16_drift.py", [], (), "numpy"),
    ("dev/bf16_drift.py", [], ("torch",), "torch"),
    ("dev/eval_table.py", [RUNS], (), "numpy"),
    ("dev/export_hf.py", ["ckpt.bin", "hf_out"], (), "numpy"),
    ("dev/gru_reference.py", ["--out", "gru.bin"], (), "numpy"),
    ("dev/hf_reference.py", ["--out", "hf.bin"], (), "numpy"),
    ("dev/import_hf.py", ["hf_in", "ckpt.bin"], (), "numpy"),
    ("dev/plot_eval.py", [RUNS, "--out", "p.png"], (), "numpy"),
    ("dev/plot_eval.py", [RUNS, "--out", "p.png"], ("matplotlib",), "matplotlib"),
    ("dev/pytorch_reference.py", ["--out", "ref.bin"], (), "numpy"),
    ("dev/scaling_reference.py", ["--out", "s.bin"], (), "numpy"),
    ("dev/tensorfile.py", [os.path.join(HERE, "reference_tiny.bin")], (), "numpy"),
    ("data/passkey_prompts.py", ["--tokenizer_file", "tok.json", "--out", "pk.bin"], ("tokenizers",), "tokenizers"),
    ("data/hellaswag.py", ["--tokenizer_file", "tok.json", "--input", "HS_JSONL", "--out", "hs.bin"], ("tokenizers",),
     "tokenizers"),  # through passkey_prompts' Encoder: the line names the script that was run
]


@test
def scripts_name_a_missing_package():
    hs = write_hs_jsonl(HS_ROWS)
    for k, (rel, args, hidden, pkg) in enumerate(MISSING_CASES):
        cwd = os.path.join(TMP, "missing_%d" % k)
        os.makedirs(cwd)
        r = subprocess.run([sys.executable, os.path.join(ROOT, rel)] + [hs if a == "HS_JSONL" else a for a in args],
                           capture_output=True, text=True, timeout=60, env=hiding(*hidden), cwd=cwd)
        check_missing(r, rel, pkg)
        check(os.listdir(cwd) == [], "%s left %s" % (rel, os.listdir(cwd)))
    uses = {rel for rel in dev_scripts() if "import needs" in open(os.path.join(ROOT, rel), encoding="utf-8").read()}
    check(uses <= {c[0] for c in MISSING_CASES}, "no case for %s" % sorted(uses - {c[0] for c in MISSING_CASES}))


@test
def tensorfile_cli_lists_and_refuses():
    rc, out, err = run_py("dev/tensorfile.py", os.path.join(HERE, "reference_tiny.bin"))
    check(rc == 0 and out.startswith("kind 1, ") and "config_i" in out, "listing: %d %s" % (rc, err[-500:]))
    for bad, words in ((os.path.join(TMP, "none.bin"), "No such file"), (os.path.join(HERE, "needs.py"), "bad magic")):
        rc, out, err = run_py("dev/tensorfile.py", bad)
        check(rc == 1 and err.startswith("tensorfile.py: error: ") and words in err and len(err.splitlines()) == 1,
              "%s: %d %r" % (bad, rc, err[-800:]))


# ---- shell scripts ---------------------------------------------------------------------
# dev/gpu_check.sh and dev/bench_cpu.sh run only where a GPU or PyTorch is: a syntax error
# there would cost a GPU session its time, so every script is parsed here (bash -n) and,
# where shellcheck is installed, kept free of its warnings.
SHELL_SCRIPTS = [".ci/run", "dev/bench_cpu.sh", "dev/check_cuda_build.sh", "dev/check_encoding_names.sh", "dev/check_headers.sh",
                 "dev/check_arm64.sh", "dev/check_kernel_isas.sh", "dev/check_no_openmp.sh", "dev/check_user_build.sh", "dev/cpu_machine.sh", "dev/gpu_check.sh", "dev/overhead.sh", "dev/profile_cpu.sh", "dev/run_tests.sh", "dev/sanitize.sh", "dev/test_gpu_check.sh",
                 "dev/cuda_emu/coverage.sh", "dev/cuda_emu/run.sh", "dev/cuda_emu/trainer.sh", "dev/fuzz/run.sh"]


@test
def shell_scripts_parse():
    import glob
    found = sorted({os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "dev", "**", "*.sh"), recursive=True)})
    check(set(found) <= set(SHELL_SCRIPTS), "scripts not in SHELL_SCRIPTS: %s" % sorted(set(found) - set(SHELL_SCRIPTS)))
    for rel in SHELL_SCRIPTS:
        r = subprocess.run(["bash", "-n", os.path.join(ROOT, rel)], capture_output=True, text=True)
        check(r.returncode == 0, "%s does not parse: %s" % (rel, r.stderr))


@test
def shell_scripts_shellcheck():
    import shutil
    if not shutil.which("shellcheck"):
        raise Skip("shellcheck is not installed")
    r = subprocess.run(["shellcheck", "-S", "warning"] + [os.path.join(ROOT, p) for p in SHELL_SCRIPTS],
                       capture_output=True, text=True)
    check(r.returncode == 0, "shellcheck warnings:\n%s" % r.stdout[:3000])


# ---- scaling reference file ----------------------------------------------------------
@test
def scaling_reference_file():
    path = os.path.join(HERE, "scaling_reference.bin")
    if not os.path.exists(path):
        raise Skip("dev/scaling_reference.bin not generated (python dev/scaling_reference.py)")
    kind, t = tensorfile.read_with_kind(path)
    check(kind == 1 and os.path.getsize(path) < 50000, "kind/size")
    check(list(t["yarn_s4.low_high"]) == [8, 21], "yarn low/high %s" % t["yarn_s4.low_high"])
    plain = 10000.0 ** (-np.arange(0, 64, 2) / 64)
    check(np.allclose(t["plain.inv_freq"], plain, rtol=1e-6), "plain inv_freq")
    check(np.array_equal(t["dynamic_s4_len1024.inv_freq"], t["plain.inv_freq"]), "dynamic at n <= w")
    check(np.allclose(t["pi_s4.inv_freq"], plain / 4, rtol=1e-6), "PI")
    check(np.allclose(t["ntk_s4.inv_freq"], (10000.0 * 4 ** (64 / 62)) ** (-np.arange(0, 64, 2) / 64), rtol=1e-6), "NTK")
    check(close(float(t["yarn_s4.attention_factor"][0]), 0.1 * math.log(4) + 1, 1e-6), "attention factor")
    y = t["yarn_s4.inv_freq"]
    check(np.allclose(y[:8], plain[:8], rtol=1e-6) and np.allclose(y[21:], plain[21:] / 4, rtol=1e-6), "yarn ends")


def main():
    try:
        return SUITE.run(quiet=True)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
