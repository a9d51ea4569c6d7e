"""Plot per-position loss curves of evaluation runs (PNG), optionally with context gain G(C).

    python dev/plot_eval.py runs/tiny_rope runs/tiny_posaug --out cliff.png
    python dev/plot_eval.py runs/a/eval_L8192.json runs/b/eval_L8192.json --labels rope,posaug \\
        --smooth 64 --gain --out gain.png
    python dev/plot_eval.py runs/tiny_rope --tag eval_L1024_yarn --out yarn.png

Each argument is a run folder (every evaluation in it, whatever its tag, or only `--tag TAG`) or one
evaluation JSON; the per-position losses come from the CSV next to it.
Top panel: loss(i) against position i, raw (faint) and a centred moving average over
--smooth positions (0 or 1: no smoothing); the training window w is a dashed vertical
line and the region past it (out of distribution) is shaded; the average does not
cross w, so the cliff stays sharp; each legend entry gives
the run's cliff (OOD - in-dist, from its JSON).
--gain adds a second panel: G(C) = mean over W <= i < C of loss_variant(i) - loss(i) for
C on a grid of --points lengths from W+1 to L_eval, for every variant the CSV has
(`loss_chunked`: the paper's KV-cache approximation; `loss_banded`: exact sliding
window); W is the JSON's `gain.window` (or --window). The JSON's own G values, where
present, are drawn as markers on the same curves. G > 0: the full context helps.
Needs matplotlib (pip install matplotlib).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    from eval_table import assign_labels, die, gain_from_columns, load_evals  # noqa: E402

VARIANT_NAMES = {"chunked": "chunked (KV-cache approx.)", "banded": "banded (exact window)"}


def smooth_split(y, k, w):
    """Moving average within [0, w) and [w, L) separately, so the cliff at w stays sharp."""
    if not w or w >= len(y):
        return smooth(y, k)
    return np.concatenate([smooth(y[:w], k), smooth(y[w:], k)])


def smooth(y, k):
    """Centred moving average over k points; near the ends the window shrinks."""
    k = int(k)
    if k <= 1 or len(y) == 0:
        return y
    c = np.concatenate([[0.0], np.cumsum(y, dtype=np.float64)])
    i = np.arange(len(y))
    lo = np.clip(i - k // 2, 0, len(y))
    hi = np.clip(i - k // 2 + k, 0, len(y))
    return (c[hi] - c[lo]) / (hi - lo)


def gain_grid(W, L, points):
    return np.unique(np.linspace(W + 1, L, points).round().astype(int))


def main(argv=None):
    ap = argparse.ArgumentParser(description="Plot per-position loss (and G(C)) of evaluation runs.")
    ap.add_argument("runs", nargs="+", help="run folders or evaluation JSON files (<tag>.json)")
    ap.add_argument("--out", required=True, help="output PNG")
    ap.add_argument("--smooth", type=int, default=32, help="moving-average width in positions (default 32)")
    ap.add_argument("--labels", default=None, help="comma-separated label per argument")
    ap.add_argument("--tag", default=None, help="only this evaluation tag from run folders")
    ap.add_argument("--gain", action="store_true", help="add a G(C) panel")
    ap.add_argument("--window", type=int, default=None, help="W for G(C) when the JSON has no gain.window")
    ap.add_argument("--points", type=int, default=16, help="number of C values for G(C) (default 16)")
    ap.add_argument("--title", default=None)
    args = ap.parse_args(argv)
    missing.check()
    for name, value, least in (("--smooth", args.smooth, 0), ("--points", args.points, 1), ("--window", args.window, 0)):
        if value is not None and value < least:
            die("%s must be >= %d, got %d" % (name, least, value))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        needs.missing(e)
    # --out before any work: a format matplotlib writes, not a folder
    formats = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    ext = os.path.splitext(args.out)[1].lstrip(".").lower()
    if ext not in formats:
        die("--out %s: give a file ending in one of %s" % (args.out, ", ".join("." + f for f in sorted(formats))))
    if os.path.isdir(args.out):
        die("--out %s is a folder: name the image file" % args.out)

    pairs = assign_labels(load_evals(args.runs, args.tag), args.labels, None, len(args.runs))
    multi_tag = len({ev.tag for _, ev in pairs}) > 1
    if args.gain:
        fig, (ax, axg) = plt.subplots(2, 1, figsize=(10, 8.5), gridspec_kw={"height_ratios": [3, 2]})
    else:
        fig, ax = plt.subplots(figsize=(10, 5.5))
        axg = None
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if len(pairs) > len(colors):  # more curves than the cycle's colors: one colour each from a wider map
        colors = [plt.get_cmap("tab20")(i % 20) for i in range(len(pairs))]
    windows, Lmax, n_gain = set(), 0, 0
    for k, (label, ev) in enumerate(pairs):
        cols = ev.cols
        if "loss" not in cols:
            die("%s: no `loss` column (is the CSV missing?)" % ev.csv_path)
        loss = cols["loss"]
        pos = cols.get("position", np.arange(len(loss)))
        color = colors[k % len(colors)]
        name = label + (" [%s]" % ev.tag if multi_tag else "")
        cliff = ev.j.get("cliff")
        ax.plot(pos, loss, color=color, alpha=0.18, linewidth=0.6)
        ax.plot(pos, smooth_split(loss, args.smooth, int(ev.window or 0)), color=color, linewidth=1.6,
                label="%s: cliff %s" % (name, "%.3f" % cliff if cliff is not None else "n/a"))
        if ev.window:
            windows.add(int(ev.window))
        Lmax = max(Lmax, len(loss))
        if axg is not None:
            W = ev.gain_window(args.window)
            variants = [(v, ls) for v, ls in (("chunked", "-"), ("banded", "--")) if ev.has_column(v)]
            if variants and W is None:
                print("warning: %s: no gain.window in the JSON; pass --window" % ev.json_path)
                variants = []
            for v, ls in variants:
                Cs = gain_grid(int(W), len(loss), args.points)
                G = [gain_from_columns(loss, cols["loss_" + v], int(W), C) for C in Cs]
                axg.plot(Cs, G, ls, color=color, marker=".", label="%s, %s" % (name, VARIANT_NAMES[v]))
                lens = ev.gain_lengths(v)
                if lens:
                    axg.plot(lens, ev.j["gain"][v], "o", color=color, markerfacecolor="none", markersize=7)
                n_gain += 1
    for w in sorted(windows):
        ax.axvline(w, color="black", linestyle="--", linewidth=1)
        ax.axvspan(w, Lmax, color="grey", alpha=0.08, linewidth=0)
        ax.text(w, 0.98, "  training window w = %d" % w, transform=ax.get_xaxis_transform(),
                va="top", ha="left", fontsize=8)
    if windows:
        ax.text(0.99, 0.02, "shaded: out of distribution (position >= w)", transform=ax.transAxes,
                ha="right", va="bottom", fontsize=8, color="dimgrey")
    ax.set_xlim(0, Lmax)
    ax.set_xlabel("position")
    ax.set_ylabel("loss (nats/token)")
    ns = sorted({ev.j.get("n_sequences") for _, ev in pairs if ev.j.get("n_sequences")})
    title = args.title or ("Loss per position (mean over %s sequences%s)"
                           % ("/".join(map(str, ns)) or "?",
                              ", moving average over %d positions" % args.smooth if args.smooth > 1 else ""))
    ax.set_title(title)
    ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    if axg is not None:
        axg.axhline(0, color="black", linewidth=0.8)
        axg.set_xlabel("context length C (tokens)")
        axg.set_ylabel("G(C) (nats/token)")
        axg.set_title("Context gain G(C) = mean over W <= i < C of loss_W(i) - loss_full(i)  (> 0: long context helps)",
                      fontsize=9)
        axg.set_xlim(0, Lmax)
        axg.grid(alpha=0.3)
        if n_gain:
            if any(ev.gain_lengths(v) for _, ev in pairs for v in ("chunked", "banded")):
                axg.plot([], [], "o", color="grey", markerfacecolor="none", label="open circles: G from the eval JSON")
            axg.legend(fontsize=8, loc="best")
        else:
            axg.text(0.5, 0.5, "no loss_chunked / loss_banded columns in these CSVs",
                     transform=axg.transAxes, ha="center", va="center")
            print("warning: --gain: no loss_chunked / loss_banded columns in these CSVs")
    fig.tight_layout()
    out_dir = os.path.dirname(os.path.abspath(args.out))  # made only now: no refusal leaves a folder behind
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        die("--out %s: cannot make its folder %s: %s" % (args.out, out_dir, e.strerror or e))
    try:
        fig.savefig(args.out, dpi=120)
    except OSError as e:
        die("--out %s: cannot write it: %s" % (args.out, e.strerror or e))
    plt.close(fig)
    print("wrote %s (%d curves%s)" % (args.out, len(pairs), ", %d gain curves" % n_gain if args.gain else ""))


if __name__ == "__main__":
    main()
