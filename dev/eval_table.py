"""Summarise evaluation runs as a table in the PosAug paper's format.

    python dev/eval_table.py runs/10m_rope_seed* runs/10m_posaug_seed* --baseline 10m_rope
    python dev/eval_table.py runs/a runs/b --labels baseline,posaug --baseline baseline
    python dev/eval_table.py runs/* --group_by '^(.*)_s\\d+$' --csv
    python dev/eval_table.py runs/x/eval_L8192_yarn.json          # one evaluation file

Each argument is a run folder (every evaluation in it, whatever its --eval_tag, or only
`--tag TAG`) or one evaluation JSON. An evaluation is the pair `<tag>.json` + `<tag>.csv`
written by the trainer (README, "What the numbers mean"; the PosAug paper's Section 3); in a
folder, a JSON is one when its first field is `"tag": "<tag>"`, its own name (the trainer's
run-folder rule, llmc/runfolder.h). A folder whose evaluation was stopped while its files
were being renamed (`<tag>.commit` there), or a JSON in such a folder, is refused until a
trainer run in it finishes it (a journal that is not whole: until the user removes it).

Columns: method | cliff | G(C) | in-dist | delta | penalty | OOD/in-dist
- Rows are groups. Default grouping: the run folder's name with a trailing `_seed<N>`
  removed, so `10m_posaug_seed42`, `10m_posaug_seed137` form one row `10m_posaug`.
  `--group_by REGEX` uses the regex's first group (or whole match) on the folder name;
  `--labels a,b,...` gives one label per argument (equal labels are grouped).
  When the arguments hold more than one evaluation tag, rows are (label, tag).
- cliff, G and in-dist: mean +- sample std (n-1) over the group; only the mean when n = 1.
- G(C) = mean over W <= i < C of loss_variant(i) - loss(i) (W the window, 512 in the
  paper); positive means the long context helps. C is the largest length every
  evaluation with gain data can give: a length in the JSON's `gain.lengths`, or any
  C <= L_eval when the CSV has the variant's column. The variant is `chunked` (the
  paper's KV-cache approximation) when every such evaluation has it, else `banded`
  (exact sliding window); `--variant` forces one. The header names both, e.g. `G(8K), chunked`.
- delta = group mean in-dist minus the baseline's mean in-dist; penalty = delta /
  baseline in-dist, in %. `--baseline` is a group label or a run folder / JSON path; the
  baseline evaluation with the same tag is used, else one with the same L_eval and no
  scaling, else any. Without --baseline, the JSONs' own `penalty` (a fraction) is
  averaged and delta derived from it; `-` where there is none.
- OOD/in-dist: the JSON's `ratio` (OOD loss over in-distribution loss, the PosAug paper's
  frequency-analysis ratio: 1.18 means 18% worse past the window), computed from `ood`
  and `in_dist` for files written before the field existed; mean +- std like cliff.
`--csv` prints the same numbers as CSV (means and stds in separate columns).

`--compare A,B` (repeatable) adds, under the table, row B against row A for every metric
both have (in-dist, OOD, cliff, G, OOD/in-dist): each side's mean +- std (n), the
difference B - A and how many spreads it is, |B - A| / max(std_A, std_B) (the larger
sample std of the two; a row of one seed has none and the other's stands for it; `-` when
neither row has one): under 1 the rows are tied within their spread (doc/evaluation.md,
"Comparing two rows"). A row is named by its label, or `label [tag]` when the arguments
hold several tags. With `--csv` only the comparisons are printed, as CSV.
"""
import argparse
import csv
import glob
import io
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np

SEED_RE = re.compile(r"_seed\d+$")
VARIANTS = ("chunked", "banded")


def die(msg):
    sys.exit(os.path.basename(sys.argv[0]) + ": error: " + msg)


# ---- loading -------------------------------------------------------------------------
class Eval:
    """One evaluation: its JSON fields (`.j`), folder, tag and lazily its CSV columns."""

    def __init__(self, json_path):
        self.json_path = json_path
        try:
            with open(json_path, encoding="utf-8") as f:
                self.j = json.load(f)
        except (OSError, ValueError) as e:
            die("cannot read %s: %s" % (json_path, e))
        if not isinstance(self.j, dict):
            die("%s: not a JSON object" % json_path)
        self.tag = self.j.get("tag") or os.path.splitext(os.path.basename(json_path))[0]
        self.dir = os.path.dirname(os.path.abspath(json_path))
        self.run_name = os.path.basename(self.dir)
        self.csv_path = os.path.splitext(json_path)[0] + ".csv"
        self._cols = None

    def get(self, key, default=None):
        v = self.j.get(key, default)
        return default if v is None else v

    @property
    def cols(self):
        """{column name: float64 array} from the CSV (empty dict if there is no CSV)."""
        if self._cols is None:
            self._cols = {}
            if os.path.exists(self.csv_path):
                with open(self.csv_path, encoding="utf-8") as f:
                    rows = list(csv.reader(f))
                if rows:
                    head = [h.strip() for h in rows[0]]
                    data = [r for r in rows[1:] if r]
                    try:
                        arr = np.array([[float(x) for x in r] for r in data], dtype=np.float64)
                    except ValueError as e:
                        die("%s: non-numeric value (%s)" % (self.csv_path, e))
                    if arr.size == 0:
                        arr = arr.reshape(0, len(head))
                    if arr.shape[1] != len(head):
                        die("%s: rows have %d fields, header has %d" % (self.csv_path, arr.shape[1], len(head)))
                    self._cols = {h: arr[:, k] for k, h in enumerate(head)}
                    if "position" in self._cols:
                        order = np.argsort(self._cols["position"], kind="stable")
                        self._cols = {h: c[order] for h, c in self._cols.items()}
        return self._cols

    @property
    def L(self):
        return int(self.get("L_eval", len(self.cols.get("loss", []))))

    @property
    def window(self):
        """The train window w."""
        return self.get("train_window")

    def gain_window(self, default=None):
        g = self.j.get("gain") or {}
        return g.get("window", default)

    def gain_lengths(self, variant):
        g = self.j.get("gain") or {}
        if g.get(variant) is None:
            return []
        return [int(c) for c in g.get("lengths", [])]

    def has_column(self, variant):
        return ("loss_" + variant) in self.cols and "loss" in self.cols

    def max_gain_C(self, variant):
        """Largest C this evaluation can give G(C) for with this variant (0: none)."""
        best = max(self.gain_lengths(variant), default=0)
        if self.has_column(variant) and self.gain_window() is not None:
            best = max(best, len(self.cols["loss"]))
        return best

    def G(self, C, variant, window=None):
        """G(C) from the JSON when it has C, else from the CSV; None if neither can."""
        lens = self.gain_lengths(variant)
        if C in lens:
            return float(self.j["gain"][variant][lens.index(C)])
        W = self.gain_window(window)
        if W is not None and self.has_column(variant):
            return gain_from_columns(self.cols["loss"], self.cols["loss_" + variant], int(W), C)
        return None


def gain_from_columns(loss, loss_variant, W, C):
    """G(C) = mean over W <= i < C of loss_variant(i) - loss(i)."""
    C = min(int(C), len(loss))
    if C <= W:
        return float("nan")
    return float(np.mean(loss_variant[W:C] - loss[W:C]))


def summaries(folder):
    """The evaluations in a run folder: each <tag>.json whose first field names <tag>."""
    found = []
    for f in sorted(glob.glob(os.path.join(glob.escape(folder), "*.json"))):
        tag = os.path.basename(f)[:-len(".json")]
        try:
            with open(f, encoding="utf-8", errors="replace") as fh:
                head = fh.read(512)
        except OSError:
            continue
        if not tag.endswith("_task") and head.startswith('{"tag": ' + json.dumps(tag, ensure_ascii=False)):
            found.append(f)
    return found


def journal_whole(path):
    """Whether an evaluation's journal <tag>.commit is whole: its last line `end <n>` after n
    file names (doc/formats.md, llmc/runfolder.h); an empty or cut one is not."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 16).split("\n")
    except OSError:
        return False
    m = re.fullmatch(r"end (\d+)", lines[-2]) if len(lines) >= 3 and lines[-1] == "" else None
    return bool(m) and int(m.group(1)) == len(lines) - 2


def refuse_pending(folder, arg):
    """A folder with a journal (<tag>.commit: an evaluation stopped while its files were renamed)
    holds a set that may be half old, half new: refused, whether the argument is the folder
    or a JSON in it."""
    pending = sorted(glob.glob(os.path.join(glob.escape(folder), "*.commit")))
    if not pending:
        return
    tag = os.path.basename(pending[0])[:-len(".commit")]
    if journal_whole(pending[0]):
        die("%s: the evaluation %s in %s was stopped while its files were renamed: run any trainer command in that "
            "folder (it finishes it) first" % (arg, tag, folder))
    die("%s: %s is not a whole journal of an evaluation (the trainer leaves it, and the files of %s, as they are): "
        "check those files, then remove it" % (arg, pending[0], tag))


def load_evals(args_paths, tag=None):
    """Expand arguments to a list of (argument index, Eval)."""
    out = []
    for k, p in enumerate(args_paths):
        if os.path.isdir(p):
            refuse_pending(p, p)
            files = summaries(p)
            if tag is not None:
                files = [f for f in files if os.path.splitext(os.path.basename(f))[0] == tag]
            if not files:
                die("%s: no %s in this folder" % (p, ("evaluation tagged %s" % tag) if tag else "evaluation"))
            out.extend((k, Eval(f)) for f in files)
        elif os.path.isfile(p) and p.endswith(".json"):
            refuse_pending(os.path.dirname(p) or ".", p)
            out.append((k, Eval(p)))
        else:
            die("%s: not a run folder or an evaluation .json" % p)
    return out


def default_label(ev):
    return SEED_RE.sub("", ev.run_name)


def assign_labels(evals, labels=None, group_by=None, n_args=None):
    """[(label, Eval)] using --labels (one per argument), --group_by or the default."""
    if labels is not None:
        names = [s.strip() for s in labels.split(",")]
        if len(names) != n_args:
            die("--labels has %d names for %d arguments" % (len(names), n_args))
        return [(names[k], ev) for k, ev in evals]
    if group_by is not None:
        try:
            rx = re.compile(group_by)
        except re.error as e:
            die("--group_by: bad regex (%s)" % e)
        res = []
        for _, ev in evals:
            m = rx.search(ev.run_name)
            res.append((((m.group(1) if m.groups() else m.group(0)) if m else ev.run_name), ev))
        return res
    return [(default_label(ev), ev) for _, ev in evals]


# ---- aggregation ---------------------------------------------------------------------
def mean_std(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    if not xs:
        return None, None, 0
    m = float(np.mean(xs))
    s = float(np.std(xs, ddof=1)) if len(xs) > 1 else None
    return m, s, len(xs)


def fmt_C(C):
    return "%dK" % (C // 1024) if C % 1024 == 0 else str(C)


def choose_gain(evs, variant=None):
    """(C, variant) for the G column, or (None, None) when no evaluation has gain data."""
    with_any = [ev for ev in evs if any(ev.max_gain_C(v) for v in VARIANTS)]
    if not with_any:
        return None, None
    if variant is None:
        full = [v for v in VARIANTS if all(ev.max_gain_C(v) for ev in with_any)]
        variant = full[0] if full else max(VARIANTS, key=lambda v: sum(ev.max_gain_C(v) > 0 for ev in evs))
    Cs = None
    for ev in evs:
        if ev.max_gain_C(variant) == 0:
            continue
        mine = set(ev.gain_lengths(variant))
        if ev.has_column(variant) and ev.gain_window() is not None:
            mine |= set(range(int(ev.gain_window()) + 1, len(ev.cols["loss"]) + 1))
        Cs = mine if Cs is None else (Cs & mine)
    if not Cs:
        return None, None
    return max(Cs), variant


def pick_baseline_eval(base_evs, ev):
    same = [b for b in base_evs if b.tag == ev.tag]
    if same:
        return same
    same = [b for b in base_evs if b.L == ev.L and b.get("scaling", "none") == "none"]
    return same or base_evs


def build_rows(pairs, baseline=None, variant=None):
    """Rows: dicts with label, tag, n and the aggregated numbers."""
    evs = [ev for _, ev in pairs]
    tags = sorted({ev.tag for ev in evs})
    multi_tag = len(tags) > 1
    C, var = choose_gain(evs, variant)
    groups = {}
    for label, ev in pairs:
        groups.setdefault((label, ev.tag if multi_tag else ""), []).append(ev)
    base_evs = None
    if baseline is not None:
        labelled = [ev for label, ev in pairs if label == baseline]
        if labelled:
            base_evs = labelled
        elif os.path.exists(baseline):
            base_evs = [ev for _, ev in load_evals([baseline])]
        else:
            die("--baseline %r is neither a group label (%s) nor a path"
                % (baseline, ", ".join(sorted({l for l, _ in pairs}))))
    rows = []
    for (label, tag), g in groups.items():
        r = {"label": label, "tag": tag, "n": len(g)}
        r["cliff"] = mean_std([ev.j.get("cliff") for ev in g])
        r["in_dist"] = mean_std([ev.j.get("in_dist") for ev in g])
        r["ratio"] = mean_std([ood_ratio(ev.j) for ev in g])
        r["ood"] = mean_std([ev.j.get("ood") for ev in g])
        r["G"] = mean_std([ev.G(C, var) for ev in g]) if C else (None, None, 0)
        r["delta"] = r["penalty"] = None
        r["is_baseline"] = False
        m_in = r["in_dist"][0]
        if base_evs is not None and m_in is not None:
            b = pick_baseline_eval(base_evs, g[0])
            b_in = mean_std([e.j.get("in_dist") for e in b])[0]
            r["is_baseline"] = set(map(id, b)) >= set(map(id, g)) and label == baseline
            if b_in:
                r["delta"] = m_in - b_in
                r["penalty"] = 100.0 * r["delta"] / b_in
        elif base_evs is None:
            pens = [ev.j.get("penalty") for ev in g if ev.j.get("penalty") is not None]
            if pens and m_in is not None:
                deltas = [ev.j["in_dist"] - ev.j["in_dist"] / (1.0 + ev.j["penalty"])
                          for ev in g if ev.j.get("penalty") is not None and ev.j.get("in_dist") is not None]
                r["penalty"] = 100.0 * float(np.mean(pens))
                r["delta"] = float(np.mean(deltas)) if deltas else None
        rows.append(r)
    return rows, C, var


def ood_ratio(j):
    """OOD over in-distribution loss (the JSON's "ratio"; computed for files written before it)."""
    if j.get("ratio") is not None:
        return j["ratio"]
    ood, ind = j.get("ood"), j.get("in_dist")
    return ood / ind if ood is not None and ind else None


def f_ms(ms, digits=3):
    m, s, n = ms
    if m is None:
        return "-"
    if s is None:
        return "%.*f" % (digits, m)
    return "%.*f ± %.*f" % (digits, m, digits, s)


def f_signed(x, digits=3, suffix=""):
    return "-" if x is None else "%+.*f%s" % (digits, x, suffix)


def markdown(rows, C, var):
    gh = "G(%s), %s" % (fmt_C(C), var) if C else "G(C)"
    out = ["| method | cliff | %s | in-dist | delta | penalty | OOD/in-dist |" % gh,
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        name = r["label"] + (" [%s]" % r["tag"] if r["tag"] else "")
        if r["n"] > 1:
            name += " (%d seeds)" % r["n"]
        if r["is_baseline"]:
            name += " (baseline)"
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            name, f_ms(r["cliff"]), f_ms(r["G"]), f_ms(r["in_dist"]),
            f_signed(r["delta"]), f_signed(r["penalty"], 1, "%"), f_ms(r["ratio"])))
    return "\n".join(out)


def num(x):
    """A CSV cell: the float's repr, empty for None."""
    return "" if x is None else repr(float(x))


def to_csv(rows, C, var):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["method", "tag", "n", "cliff_mean", "cliff_std", "G_C", "G_variant", "G_mean", "G_std",
                "in_dist_mean", "in_dist_std", "delta", "penalty_pct", "ratio_mean", "ratio_std"])
    for r in rows:
        w.writerow([r["label"], r["tag"], r["n"], num(r["cliff"][0]), num(r["cliff"][1]),
                    C or "", var or "", num(r["G"][0]), num(r["G"][1]),
                    num(r["in_dist"][0]), num(r["in_dist"][1]), num(r["delta"]), num(r["penalty"]),
                    num(r["ratio"][0]), num(r["ratio"][1])])
    return buf.getvalue().rstrip("\n")


# ---- comparisons ---------------------------------------------------------------------
COMPARED = (("in-dist", "in_dist"), ("OOD", "ood"), ("cliff", "cliff"), ("G", "G"), ("OOD/in-dist", "ratio"))


def row_name(r):
    return r["label"] + (" [%s]" % r["tag"] if r["tag"] else "")


def find_row(rows, name):
    """The row named `label` or `label [tag]`; one clear error when none or several match."""
    hits = [r for r in rows if name in (r["label"], row_name(r))]
    if len(hits) == 1:
        return hits[0]
    if hits:
        die("--compare: %r names %d rows (%s): give 'label [tag]'" % (name, len(hits), ", ".join(map(row_name, hits))))
    die("--compare: no row %r (rows: %s)" % (name, ", ".join(map(row_name, rows))))


def spreads(a, b):
    """(B - A, |B - A| / the larger std) for two (mean, std, n): a row of one seed has no std
    and the other's stands for it; None when neither has one above zero."""
    d = b[0] - a[0]
    s = max((x[1] for x in (a, b) if x[1] is not None), default=0.0)
    return d, (abs(d) / s if s > 0 else None)


def comparisons(rows, pairs):
    """[(name A, name B, metric, (mean, std, n) A, (mean, std, n) B, B - A, spreads)] for
    each --compare pair and each metric both rows have."""
    out = []
    for pair in pairs:
        names = [s.strip() for s in pair.split(",")]
        if len(names) != 2 or not all(names):
            die("--compare %r: give two row names, A,B" % pair)
        ra, rb = (find_row(rows, n) for n in names)
        for metric, key in COMPARED:
            if ra[key][0] is not None and rb[key][0] is not None:
                out.append((row_name(ra), row_name(rb), metric, ra[key], rb[key]) + spreads(ra[key], rb[key]))
    return out


def f_msn(ms):
    return "%s (%d)" % (f_ms(ms), ms[2])


def compare_markdown(comps):
    out = ["| B - A | metric | A | B | difference | spreads |", "| --- | --- | --- | --- | --- | --- |"]
    for a, b, metric, ma, mb, d, k in comps:
        out.append("| %s - %s | %s | %s | %s | %+.3f | %s |" % (b, a, metric, f_msn(ma), f_msn(mb), d,
                                                               "-" if k is None else "%.1f" % k))
    return "\n".join(out)


def compare_csv(comps):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["a", "b", "metric", "a_mean", "a_std", "a_n", "b_mean", "b_std", "b_n", "diff", "spreads"])
    for a, b, metric, ma, mb, d, k in comps:
        w.writerow([a, b, metric, num(ma[0]), num(ma[1]), ma[2], num(mb[0]), num(mb[1]), mb[2], num(d), num(k)])
    return buf.getvalue().rstrip("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Markdown table (PosAug format) of evaluation runs.",
                                 epilog="See the module docstring for the exact definitions.")
    ap.add_argument("runs", nargs="+", help="run folders or evaluation JSON files (<tag>.json)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--group_by", default=None, help="regex on the run folder name; group 1 is the label")
    g.add_argument("--labels", default=None, help="comma-separated label per argument")
    ap.add_argument("--baseline", default=None, help="baseline group label, run folder or JSON")
    ap.add_argument("--tag", default=None, help="only this evaluation tag from run folders (e.g. eval_L8192)")
    ap.add_argument("--variant", choices=VARIANTS, default=None, help="G variant (default: chunked if all have it)")
    ap.add_argument("--csv", action="store_true", help="print CSV instead of markdown")
    ap.add_argument("--compare", action="append", default=[], metavar="A,B",
                    help="row B against row A: difference and |B - A| / max(std_A, std_B) per metric (repeatable)")
    args = ap.parse_args(argv)
    missing.check()
    evals = load_evals(args.runs, args.tag)
    pairs = assign_labels(evals, args.labels, args.group_by, len(args.runs))
    rows, C, var = build_rows(pairs, args.baseline, args.variant)
    comps = comparisons(rows, args.compare)
    if args.csv:
        print(compare_csv(comps) if args.compare else to_csv(rows, C, var))
    else:
        print(markdown(rows, C, var) + ("\n\n" + compare_markdown(comps) if args.compare else ""))


if __name__ == "__main__":
    main()
