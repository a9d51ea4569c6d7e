"""Write the PyTorch reference file that test_gpt.c compares the C trainer against.

    python dev/pytorch_reference.py                # writes dev/reference_tiny.bin
    python dev/pytorch_reference.py --out FILE

Independent of the C code: forward from the model definition (dev/model_torch.py),
gradients by autograd, optimizer = torch.optim.AdamW. Everything is computed in
float64 from float32-representable initial weights; stored values are float32.

Contents (in order; format in dev/tensorfile.py, kind 1):
    config_i    int32   [V, Vp, C, L, NH, NKV, F, T, B, micro, steps, warmup]
    config_f    float32 [rope_base, rms_eps, lr_max, min_lr, weight_decay,
                         beta1, beta2, adam_eps, grad_clip, check_alpha]
    alphas      float32 (steps)                 one alpha per optimizer step
    tokens      int32   (steps, micro, B, T+1)  inputs [..., :T], targets [..., 1:]
    <name>      float32 initial parameters (wte, attn_norm, ..., final_norm; stacked)
    logits      float32 (B, T, V)   check pass: tokens[0,0], alpha = check_alpha
    loss        float32 (1)         its mean cross-entropy
    grad.<name> float32             gradient of that loss (no accumulation scaling)
    losses      float32 (steps)     10-step training from the initial parameters:
    grad_norms  float32 (steps)     mean micro-batch loss, global grad norm before clip
    final.<name> float32            parameters after the last step
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensorfile  # noqa: E402
from model_torch import (Config, OptConfig, LlamaRoPE, PARAM_NAMES,  # noqa: E402
                         make_optimizer, train_step)

ALPHAS = [1.0, 8.0, 0.125, 2.5, 8.0, 0.5, 1.0, 4.0, 0.25, 8.0]


def f32(t):
    return t.detach().to(torch.float32).cpu().numpy()


def fd_check(model, inp, tgt, alpha, gen, n_per_param=4, h=1e-4):
    """Five-point central finite differences (error O(h^4)) vs autograd, float64.

    Checks a few random entries of several parameters and one random direction
    over all parameters. Returns the max relative error.
    """
    model.zero_grad(set_to_none=True)
    _, loss = model(inp, tgt, alpha=alpha)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}

    def L():
        with torch.no_grad():
            return float(model(inp, tgt, alpha=alpha)[1])

    worst = 0.0
    rows = []
    params = dict(model.named_parameters())
    for name in ["wte", "wq", "wk", "wv", "wo", "w_gate", "w_down", "attn_norm", "final_norm"]:
        p = params[name]
        flat = p.data.view(-1)
        g = grads[name].view(-1)
        # sample entries with non-negligible gradient so relative error is meaningful
        cand = torch.nonzero(g.abs() > 1e-3 * g.abs().max()).view(-1)
        pick = cand[torch.randperm(len(cand), generator=gen)[:n_per_param]]
        for i in pick.tolist():
            old = flat[i].item()
            vals = []
            for k in (2, 1, -1, -2):
                flat[i] = old + k * h
                vals.append(L())
            flat[i] = old
            num = (-vals[0] + 8 * vals[1] - 8 * vals[2] + vals[3]) / (12 * h)
            rel = abs(num - g[i].item()) / max(abs(num), abs(g[i].item()), 1e-12)
            worst = max(worst, rel)
            rows.append((name, i, g[i].item(), num, rel))
    # directional derivative over all parameters at once
    dirs = {n: torch.randn(p.shape, generator=gen, dtype=p.dtype) for n, p in params.items()}
    dnorm = sum(float((d * d).sum()) for d in dirs.values()) ** 0.5
    analytic = sum(float((grads[n] * d).sum()) for n, d in dirs.items()) / dnorm
    base = {n: p.detach().clone() for n, p in params.items()}
    vals = []
    with torch.no_grad():
        for k in (2, 1, -1, -2):
            for n, p in params.items():
                p.copy_(base[n] + dirs[n] * (k * h / dnorm))
            vals.append(L())
        for n, p in params.items():
            p.copy_(base[n])
    num = (-vals[0] + 8 * vals[1] - 8 * vals[2] + vals[3]) / (12 * h)
    rel_dir = abs(num - analytic) / max(abs(num), abs(analytic))
    worst = max(worst, rel_dir)
    model.zero_grad(set_to_none=True)
    return worst, rows, (analytic, num, rel_dir)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "reference_tiny.bin"))
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--check_alpha", type=float, default=8.0)
    ap.add_argument("--angles_fp32", action="store_true",
                    help="form RoPE angles in fp32 like the C kernels (default: exact float64)")
    ap.add_argument("--no_fd", action="store_true", help="skip the finite-difference self-check")
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    cfg = Config(V=257, C=64, L=2, NH=4, NKV=2, F=128, T=32)
    B, micro = 2, 2
    oc = OptConfig(lr_max=3e-3, min_lr=3e-4, warmup=3, steps=10, weight_decay=0.1,
                   beta1=0.9, beta2=0.95, eps=1e-8, grad_clip=1.0)
    assert len(ALPHAS) == oc.steps

    gen = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, cfg.V, (oc.steps, micro, B, cfg.T + 1), generator=gen,
                           dtype=torch.int64)
    model = LlamaRoPE(cfg, attn="math", angles_fp32=args.angles_fp32)
    model.init_weights(gen)           # float32 draws
    model.to(torch.float64)
    init = {n: f32(p) for n, p in model.named_parameters()}
    for n, p in model.named_parameters():  # stored values are exactly the computed-from values
        assert np.array_equal(p.detach().numpy(), init[n].astype(np.float64)), n

    out = []
    out.append(("config_i", np.array([cfg.V, cfg.Vp, cfg.C, cfg.L, cfg.NH, cfg.NKV, cfg.F,
                                      cfg.T, B, micro, oc.steps, oc.warmup], dtype=np.int32)))
    out.append(("config_f", np.array([cfg.rope_base, cfg.rms_eps, oc.lr_max, oc.min_lr,
                                      oc.weight_decay, oc.beta1, oc.beta2, oc.eps,
                                      oc.grad_clip, args.check_alpha], dtype=np.float32)))
    out.append(("alphas", np.array(ALPHAS, dtype=np.float32)))
    out.append(("tokens", tokens.numpy().astype(np.int32)))
    for n in PARAM_NAMES:
        out.append((n, init[n]))

    # ---- check pass: one micro-batch, alpha = check_alpha
    inp, tgt = tokens[0, 0, :, :-1], tokens[0, 0, :, 1:]
    if not args.no_fd:
        worst, rows, (an, nu, rd) = fd_check(model, inp, tgt, args.check_alpha,
                                             torch.Generator().manual_seed(args.seed + 1))
        print(f"finite differences (float64, 5-point central, h=1e-4): {len(rows)} entries over "
              f"{len(set(r[0] for r in rows))} tensors + 1 random direction over all params")
        for name in dict.fromkeys(r[0] for r in rows):
            m = max(r[4] for r in rows if r[0] == name)
            print(f"  {name:11s} max rel err {m:.2e}")
        print(f"  direction   autograd {an:.10e} numeric {nu:.10e} rel err {rd:.2e}")
        print(f"  max relative error {worst:.2e}")
        if worst > 1e-5:
            print("FAIL: finite-difference check")
            sys.exit(1)

    model.zero_grad(set_to_none=True)
    logits, loss = model(inp, tgt, alpha=args.check_alpha)
    loss.backward()
    out.append(("logits", f32(logits[..., :cfg.V])))
    out.append(("loss", np.array([loss.item()], dtype=np.float32)))
    for n, p in model.named_parameters():
        out.append(("grad." + n, f32(p.grad)))
    check_loss = loss.item()
    gnorm_check = float(torch.sqrt(sum((p.grad.double() ** 2).sum()
                                       for p in model.parameters())))
    model.zero_grad(set_to_none=True)

    # ---- training: steps optimizer steps from the initial parameters
    opt = make_optimizer(model, oc)
    losses, norms, lrs = [], [], []
    for s in range(oc.steps):
        mbs = [(tokens[s, m, :, :-1], tokens[s, m, :, 1:]) for m in range(micro)]
        l, g, lr = train_step(model, opt, oc, s, mbs, ALPHAS[s])
        losses.append(l)
        norms.append(g)
        lrs.append(lr)
    out.append(("losses", np.array(losses, dtype=np.float32)))
    out.append(("grad_norms", np.array(norms, dtype=np.float32)))
    for n, p in model.named_parameters():
        out.append(("final." + n, f32(p)))
    # padded wte rows never move (zero init, zero grad)
    assert not model.wte.detach()[cfg.V:].abs().any()

    tensorfile.write(args.out, tensorfile.KIND_REFERENCE, out)
    back = tensorfile.read(args.out)
    assert list(back) == [n for n, _ in out]
    for n, a in out:
        assert back[n].dtype == a.dtype and np.array_equal(back[n], a), n

    size = os.path.getsize(args.out)
    print(f"wrote {args.out} ({size} bytes, {len(out)} tensors)")
    print("regenerate: python dev/pytorch_reference.py"
          + ("" if args.out == ap.get_default("out") else f" --out {args.out}")
          + (" --angles_fp32" if args.angles_fp32 else "")
          + (f" --seed {args.seed}" if args.seed != 1337 else ""))
    print(f"torch {torch.__version__}, seed {args.seed}, angles "
          f"{'fp32' if args.angles_fp32 else 'float64'}")
    print(f"check pass (alpha={args.check_alpha}): loss {check_loss:.9f}  "
          f"grad norm {gnorm_check:.9f}  (ln V = {np.log(cfg.V):.6f})")
    print("step  alpha   lr          loss         grad_norm")
    for s in range(oc.steps):
        print(f"{s:4d}  {ALPHAS[s]:6.3f}  {lrs[s]:.4e}  {losses[s]:.9f}  {norms[s]:.9f}")


if __name__ == "__main__":
    main()
