"""PyTorch speed baseline for the C trainers: forward + backward + AdamW steps.

    python dev/bench_torch.py --C 128 --L 4 --NH 4 --NKV 2 --F 384 --T 128 --B 16 --V 257
    python dev/bench_torch.py --C 384 --L 6 --NH 6 --NKV 6 --F 1024 --T 256 --B 8 --V 50304
    python dev/bench_torch.py --device cuda --dtype bf16 --C 384 --L 6 --NH 6 --NKV 6 \
        --F 1024 --T 2048 --B 4 --micro 8 --V 50277
    add --threads N (CPU only, default 2), --compile, --steps, --warmup_steps, --micro

Same model as dev/model_torch.py with float32 weights, on the fast path: torch's
scaled_dot_product_attention (is_causal, GQA through enable_gqa, or
repeat_interleave on older torch), rotate-half RoPE with cos/sin built once per
step, logits over the V real columns only, fused (or foreach) AdamW, global-norm
clipping, warmup + cosine LR. Tokens are random; alpha is drawn per step from
U[1/8, 8] (PosAug) unless --alpha is given. --dtype bf16 runs forward and loss
under torch.autocast(bfloat16) with float32 master weights and optimizer, like
./train_gpt; the default fp32 is plain float32. --device cuda puts everything on
the GPU (SDPA picks flash or memory-efficient attention itself) and times steps
between torch.cuda.synchronize() calls. Prints one JSON line:
{"impl": "pytorch", "device": ..., "dtype": ..., "tokens_per_s": ..., "ms_per_step": ...,
"config": {...}}.
"""

import argparse
import contextlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import torch
    from model_torch import Config, OptConfig, LlamaRoPE, make_optimizer, lr_at  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--C", type=int, default=128)
    ap.add_argument("--L", type=int, default=4)
    ap.add_argument("--NH", type=int, default=4)
    ap.add_argument("--NKV", type=int, default=2)
    ap.add_argument("--F", type=int, default=384)
    ap.add_argument("--T", type=int, default=128)
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--V", type=int, default=257)
    ap.add_argument("--micro", type=int, default=1, help="micro-batches per step")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup_steps", type=int, default=3, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (--device cpu only)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: autocast forward and loss, float32 master weights")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--alpha", type=float, default=None, help="fixed alpha (default PosAug U[1/8,8])")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    missing.check()

    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"bench_torch.py: --device cuda, but torch {torch.__version__} sees no GPU "
                 f"(CUDA build: {torch.version.cuda or 'none, a CPU-only wheel'}); "
                 "run on a GPU machine or use --device cpu")
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    if not cuda:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = Config(V=args.V, C=args.C, L=args.L, NH=args.NH, NKV=args.NKV, F=args.F, T=args.T)
    total = args.warmup_steps + args.steps
    oc = OptConfig(lr_max=6e-4, min_lr=6e-5, warmup=max(1, total // 10), steps=total)
    model = LlamaRoPE(cfg, attn="sdpa", slice_head=True)
    model.init_weights(torch.Generator().manual_seed(args.seed))
    model.to(dev)
    opt = make_optimizer(model, oc, fast=True)
    opt_kind = ("fused" if opt.defaults.get("fused") else
                "foreach" if opt.defaults.get("foreach") else "default")

    fwd = model.forward_tables
    compiled = False
    compile_error = None
    if args.compile:
        try:
            fwd = torch.compile(model.forward_tables, dynamic=False)
            compiled = True
        except Exception as e:  # noqa: BLE001
            compile_error = f"{type(e).__name__}: {e}"[:200]

    gen = torch.Generator().manual_seed(args.seed + 1)
    params = list(model.parameters())

    def autocast():
        if args.dtype == "bf16":
            return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step(s):
        if args.alpha is not None:
            alpha = args.alpha
        else:
            alpha = float(torch.empty(()).uniform_(1 / 8, 8, generator=gen))
        with torch.no_grad():
            cos, sin = model.rope_tables(cfg.T, alpha)
        opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for _ in range(args.micro):
            tok = torch.randint(0, cfg.V, (args.B, cfg.T + 1), generator=gen).to(dev)
            with autocast():
                _, loss = fwd(tok[:, :-1], cos, sin, tok[:, 1:])
            (loss / args.micro).backward()
            loss_sum += loss.detach()
        norm = torch.nn.utils.clip_grad_norm_(params, oc.grad_clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(s, oc)
        opt.step()
        return float(loss_sum) / args.micro, float(norm)

    nonlocal_state = {}
    try:
        t_w0 = time.perf_counter()
        for s in range(args.warmup_steps):
            step(s)
        sync()
        t_w1 = time.perf_counter()
    except Exception as e:  # noqa: BLE001  (compile failure shows up on the first call)
        if not compiled:
            raise
        compile_error = f"{type(e).__name__}: {e}"[:200]
        compiled = False
        fwd = model.forward_tables
        t_w0 = time.perf_counter()
        for s in range(args.warmup_steps):
            step(s)
        sync()
        t_w1 = time.perf_counter()
    nonlocal_state["warmup_s"] = t_w1 - t_w0

    times = []
    loss = norm = float("nan")
    for s in range(args.warmup_steps, total):
        sync()
        t0 = time.perf_counter()
        loss, norm = step(s)
        sync()
        times.append(time.perf_counter() - t0)
    tot = sum(times)
    tokens = args.B * cfg.T * args.micro * len(times)
    n_params = sum(p.numel() for p in params)
    n_nonembed = n_params - model.wte.numel()
    # 6*N per token for the matmuls (embedding counted once, for the tied head: V rows)
    flops_tok = 6 * (n_nonembed - (cfg.L * 2 + 1) * cfg.C + cfg.V * cfg.C) \
        + 6 * cfg.L * cfg.T * cfg.C  # causal attention, QK^T and AV, fwd+bwd
    res = {
        "impl": "pytorch",
        "device": args.device,
        "dtype": args.dtype,
        "tokens_per_s": round(tokens / tot, 1),
        "ms_per_step": round(1000 * tot / len(times), 2),
        "ms_per_step_min": round(1000 * min(times), 2),
        "gflops_per_s": round(flops_tok * tokens / tot / 1e9, 2),
        "config": {"V": cfg.V, "Vp": cfg.Vp, "C": cfg.C, "L": cfg.L, "NH": cfg.NH,
                   "NKV": cfg.NKV, "F": cfg.F, "T": cfg.T, "B": args.B, "micro": args.micro,
                   "params": n_params, "params_nonembed": n_nonembed},
        "threads": None if cuda else args.threads,
        "steps": len(times),
        "warmup_steps": args.warmup_steps,
        "warmup_s": round(nonlocal_state["warmup_s"], 2),
        "compile": compiled,
        "optimizer": opt_kind,
        "final_loss": round(loss, 4),
        "last_grad_norm": round(norm, 4),
        "torch": torch.__version__,
    }
    if cuda:
        res["gpu"] = torch.cuda.get_device_name(dev)
        res["max_mem_gib"] = round(torch.cuda.max_memory_allocated(dev) / 2**30, 2)
    if compile_error:
        res["compile_error"] = compile_error
    print(json.dumps(res))


if __name__ == "__main__":
    main()
