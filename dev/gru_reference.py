"""Write dev/reference_gru.bin, the PyTorch reference of the GRU language model (--arch gru).

    python dev/gru_reference.py                 # writes dev/reference_gru.bin
    python dev/gru_reference.py --out FILE

The model is torch.nn.GRU (float64, autograd): token embedding wte (Vp, C), L stacked
GRU layers of hidden size C (torch's gate order r, z, n; biases on), RMSNorm with the
gain final_norm, logits = wte . x (tied, the padded rows Vp > V cut before the loss),
mean cross-entropy. No positions. The optimizer, schedule and clipping are the
project's shared conventions (dev/model_torch.py: AdamW through torch.optim.AdamW,
decay on matrices only, global-norm clip, warmup + cosine).

Contents (format in dev/tensorfile.py, kind 1), as dev/pytorch_reference.py's with:
    arch        int32   [1]  1 (ARCH_GRU)
    wte, final_norm, gru_w_ih (L,3C,C), gru_w_hh (L,3C,C), gru_b_ih (L,3C), gru_b_hh (L,3C)
                        initial parameters: wte N(0, 0.02) with zero padded rows, the GRU's
                        U(-1/sqrt(C), 1/sqrt(C)) (torch's default), final_norm 1 + 0.1 N(0, 1)
                        (away from 1 so a forgotten gain fails); all drawn in float32
The alphas and check_alpha are stored (the format has them) and ignored by the model.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import torch
    import torch.nn.functional as F
    import tensorfile  # noqa: E402
    from model_torch import OptConfig, train_step  # noqa: E402
missing.check()  # GRULM below derives from torch.nn.Module: even --help needs torch here

ALPHAS = [1.0] * 10
V, C, L, T = 257, 32, 2, 24
VP = (V + 127) // 128 * 128
NH, NKV, FF = 4, 2, 64  # stored in config_i for the format; the GRU ignores them
B, MICRO = 2, 2
NAMES = ["wte", "final_norm", "gru_w_ih", "gru_w_hh", "gru_b_ih", "gru_b_hh"]


class GRULM(torch.nn.Module):
    def __init__(self, gen):
        super().__init__()
        k = 1.0 / C ** 0.5
        wte = 0.02 * torch.randn(VP, C, generator=gen, dtype=torch.float32)
        wte[V:] = 0.0
        self.wte = torch.nn.Parameter(wte)
        self.final_norm = torch.nn.Parameter(1.0 + 0.1 * torch.randn(C, generator=gen, dtype=torch.float32))
        self.gru = torch.nn.GRU(C, C, num_layers=L, batch_first=True)
        with torch.no_grad():
            for p in self.gru.parameters():
                p.copy_(k * (2.0 * torch.rand(p.shape, generator=gen, dtype=torch.float32) - 1.0))

    def stacked(self, what):
        """The GRU's tensors stacked over layers, named as the C trainer names them."""
        g = self.gru
        get = (lambda p: p) if what == "param" else (lambda p: p.grad)
        return {
            "gru_w_ih": torch.stack([get(getattr(g, f"weight_ih_l{l}")) for l in range(L)]),
            "gru_w_hh": torch.stack([get(getattr(g, f"weight_hh_l{l}")) for l in range(L)]),
            "gru_b_ih": torch.stack([get(getattr(g, f"bias_ih_l{l}")) for l in range(L)]),
            "gru_b_hh": torch.stack([get(getattr(g, f"bias_hh_l{l}")) for l in range(L)]),
        }

    def tensors(self, what="param"):
        get = (lambda p: p) if what == "param" else (lambda p: p.grad)
        d = {"wte": get(self.wte), "final_norm": get(self.final_norm)}
        d.update(self.stacked(what))
        return {n: d[n] for n in NAMES}

    def forward(self, inp, tgt, alpha=1.0):  # alpha: the shared train_step's argument; no positions here
        x = F.embedding(inp, self.wte)
        h, _ = self.gru(x)
        x = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * self.final_norm
        logits = (x @ self.wte.t())[..., :V]
        loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        return logits, loss


def f32(t):
    return t.detach().to(torch.float32).cpu().numpy()


def direction_check(model, inp, tgt, gen):
    """Autograd against a 5-point central difference along a random direction (float64)."""
    params = list(model.parameters())
    d = [torch.randn(p.shape, generator=gen, dtype=torch.float64) for p in params]
    model.zero_grad(set_to_none=True)
    _, loss = model(inp, tgt)
    loss.backward()
    an = sum(float((p.grad * di).sum()) for p, di in zip(params, d))
    h = 1e-3

    def at(s):
        with torch.no_grad():
            for p, di in zip(params, d):
                p.add_(s * di)
            v = float(model(inp, tgt)[1])
            for p, di in zip(params, d):
                p.sub_(s * di)
        return v

    nu = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)
    model.zero_grad(set_to_none=True)
    return an, nu, abs(an - nu) / abs(nu)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "reference_gru.bin"))
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args()

    torch.use_deterministic_algorithms(True)
    oc = OptConfig(lr_max=3e-3, min_lr=3e-4, warmup=3, steps=10, weight_decay=0.1,
                   beta1=0.9, beta2=0.95, eps=1e-8, grad_clip=1.0)
    gen = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, V, (oc.steps, MICRO, B, T + 1), generator=gen, dtype=torch.int64)
    model = GRULM(gen)
    model.to(torch.float64)
    init = {n: f32(p) for n, p in model.tensors().items()}

    out = [("config_i", np.array([V, VP, C, L, NH, NKV, FF, T, B, MICRO, oc.steps, oc.warmup], dtype=np.int32)),
           ("config_f", np.array([10000.0, 1e-5, oc.lr_max, oc.min_lr, oc.weight_decay, oc.beta1, oc.beta2,
                                  oc.eps, oc.grad_clip, 1.0], dtype=np.float32)),
           ("arch", np.array([1], dtype=np.int32)),
           ("alphas", np.array(ALPHAS, dtype=np.float32)),
           ("tokens", tokens.numpy().astype(np.int32))]
    out.extend(init.items())

    inp, tgt = tokens[0, 0, :, :-1], tokens[0, 0, :, 1:]
    an, nu, rd = direction_check(model, inp, tgt, torch.Generator().manual_seed(args.seed + 1))
    print(f"direction check (float64, 5-point central, h=1e-3): autograd {an:.10e} numeric {nu:.10e} rel err {rd:.2e}")
    if rd > 1e-6:
        sys.exit("FAIL: autograd and finite differences disagree")

    model.zero_grad(set_to_none=True)
    logits, loss = model(inp, tgt)
    loss.backward()
    out.append(("logits", f32(logits)))
    out.append(("loss", np.array([loss.item()], dtype=np.float32)))
    out.extend(("grad." + n, f32(g)) for n, g in model.tensors("grad").items())
    model.zero_grad(set_to_none=True)

    # AdamW decays the matrices (wte, the GRU's weights), not the biases or the gain
    decay = [p for n, p in model.named_parameters() if n == "wte" or n.startswith("gru.weight_")]
    rest = [p for n, p in model.named_parameters() if not (n == "wte" or n.startswith("gru.weight_"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": oc.weight_decay},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=oc.lr_max, betas=(oc.beta1, oc.beta2), eps=oc.eps, foreach=False)
    losses, norms = [], []
    for s in range(oc.steps):
        mbs = [(tokens[s, m, :, :-1], tokens[s, m, :, 1:]) for m in range(MICRO)]
        lo, gn, _ = train_step(model, opt, oc, s, mbs, ALPHAS[s])
        losses.append(lo)
        norms.append(gn)
    out.append(("losses", np.array(losses, dtype=np.float32)))
    out.append(("grad_norms", np.array(norms, dtype=np.float32)))
    out.extend(("final." + n, f32(p)) for n, p in model.tensors().items())
    assert not model.wte.detach()[V:].abs().any()  # padded rows never move

    tensorfile.write(args.out, tensorfile.KIND_REFERENCE, out)
    back = tensorfile.read(args.out)
    for n, a in out:
        assert back[n].dtype == a.dtype and np.array_equal(back[n], a), n
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes, {len(out)} tensors), torch {torch.__version__}")
    print(f"check pass: loss {float(out[[n for n, _ in out].index('loss')][1][0]):.9f} (ln V = {np.log(V):.6f})")
    print("step  loss         grad_norm")
    for s in range(oc.steps):
        print(f"{s:4d}  {losses[s]:.9f}  {norms[s]:.9f}")


if __name__ == "__main__":
    main()
