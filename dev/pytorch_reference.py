"""Write the PyTorch reference file that test_gpt.c compares the C trainer against.

    python dev/pytorch_reference.py                # writes dev/reference_tiny.bin
    python dev/pytorch_reference.py --pos_kind nope   # writes dev/reference_nope.bin
    python dev/pytorch_reference.py --pos_kind alibi  # writes dev/reference_alibi.bin
    python dev/pytorch_reference.py --pos_kind sinusoidal  # dev/reference_sinusoidal.bin
    python dev/pytorch_reference.py --pos_kind learned     # dev/reference_learned.bin
    python dev/pytorch_reference.py --pos_kind erpe        # dev/reference_erpe.bin (and every other encoding)
    python dev/pytorch_reference.py --qk_norm              # dev/reference_qknorm.bin
    python dev/pytorch_reference.py --all                  # every one of them (make reference)
    python dev/pytorch_reference.py --out FILE

`make reference` sets up PyTorch (a CPU wheel) in .venv-bench once and runs --all.

Independent of the C code: forward from the model definition (dev/model_torch.py),
gradients by autograd, optimizer = torch.optim.AdamW. Everything is computed in
float64 from float32-representable initial weights; stored values are float32.

--pos_kind (dev/model_torch.py's ENCODINGS, one entry per encoding: its file is
dev/reference_<kind>.bin, '-' written '_', and it starts from its entry's `reference`
values): rope (default; RoPE positions alpha*t),
nope (no rotation, the causal mask only), alibi (no rotation; the scaled attention
logits get -m_h * alpha * (i - j), standard slopes over the query heads), sinusoidal
(no rotation; the embedding gets PE(alpha*t), sin/cos interleaved, angles formed in
float32 like the C code) or learned (no rotation; the embedding gets the trained
table wpe (T, C), an extra parameter), erpe and t5 (no rotation; the scaled logits get
a learned bias per layer, head and bucket of floor(alpha * (i - j)): clipped at T - 1,
or T5's 32 log-spaced buckets; the extra parameter attn_bias (L, NH, NB)) or tape
(sinusoidal with f_k times C / T) or shaw (no rotation; the logits get q_i . r_l[min(floor(
alpha * (i - j)), 16)] / sqrt(hd), the extra parameter rel_key (L, 17, hd), drawn N(0, 0.02)
in the model's init, keys only) or tpe (no rotation; the logits get q_i . r_l(ln(1 + alpha *
(i - j))) / sqrt(hd), r_l = tpe_w2 tanh(tpe_w1 u + tpe_b1), the extra parameters tpe_w1,
tpe_b1 (L, 32) drawn N(0, 1) and tpe_w2 (L, hd, 32) drawn last as 0.2 N(0, 1), keys of order 1,
not the init's 0.02, whose first AdamW steps bf16 flips) or tupe (TUPE-R: no rotation;
the logits are (q_i . k_j + (p_i U^Q + b^Q) . (p_j U^K)) / sqrt(2 hd) plus T5's bias,
p = LayerNorm(wpe); wpe (T, C), tupe_uq and tupe_uk (NH*hd, C), drawn last as N(0, 1) and
N(0, 1/C) (an untied term of order 1, not the model's ~1e-5 at init), then the LayerNorm's
gain 1 + 0.1 N(0, 1) and bias 0.1 N(0, 1) (tupe_ln_w, tupe_ln_b (C)) and the query
projection's bias 0.5 N(0, 1) (tupe_bq (NH*hd)); attn_bias (1, NH, 32), one table for every
layer, 0.5 N(0, 1); alphas ignored) or any later entry of ENCODINGS (model_torch's
docstring describes each). --qk_norm (any kind; its file uses rope): q and
k RMS-normalized over each token's whole NH*hd / NKV*hd vector before RoPE, with the
gains q_norm (L, NH*hd) and k_norm (L, NKV*hd).
The files share the config, seed, tokens, initial parameters and alphas: the check
pass uses check_alpha (8) and the 10 steps the file's alphas, so the ALiBi file tests
ALiBi+PosAug (the distance times alpha; plain ALiBi is alpha = 1) and the sinusoidal
file sinusoidal APE+PosAug. The learned-APE file keeps the same alphas and
check_alpha, which its model ignores. The extra parameters are drawn after all the
others from the same generator, so the shared ones have the same initial values: wpe
N(0, 0.02) like wte; q_norm, k_norm 1 + 0.1 N(0, 1) (not the model's init of 1, so
that a kernel forgetting a gain in its backward fails the check pass); attn_bias
0.5 N(0, 1) (not the model's zeros, so that the check pass reads the table). With alibi
the script first checks alibi_slopes() against the published recursive get_slopes.

Contents (in order; format in dev/tensorfile.py, kind 1):
    config_i    int32   [V, Vp, C, L, NH, NKV, F, T, B, micro, steps, warmup]
    config_f    float32 [rope_base, rms_eps, lr_max, min_lr, weight_decay,
                         beta1, beta2, adam_eps, grad_clip, check_alpha]
    pos_kind    int32   [k]  0 rope, 1 nope, 2 alibi, 3 sinusoidal, 4 learned, 5 erpe,
                             6 t5, 7 tape, 8 shaw, 9 tpe, 10 tupe, ... (ENCODINGS' order, the
                             trainer's PE_* order); not in
                             the rope files (reference_tiny.bin, reference_qknorm.bin)
    qk_norm     int32   [1]  1; only in the QK-norm file
    alphas      float32 (steps)                 one alpha per optimizer step
    tokens      int32   (steps, micro, B, T+1)  inputs [..., :T], targets [..., 1:]
    <name>      float32 initial parameters (wte, attn_norm, ..., final_norm; stacked),
                        then those present of wpe, q_norm, k_norm, attn_bias, rel_key,
                        tpe_w1, tpe_b1, tpe_w2, tupe_uq, tupe_uk, tupe_ln_w, tupe_ln_b,
                        tupe_bq
    logits      float32 (B, T, V)   check pass: tokens[0,0], alpha = check_alpha
    loss        float32 (1)         its mean cross-entropy
    grad.<name> float32             gradient of that loss (no accumulation scaling)
    losses      float32 (steps)     10-step training from the initial parameters:
    grad_norms  float32 (steps)     mean micro-batch loss, global grad norm before clip
    final.<name> float32            parameters after the last step
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import torch
    import tensorfile  # noqa: E402
    from model_torch import (Config, OptConfig, LlamaRoPE, EXTRA_NAMES, ENCODINGS,  # noqa: E402
                             POS_KINDS, alibi_slopes, make_optimizer, train_step)

ALPHAS = [1.0, 8.0, 0.125, 2.5, 8.0, 0.5, 1.0, 4.0, 0.25, 8.0]


def f32(t):
    return t.detach().to(torch.float32).cpu().numpy()


def default_out(kind, qk_norm):
    """dev/reference_<kind>.bin (reference_tiny.bin for rope, reference_qknorm.bin with --qk_norm)"""
    return "reference_qknorm.bin" if qk_norm else "reference_tiny.bin" if kind == "rope" else \
        "reference_%s.bin" % kind.replace("-", "_")


def published_get_slopes(n):
    """The ALiBi authors' recursive algorithm (Press et al., attention_with_linear_biases;
    also Hugging Face's BLOOM build_alibi_tensor), written out independently of
    model_torch.alibi_slopes: a geometric sequence starting at and with ratio
    2^(-2^-(log2(n) - 3)) for a power of two; otherwise the sequence of the closest lower
    power of two followed by the even-indexed entries of the sequence for twice that."""
    def power_of_2(m):
        start = 2.0 ** (-(2.0 ** -(math.log2(m) - 3)))
        return [start * start ** i for i in range(m)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + published_get_slopes(2 * c)[0::2][:n - c]


def check_slopes(verbose=True):
    """alibi_slopes(n) == the published get_slopes(n) for n = 1..64 (to 1e-13 relative:
    the recursive form multiplies floats, ours takes exact powers of two), and the
    explicit n = 6 case. Exits on a mismatch."""
    want6 = [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3]
    got6 = alibi_slopes(6)
    worst = 0.0
    for n in range(1, 65):
        a, b = alibi_slopes(n), published_get_slopes(n)
        assert len(a) == len(b) == n
        worst = max(worst, max(abs(x - y) / y for x, y in zip(a, b)))
    ok = got6 == want6 and worst < 1e-13
    if verbose:
        print("ALiBi slopes, n = 6: " + ", ".join("2^%d" % round(math.log2(m)) for m in got6)
              + "  (expected 2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3: %s)" % ("ok" if got6 == want6 else "MISMATCH"))
        print("ALiBi slopes, n = 4 (this file's NH): "
              + ", ".join("2^%d" % round(math.log2(m)) for m in alibi_slopes(4)))
        print("ALiBi slopes vs the published recursive get_slopes, n = 1..64: max rel diff %.1e (%s)"
              % (worst, "ok" if worst < 1e-13 else "MISMATCH"))
    if not ok:
        print("FAIL: ALiBi slopes")
        sys.exit(1)


def fd_check(model, inp, tgt, alpha, gen, n_per_param=4, h=1e-3):
    """Five-point central finite differences (error O(h^4)) vs autograd, float64.

    Checks a few random entries of several parameters (those present of wpe,
    q_norm, k_norm included) and one random direction over all parameters.
    Returns the max relative error.
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
    for name in ["wte", "wq", "wk", "wv", "wo", "w_gate", "w_down", "attn_norm", "final_norm"
                 ] + [n for n in EXTRA_NAMES if n in params]:
        p = params[name]
        flat = p.data.view(-1)
        g = grads[name].view(-1)
        # sample entries within a decade of the tensor's largest gradient: the float64
        # roundoff of the loss differences (~1e-15 / h) must stay far below |g|. With
        # sinusoidal APE the O(1) PE dominates the residual stream and the wq, wk
        # gradients are only ~1e-6 (h 1e-3 rather than 1e-4 for the same reason)
        cand = torch.nonzero(g.abs() > 0.1 * g.abs().max()).view(-1)
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
    ap.add_argument("--pos_kind", choices=None if missing.error else list(POS_KINDS), default="rope",
                    help="rope (default, dev/reference_tiny.bin) or another of model_torch's ENCODINGS "
                         "(dev/reference_<kind>.bin)")
    ap.add_argument("--all", action="store_true",
                    help="every file: each encoding's, and --qk_norm's (make reference)")
    ap.add_argument("--qk_norm", action="store_true",
                    help="QK-norm (dev/reference_qknorm.bin with rope)")
    ap.add_argument("--out", default=None,
                    help="output file (default: by --pos_kind and --qk_norm)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--check_alpha", type=float, default=8.0)
    ap.add_argument("--angles_fp32", action="store_true",
                    help="form RoPE angles in fp32 like the C kernels (default: exact float64)")
    ap.add_argument("--no_fd", action="store_true", help="skip the finite-difference self-check")
    args = ap.parse_args()
    missing.check()
    if args.all:
        if args.out or args.qk_norm or args.pos_kind != "rope":
            ap.error("--all writes every default file: give no --out, --qk_norm or --pos_kind with it")
        for kind, qk in [(k, False) for k in POS_KINDS] + [("rope", True)]:
            print(f"==== {default_out(kind, qk)}", flush=True)
            write_reference(argparse.Namespace(**dict(vars(args), pos_kind=kind, qk_norm=qk,
                                                      out=os.path.join(here, default_out(kind, qk)))), here)
        return
    write_reference(args, here)


def write_reference(args, here):
    """one reference file, as args say (main's flags)"""
    default_path = os.path.join(here, default_out(args.pos_kind, args.qk_norm))
    if args.qk_norm and args.pos_kind != "rope" and args.out is None:
        sys.exit("--qk_norm with a pos_kind other than rope: give --out")
    if args.out is None:
        args.out = default_path
    check_slopes(verbose=False)

    torch.use_deterministic_algorithms(True)
    cfg = Config(V=257, C=64, L=2, NH=4, NKV=2, F=128, T=32)
    B, micro = 2, 2
    oc = OptConfig(lr_max=3e-3, min_lr=3e-4, warmup=3, steps=10, weight_decay=0.1,
                   beta1=0.9, beta2=0.95, eps=1e-8, grad_clip=1.0)
    assert len(ALPHAS) == oc.steps

    gen = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, cfg.V, (oc.steps, micro, B, cfg.T + 1), generator=gen,
                           dtype=torch.int64)
    model = LlamaRoPE(cfg, attn="math", angles_fp32=args.angles_fp32, pos_kind=args.pos_kind,
                      qk_norm=args.qk_norm)
    model.init_weights(gen)           # float32 draws
    if args.qk_norm:                  # gains away from 1, drawn after everything else
        with torch.no_grad():
            for p in (model.q_norm, model.k_norm):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float32))
    if ENCODINGS[args.pos_kind].reference:  # the encoding's values away from the init, drawn after everything else
        with torch.no_grad():
            ENCODINGS[args.pos_kind].reference(model, gen)
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
    if args.pos_kind != "rope":  # the rope file stays as it always was (no pos_kind: rope)
        out.append(("pos_kind", np.array([POS_KINDS[args.pos_kind]], dtype=np.int32)))
    if args.qk_norm:
        out.append(("qk_norm", np.array([1], dtype=np.int32)))
    out.append(("alphas", np.array(ALPHAS, dtype=np.float32)))
    out.append(("tokens", tokens.numpy().astype(np.int32)))
    out.extend(init.items())          # PARAM_NAMES, then the present EXTRA_NAMES

    # ---- check pass: one micro-batch, alpha = check_alpha
    inp, tgt = tokens[0, 0, :, :-1], tokens[0, 0, :, 1:]
    if not args.no_fd:
        h = ENCODINGS[args.pos_kind].fd_step
        worst, rows, (an, nu, rd) = fd_check(model, inp, tgt, args.check_alpha,
                                             torch.Generator().manual_seed(args.seed + 1), h=h)
        print(f"finite differences (float64, 5-point central, h={h:g}): {len(rows)} entries over "
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
          + ("" if args.pos_kind == "rope" else f" --pos_kind {args.pos_kind}")
          + (" --qk_norm" if args.qk_norm else "")
          + ("" if args.out == default_path else f" --out {args.out}")
          + (" --angles_fp32" if args.angles_fp32 else "")
          + (f" --seed {args.seed}" if args.seed != 1337 else ""))
    print(f"torch {torch.__version__}, seed {args.seed}, pos_kind {args.pos_kind}"
          + (f", angles {'fp32' if args.angles_fp32 else 'float64'}" if args.pos_kind == "rope" else
             ", ALiBi slopes " + ", ".join("%g" % m for m in alibi_slopes(cfg.NH))
             + " (distance times alpha)" if args.pos_kind == "alibi" else
             " (alphas ignored)" if args.pos_kind in ("learned", "tupe") else "")
          + (", QK-norm" if args.qk_norm else ""))
    print(f"check pass (alpha={args.check_alpha}): loss {check_loss:.9f}  "
          f"grad norm {gnorm_check:.9f}  (ln V = {np.log(cfg.V):.6f})")
    print("step  alpha   lr          loss         grad_norm")
    for s in range(oc.steps):
        print(f"{s:4d}  {ALPHAS[s]:6.3f}  {lrs[s]:.4e}  {losses[s]:.9f}  {norms[s]:.9f}")


if __name__ == "__main__":
    main()
