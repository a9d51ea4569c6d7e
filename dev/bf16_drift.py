"""How far PyTorch's own bf16 training lands from a float64 reference file: the measured
basis of test_gpt.c's bf16 tolerances (TOL_BF16).

    python dev/bf16_drift.py                       # every dev/reference_*.bin but the GRU's
    python dev/bf16_drift.py dev/reference_tiny.bin --dtype fp32
    python dev/bf16_drift.py CASE --against DUMP   # a case file (test_gpt's) against a trainer's dump

Replays a reference file (dev/pytorch_reference.py: the same config, tokens, initial
weights and alphas) with float32 master weights, gradients and AdamW, the forward and the
loss under torch.autocast(bfloat16) on the CPU (as ./train_gpt keeps weights in fp32 and
activations in bf16; --dtype fp32 for plain float32), and prints, per file, the
norm-relative error ||got - ref|| / ||ref|| of each quantity test_gpt.c compares: logits,
loss, each grad.<name> (worst), the 10 losses, the grad norms, the weights after the steps
(worst, named). The error is test_gpt.c's rel_err. With --against, the file is a case file
(the input part: config, tokens, initial weights, alphas; test_gpt writes them) and the
outputs to compare with come from DUMP, the CPU trainer's `--dump_case` of it.
"""

import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import torch
    import tensorfile  # noqa: E402
    from model_torch import POS_KINDS, Config, LlamaRoPE, OptConfig, make_optimizer, train_step  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def rel_err(got, ref):
    got, ref = np.asarray(got, np.float64).ravel(), np.asarray(ref, np.float64).ravel()
    return float(np.linalg.norm(got - ref) / (np.linalg.norm(ref) + 1e-30))


def replay(path, dtype, against=None):
    r = dict(tensorfile.read(path))
    if "pos_scheme" in r:
        sys.exit(f"bf16_drift: {path} takes its positions from a schedule, which this replay does not follow")
    if against:
        r.update(tensorfile.read(against))
    V, _, C, L, NH, NKV, F_, T, B, micro, steps, warmup = (int(x) for x in r["config_i"])
    rope_base, rms_eps, lr_max, min_lr, wd, b1, b2, eps, clip, check_alpha = (float(x) for x in r["config_f"])
    kind = {v: k for k, v in POS_KINDS.items()}[int(r["pos_kind"][0])] if "pos_kind" in r else "rope"
    qk_norm = "qk_norm" in r and int(r["qk_norm"][0]) != 0
    cfg = Config(V=V, C=C, L=L, NH=NH, NKV=NKV, F=F_, T=T, rope_base=rope_base, rms_eps=rms_eps)
    oc = OptConfig(lr_max=lr_max, min_lr=min_lr, warmup=warmup, steps=steps, weight_decay=wd,
                   beta1=b1, beta2=b2, eps=eps, grad_clip=clip)
    model = LlamaRoPE(cfg, attn="math", pos_kind=kind, qk_norm=qk_norm)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(torch.from_numpy(np.array(r[n], dtype=np.float32)))
    tokens = torch.from_numpy(np.array(r["tokens"], dtype=np.int64))
    alphas = [float(a) for a in r["alphas"]]

    def ctx():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16")

    # the check pass: one micro-batch at check_alpha, gradients of its loss
    inp, tgt = tokens[0, 0, :, :-1], tokens[0, 0, :, 1:]
    with ctx():
        logits, loss = model(inp, tgt, alpha=check_alpha)
    loss.backward()
    errs = {"logits": rel_err(logits[..., :V].float().detach(), r["logits"]),
            "loss": rel_err([loss.item()], r["loss"])}
    g = {n: rel_err(p.grad, r["grad." + n]) for n, p in model.named_parameters()}
    worst = max(g, key=g.get)
    errs["grads (worst)"] = (g[worst], worst)
    model.zero_grad(set_to_none=True)

    opt = make_optimizer(model, oc)
    losses, norms = [], []
    for s in range(steps):
        mbs = [(tokens[s, m, :, :-1], tokens[s, m, :, 1:]) for m in range(micro)]
        with ctx():
            lo, gn, _ = train_step(model, opt, oc, s, mbs, alphas[s])
        losses.append(lo)
        norms.append(gn)
    errs["losses"] = rel_err(losses, r["losses"])
    errs["grad norms"] = rel_err(norms, r["grad_norms"])
    w = {n: rel_err(p.detach(), r["final." + n]) for n, p in model.named_parameters()}
    worst = max(w, key=w.get)
    errs["weights (worst)"] = (w[worst], worst)
    return kind + (" + QK-norm" if qk_norm else ""), errs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="reference files (default: every dev/reference_*.bin but the GRU's)")
    ap.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    ap.add_argument("--against", default=None, help="a --dump_case output: FILE is then its case file (one FILE)")
    args = ap.parse_args()
    if args.against and len(args.files) != 1:
        ap.error("--against compares one case file with one dump")
    missing.check()
    files = args.files or sorted(f for f in glob.glob(os.path.join(HERE, "reference_*.bin")) if "gru" not in f)
    torch.manual_seed(0)
    for path in files:
        if not os.path.isfile(path):
            sys.exit(f"bf16_drift: no such reference file: {path}")
        kind, errs = replay(path, args.dtype, args.against)
        cells = []
        for k, v in errs.items():
            cells.append(f"{k} {v[0]:.2e} ({v[1]})" if isinstance(v, tuple) else f"{k} {v:.2e}")
        print(f"{os.path.basename(path)} [{kind}, {args.dtype}]: " + ", ".join(cells))


if __name__ == "__main__":
    main()
