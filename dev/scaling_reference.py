"""Independent reference values for evaluation-time RoPE scaling (PI, NTK, dynamic NTK, YaRN).

The inverse frequencies come from Hugging Face transformers' own rope-init functions
(`transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`, called with a `LlamaConfig`),
except the static NTK-aware base `B' = B * s^(hd/(hd-2))`, which transformers does not
offer as a rope type and which is computed here directly. The YaRN ramp bounds
(`low_high`) come from a small function written from the YaRN paper's formula (doc/evaluation.md), and the
script checks that they agree with the inv_freq HF produced (dims below `low` keep the
original frequency, dims at or above `high` are divided by `s`).

Regenerate (about 2 s, CPU, byte-identical on rerun):

    python dev/scaling_reference.py                  # -> dev/scaling_reference.bin
    python dev/scaling_reference.py --out FILE

Sets (kind-1 tensor file, dev/tensorfile.py):
    main : head_dim 64, base 10000, w (original max positions) 2048, factors s = 4, 8
    small: head_dim 32, base 10000, w 128, factor s = 8 (the tiny model); names prefixed `small.`
    long : head_dim 32, base 500, w 4096, factor s = 4: a window longer than the slowest
           wavelengths, where YaRN's `high` (17) passes the last rotary dimension (15) and is
           clamped to head_dim - 1, not head_dim/2 - 1; names prefixed `long.`
Tensors per set (P = "", "small." or "long."):
    P + "config"                    f32 (3): head_dim, base, w
    P + "plain.inv_freq"            f32 (hd/2)  theta_j = B^(-2j/hd)
    P + "pi_s{S}.inv_freq"          f32 (hd/2)  HF 'linear': theta_j / s
    P + "ntk_s{S}.inv_freq"         f32 (hd/2)  static NTK-aware: base B * s^(hd/(hd-2))
    P + "dynamic_s{S}_len{N}.inv_freq" f32 (hd/2)  HF 'dynamic' at seq_len N (N = s*w and N = w/2);
                                    for N <= w it equals plain.inv_freq
    P + "yarn_s{S}.inv_freq"        f32 (hd/2)  HF 'yarn' (beta_fast 32, beta_slow 1, truncate)
    P + "yarn_s{S}.attention_factor" f32 (1)   HF's multiplier of cos and sin (0.1 ln s + 1)
    P + "yarn_s{S}.low_high"        i32 (2)    ramp bounds (the YaRN formula)
HF computes inv_freq in float32 (base ** (arange/dim) in fp32); compare with a relative
tolerance of about 1e-6, not bit-exactly.
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import tensorfile  # noqa: E402
    import torch
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS


def yarn_low_high(hd, base, w, beta_fast=32.0, beta_slow=1.0):
    """YaRN: d(r) = hd*ln(w/(2 pi r))/(2 ln B); low = max(floor(d(beta_fast)), 0),
    high = min(ceil(d(beta_slow)), hd - 1) (YaRN's reference code)."""
    def d(r):
        return hd * math.log(w / (2 * math.pi * r)) / (2 * math.log(base))
    return max(math.floor(d(beta_fast)), 0), min(math.ceil(d(beta_slow)), hd - 1)


def make_config(hd, base, max_pos, rope_parameters):
    n_head = 4
    rp = dict(rope_parameters)
    rp["rope_theta"] = float(base)
    return LlamaConfig(hidden_size=hd * n_head, num_attention_heads=n_head, num_key_value_heads=n_head,
                       head_dim=hd, max_position_embeddings=max_pos, rope_parameters=rp,
                       vocab_size=32, intermediate_size=8, num_hidden_layers=1)


def hf(rope_type, hd, base, max_pos, params, seq_len=None):
    cfg = make_config(hd, base, max_pos, dict(rope_type=rope_type, **params))
    fn = ROPE_INIT_FUNCTIONS[rope_type]
    kw = {} if seq_len is None else {"seq_len": seq_len}
    inv, att = fn(cfg, torch.device("cpu"), **kw)
    return inv.to(torch.float32).numpy().astype(np.float32), float(att)


def plain_inv_freq(hd, base):
    # HF's default (LlamaRotaryEmbedding.compute_default_rope_parameters): fp32 arange / dim
    return (1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float) / hd))).numpy().astype(np.float32)


def f64_inv(hd, base):
    return base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)


def check(name, got, want, rtol=2e-6):
    err = float(np.max(np.abs(got.astype(np.float64) - want) / np.abs(want)))
    if err > rtol:
        sys.exit(f"scaling_reference.py: self-check failed for {name}: max rel err {err:.3g} > {rtol}")
    return err


def build_set(prefix, hd, base, w, factors):
    out = [(prefix + "config", np.array([hd, base, w], dtype=np.float32))]
    plain = plain_inv_freq(hd, base)
    check(prefix + "plain", plain, f64_inv(hd, base))
    out.append((prefix + "plain.inv_freq", plain))
    for s in factors:
        S = f"s{s:g}"
        # PI / linear
        pi, att = hf("linear", hd, base, w, {"factor": float(s)})
        assert att == 1.0
        check(prefix + "pi_" + S, pi, f64_inv(hd, base) / s)
        out.append((f"{prefix}pi_{S}.inv_freq", pi))
        # static NTK-aware, computed directly (HF has no static 'ntk' rope type)
        b_ntk = base * s ** (hd / (hd - 2))
        ntk = f64_inv(hd, b_ntk).astype(np.float32)
        out.append((f"{prefix}ntk_{S}.inv_freq", ntk))
        # dynamic NTK at the target length s*w and at a short length w/2
        for n in (int(s * w), w // 2):
            dyn, att = hf("dynamic", hd, base, w, {"factor": float(s)}, seq_len=n)
            assert att == 1.0
            nn = max(n, w)
            check(f"{prefix}dynamic_{S}_len{n}", dyn,
                  f64_inv(hd, base * (s * nn / w - (s - 1)) ** (hd / (hd - 2))))
            if n <= w:
                assert np.array_equal(dyn, plain), "dynamic NTK at n <= w must equal plain"
            out.append((f"{prefix}dynamic_{S}_len{n}.inv_freq", dyn))
        # YaRN
        yarn, att = hf("yarn", hd, base, int(s * w),
                       {"factor": float(s), "original_max_position_embeddings": w})
        low, high = yarn_low_high(hd, base, w)
        j = np.arange(hd // 2, dtype=np.float64)
        ramp = np.clip((j - low) / (high - low if high != low else 1e-3), 0, 1)
        th = f64_inv(hd, base)
        check(prefix + "yarn_" + S, yarn, th / s * ramp + th * (1 - ramp))
        m = 0.1 * math.log(s) + 1.0 if s > 1 else 1.0
        assert abs(att - m) < 1e-12, (att, m)
        out.append((f"{prefix}yarn_{S}.inv_freq", yarn))
        out.append((f"{prefix}yarn_{S}.attention_factor", np.array([att], dtype=np.float32)))
        out.append((f"{prefix}yarn_{S}.low_high", np.array([low, high], dtype=np.int32)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "scaling_reference.bin"))
    args = ap.parse_args()
    missing.check()
    assert yarn_low_high(64, 10000.0, 2048) == (8, 21), yarn_low_high(64, 10000.0, 2048)
    assert yarn_low_high(32, 500.0, 4096) == (7, 17), yarn_low_high(32, 500.0, 4096)
    tensors = (build_set("", 64, 10000.0, 2048, (4, 8)) + build_set("small.", 32, 10000.0, 128, (8,))
               + build_set("long.", 32, 500.0, 4096, (4,)))
    tensorfile.write(args.out, tensorfile.KIND_REFERENCE, tensors)
    t = dict(tensors)
    for p, factors in (("", (4, 8)), ("small.", (8,)), ("long.", (4,))):
        for s in factors:
            lo, hi = t[f"{p}yarn_s{s}.low_high"]
            inv = t[f"{p}yarn_s{s}.inv_freq"]
            print(f"{p}yarn_s{s}: low {lo} high {hi} attention_factor "
                  f"{t[f'{p}yarn_s{s}.attention_factor'][0]:.9g} inv_freq[0] {inv[0]:.9g} "
                  f"inv_freq[-1] {inv[-1]:.9g}")
    print(f"wrote {args.out} ({len(tensors)} tensors, {os.path.getsize(args.out)} bytes)")
    print("regenerate: python dev/scaling_reference.py")


if __name__ == "__main__":
    main()
