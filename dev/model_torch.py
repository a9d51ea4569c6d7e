"""PyTorch model of the project's Llama-style network (doc/model.md).

Independent of the C code: forward pass written from the model definition,
backward pass by autograd, optimizer from torch.optim.AdamW's definition.

Model: pre-norm, no biases, tied embedding / LM head, RMSNorm (eps 1e-5),
grouped-query attention with rotate-half RoPE, SwiGLU MLP.

Parameters are stored STACKED per kind, in this order (the names are the
contract with the C trainers and the tests):

    wte        (Vp, C)          tied with the LM head
    attn_norm  (L, C)
    wq         (L, NH*hd, C)
    wk         (L, NKV*hd, C)
    wv         (L, NKV*hd, C)
    wo         (L, C, NH*hd)
    mlp_norm   (L, C)
    w_gate     (L, F, C)
    w_up       (L, F, C)
    w_down     (L, C, F)
    final_norm (C)

and after them, only when present (EXTRA_NAMES):

    wpe        (T, C)           pos_kind "learned"
    attn_bias  (L, NH, NB)      pos_kind "erpe" or "t5"
    rel_key    (L, NB, hd)      pos_kind "shaw"
    tpe_w1     (L, H)           pos_kind "tpe" (H = TPE_HIDDEN = 32)
    tpe_b1     (L, H)           pos_kind "tpe"
    tpe_w2     (L, hd, H)       pos_kind "tpe"
    tupe_uq    (NH*hd, C)       pos_kind "tupe" (with wpe (T, C) and attn_bias (1, NH, 32))
    tupe_uk    (NH*hd, C)       pos_kind "tupe"
    tupe_ln_w  (C)              pos_kind "tupe": the position table's LayerNorm gain
    tupe_ln_b  (C)              pos_kind "tupe": its bias
    tupe_bq    (NH*hd)          pos_kind "tupe": U^Q's bias (U^K's would add a constant per
                                query row, which the softmax ignores: none)
    kerple_r1  (1, NH)          pos_kind "kerple": one set for every layer
    kerple_r2  (1, NH)          pos_kind "kerple"
    fire_w1    (L, 32)          pos_kind "fire" (FIRE_HIDDEN = 32)
    fire_b1    (L, 32)          pos_kind "fire"
    fire_w2    (L, NH, 32)      pos_kind "fire"
    fire_c     (L)              pos_kind "fire"
    fire_l_mult (L)             pos_kind "fire": the threshold's multiplier m, L = m * FIRE_LENGTH
    kerple_pow_r1 (1, NH)       pos_kind "kerple-power": one set for every layer
    kerple_pow_r2 (1, NH)       pos_kind "kerple-power"
    q_norm     (L, NH*hd)       qk_norm
    k_norm     (L, NKV*hd)      qk_norm

Positions: p_t = alpha * t (+ offset), per layer alpha allowed. RoPE pairs
element j with j + hd/2, angle p_t * theta_j, theta_j = base^(-2j/hd).
Logits over the padded vocabulary Vp are masked to -inf for columns >= V.

Position kinds (`pos_kind`: the entries of ENCODINGS, one per encoding, in the trainer's
PE_TABLE order; the integer is the `pos_kind` tensor of the reference files):
    0 "rope"   the rotation above;
    1 "nope"   no positional signal: q and k are not rotated, the causal mask only;
    2 "alibi"  no rotation; after the 1/sqrt(hd) scale the attention logit of query i
               and key j <= i gets  - m_h * alpha * (i - j), m_h = alibi_slopes(NH)[h]
               over the QUERY heads h; alpha is the step's (per-layer allowed) alpha:
               alpha = 1 is plain ALiBi, a random alpha is ALiBi+PosAug;
    3 "sinusoidal" no rotation; the residual stream starts as wte[tok_t] * sqrt(C) + PE(p_t)
               (the tied embedding scaled as in Vaswani et al. 2017, Sec. 3.4),
               PE[p, 2k] = sin(p f_k), PE[p, 2k+1] = cos(p f_k), f_k = 10000^(-2k/C),
               p_t = alpha * t (+ offset) as for RoPE (so PosAug applies), angles
               formed in float32 like the C code (sinusoidal_pe); no parameters;
    4 "learned" no rotation; the residual stream starts as wte[tok_t] + wpe[t], wpe a
               trained (T, C) table (weight-decayed like wte); alpha is ignored.
    5 "erpe"   no rotation; the scaled logit of query i and key j <= i gets
               attn_bias[l, h, min(floor(alpha_l * (i - j)), clip)], a learned
               (L, NH, clip + 1) table (clip = T - 1 by default; no weight decay);
    6 "t5"     the same with T5's 32 buckets of floor(alpha_l * (i - j)), log-spaced
               from 16 up to distance 128 (t5_bucket, T5's causal bucketing);
    7 "tape"   as "sinusoidal", with f_k times C / T (tAPE; T the model's window);
    8 "shaw"   no rotation; the logit of query i and key j <= i is
               (q_i . k_j + q_i . rel_key[l, min(floor(alpha_l * (i - j)), clip)]) / sqrt(hd),
               rel_key (L, clip + 1, hd) a learned key vector per clipped distance shared by
               the heads (Shaw et al. 2018, keys only; clip 16 by default);
    9 "tpe"    no rotation; the logit of query i and key j <= i is
               (q_i . k_j + q_i . r_l(u_ij)) / sqrt(hd), r_l(u) = tpe_w2[l] tanh(tpe_w1[l] u
               + tpe_b1[l]) a learned function R -> R^hd (T-PE), shared by the heads, of
               u_ij = ln(1 + alpha_l (i - j)) (the distance and its log1p in float32, as
               the C code forms them);
    10 "tupe"  TUPE-R (Ke et al. 2020): no rotation, nothing added to the embedding; the
               logit of query i and key j <= i is
               (q_i . k_j + (p_i U^Q_h + b^Q_h) . (p_j U^K_h)) / sqrt(2 hd) +
               attn_bias[0, h, t5_bucket(i - j)], p = LayerNorm(wpe) (gain tupe_ln_w, bias
               tupe_ln_b, eps 1e-5), U^Q = tupe_uq, U^K = tupe_uk (NH*hd, C) and U^Q's bias
               tupe_bq per head; all of it, the relative bias too, computed once and
               shared by the layers, as TUPE's released code; integer positions (alpha is
               ignored, as for "learned").
    11 "kerple" KERPLE's log variant (Chi et al. 2022): no rotation; the scaled logit of query
               i and key j <= i gets -kerple_r1[0, h] * ln(1 + kerple_r2[0, h] * alpha_l (i - j)),
               r1, r2 (1, NH) learned, one set shared by the layers as KERPLE's code shares its
               module, and held at or above 0.01 after every step (BOUNDS, as KERPLE's code
               clamps them; no weight decay), the distance in float32 as the C code forms it.
    12 "fire"  FIRE (Li et al. 2023): no rotation; the scaled logit of query i and key j <= i
               gets f_h(x), x = psi(alpha_l (i - j)) / psi(max(L_l, alpha_l i)), psi(u) =
               ln(c_l u + 1), f = fire_w2[l] relu(fire_w1[l] x + fire_b1[l]) (32 units, an output
               per head, no output bias), c = fire_c, L = fire_l_mult * FIRE_LENGTH (512, as FIRE's
               PyTorch port learns L: a multiplier of a fixed length), c and the multiplier held at
               or above 0.01 (BOUNDS); the distance and the query's position in float32 as the C
               code forms them.
    13 "xpos"  xPos (Sun et al. 2023, torchscale's XPOS): the RoPE rotation above, with each
               pair j of a query at position n scaled by zeta_j^(n' / 512) and of a key at m by
               zeta_j^(-m' / 512), zeta_j = (2j + 0.4 hd) / (1.4 hd), n', m' the positions
               centred on the sequence's middle as torchscale centres them (xpos_scales); no
               parameters.
    14 "kerple-power" KERPLE's power variant: the scaled logit of query i and key j <= i gets
               -kerple_pow_r1[0, h] * (alpha_l (i - j))^kerple_pow_r2[0, h] (one set shared by the
               layers), r1 >= 0.01 and r2 in [0.01, 2] held after every step (BOUNDS, as KERPLE's
               code clamps them; r1 drawn U(0, 1), r2 U(0, 2)); no weight decay.

QK-norm (`qk_norm=True`, composes with any kind): in every layer, right after the
projections (before RoPE and the split into heads), q = RMSNorm(wq n1) * q_norm[l]
over each token's whole NH*hd vector and k = RMSNorm(wk n1) * k_norm[l] over its
NKV*hd vector (eps rms_eps); the attention scale stays 1/sqrt(hd).

Two attention paths: `attn="math"` (explicit softmax, used by the reference,
works in float64) and `attn="sdpa"` (torch's scaled_dot_product_attention,
used by the benchmark).
"""

import math
from dataclasses import dataclass, asdict, field

import torch
import torch.nn as nn
import torch.nn.functional as F

PARAM_NAMES = ["wte", "attn_norm", "wq", "wk", "wv", "wo", "mlp_norm",
               "w_gate", "w_up", "w_down", "final_norm"]


def pad_vocab(V, multiple=128):
    return ((V + multiple - 1) // multiple) * multiple


@dataclass
class Config:
    V: int = 257
    C: int = 64
    L: int = 2
    NH: int = 4
    NKV: int = 2
    F: int = 128
    T: int = 32
    rope_base: float = 10000.0
    rms_eps: float = 1e-5

    @property
    def Vp(self):
        return pad_vocab(self.V)

    @property
    def hd(self):
        return self.C // self.NH

    def check(self):
        assert self.C % self.NH == 0, "C must be a multiple of NH"
        assert self.NH % self.NKV == 0, "NH must be a multiple of NKV"
        assert self.hd % 2 == 0, "head dim must be even"

    def as_dict(self):
        d = asdict(self)
        d["Vp"] = self.Vp
        d["hd"] = self.hd
        return d


T5_BUCKETS, T5_MAX_DISTANCE = 32, 128
TPE_HIDDEN = 32
FIRE_HIDDEN = 32
FIRE_LENGTH = 512.0  # the fixed length FIRE's threshold is a multiple of (init_L of its PyTorch port)


def t5_bucket(n, num_buckets=T5_BUCKETS, max_distance=T5_MAX_DISTANCE):
    """T5's causal relative-position bucket (Raffel et al. 2020) of integer distances
    n = i - j >= 0 (int64 tensor): n below num_buckets/2, then log-spaced buckets up to
    max_distance, the last holding every longer distance. The log in float32."""
    exact = num_buckets // 2
    large = exact + (torch.log(n.float().clamp(min=1) / exact) / math.log(max_distance / exact)
                     * (num_buckets - exact)).long()
    return torch.where(n < exact, n, large.clamp(max=num_buckets - 1))


def rel_buckets(T, alpha, t5, clip):
    """(T, T) bucket of query i, key j: floor(alpha * (i - j)) (the distance in fp32, as the
    C code forms it), clipped (eRPE, Shaw) or T5-bucketed (t5 True); 0 above the diagonal (masked)."""
    i = torch.arange(T, dtype=torch.float32)
    d = torch.floor(torch.tensor(alpha, dtype=torch.float32) * (i[:, None] - i[None, :]).clamp(min=0)).long()
    return t5_bucket(d) if t5 else d.clamp(max=clip)


def distances(T, alpha):
    """(T, T) the distance alpha * (i - j) of query i and key j in float32, as the C code
    forms it (0 above the diagonal, which the causal mask removes)."""
    i = torch.arange(T, dtype=torch.float32)
    return torch.tensor(alpha, dtype=torch.float32) * (i[:, None] - i[None, :]).clamp(min=0)


def tpe_inputs(T, alpha):
    """(T,) T-PE's input of token distance d = 0..T-1: ln(1 + alpha * d), the product and
    the log1p in float32 as the C code forms them."""
    d = torch.arange(T, dtype=torch.float32) * torch.tensor(alpha, dtype=torch.float32)
    return torch.log1p(d)


def alibi_slopes(n):
    """ALiBi head slopes (Press et al. 2022; Hugging Face's get_slopes / build_alibi_tensor).

    n a power of two: m_h = 2^(-8(h+1)/n), h = 0..n-1. Otherwise, with c the largest
    power of two below n: the c slopes of c, then every other slope of 2c starting with
    the first, i.e. 2^(-8(2k+1)/(2c)) for k = 0, 1, ..., until n slopes.
    Exact powers of two (Python floats); n = 6 gives [2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3].
    """
    assert n >= 1
    c = 1 << (n.bit_length() - 1)          # largest power of two <= n
    slopes = [2.0 ** (-8.0 * (h + 1) / c) for h in range(c)]
    slopes += [2.0 ** (-8.0 * (2 * k + 1) / (2 * c)) for k in range(n - c)]
    return slopes


def alibi_bias(T, slopes, alpha, dtype, device):
    """(NH, T, T) additive logit bias -m_h * alpha * (i - j) for j <= i (0 above the
    diagonal, which the causal mask removes anyway). Formed in float64."""
    i = torch.arange(T, dtype=torch.float64, device=device)
    dist = (i[:, None] - i[None, :]).clamp(min=0.0)             # (T, T), i - j for j <= i
    m = torch.tensor(slopes, dtype=torch.float64, device=device)
    return (-(m[:, None, None] * float(alpha)) * dist[None]).to(dtype)


def rope_cos_sin(T, hd, alpha, base, dtype, device, offset=0.0, angles_fp32=False):
    """cos, sin of shape (T, hd/2) for positions p_t = alpha*t + offset.

    Angles are computed in float64 (exact math) unless angles_fp32, which mimics
    a kernel that forms fl32(fl32(p_t) * fl32(theta_j)) before an accurate sin/cos.
    """
    j = torch.arange(hd // 2, dtype=torch.float64, device=device)
    theta = base ** (-2.0 * j / hd)
    t = torch.arange(T, dtype=torch.float64, device=device)
    p = alpha * t + offset
    if angles_fp32:
        ang = (p.float()[:, None] * theta.float()[None, :]).double()
    else:
        ang = p[:, None] * theta[None, :]
    return torch.cos(ang).to(dtype), torch.sin(ang).to(dtype)


def sinusoidal_pe(T, C, alpha, dtype, device, offset=0.0, scale=1.0):
    """(T, C) sinusoidal APE for p_t = alpha*t + offset: PE[t, 2k] = sin(p_t f_k),
    PE[t, 2k+1] = cos(p_t f_k), f_k = 10000^(-2k/C) * scale (tAPE: C / T_train).

    The angle is formed in float32 exactly as the C code does (float angle =
    p * powf(10000.0f, -2.0f * k / C)): PE is O(1), much larger than wte, so float64
    angles would differ from the C result by ~1e-4 relative. Only sin/cos are float64.
    """
    f32 = lambda v: torch.tensor(v, dtype=torch.float32)
    k = torch.arange(C // 2, dtype=torch.float32)
    f = (10000.0 ** (-2.0 * k / f32(C)).double()).float()   # fl32(pow(fl32(-2k / C)))
    f = f * f32(scale)                                       # float32 product
    p = torch.arange(T, dtype=torch.float32) * f32(alpha) + f32(offset)
    ang = (p[:, None] * f[None, :]).double()                 # float32 product
    pe = torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1)  # (T, C/2, 2): interleaved
    return pe.reshape(T, C).to(dtype=dtype, device=device)


def apply_rope(x, cos, sin):
    """x (B, H, T, hd); cos/sin (T, hd/2). Rotate-half layout."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def xpos_scales(T, hd, alpha, dtype, device, scale_base=512.0):
    """(T, hd/2) xPos's scales of queries and of keys (Sun et al. 2023, torchscale's XPOS):
    zeta_j^(e_t / scale_base) and its inverse, zeta_j = (2j + 0.4 hd) / (1.4 hd), written from
    torchscale's code: the exponent e_t is the position alpha t + offset centred on the
    sequence's middle token, as torchscale centres it (a constant that cancels in q . k; the C
    code does not centre). Float64."""
    zeta = (torch.arange(0, hd, 2, dtype=torch.float64, device=device) + 0.4 * hd) / (1.4 * hd)
    min_pos = -T // 2                                  # torchscale's, with no cache offset
    e = alpha * (torch.arange(T, dtype=torch.float64, device=device) + min_pos)  # p_t - p_(-min_pos): offset cancels
    scale = zeta[None, :] ** (e[:, None] / scale_base)
    return scale.to(dtype), (1.0 / scale).to(dtype)


def rmsnorm(x, gain, eps):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * gain


# ----------------------------------------------------------------------------
# The encodings: one entry each, in the trainer's PE_TABLE order (llmc/schedule.h; the index is
# the pos_kind the reference files store). An entry holds what the model needs of it: its own
# tensors (name, shape of (cfg, model), init of (shape, generator, cfg): drawn in EXTRA_NAMES
# order after the core tensors), their bounds [lo, hi] (held after the init and each optimizer
# step) and which of them AdamW decays, its tables for a pass (tables: the forward's cos/sin
# and scales of a rotation, logit biases, embedding terms; see LlamaRoPE.forward_tables), its
# --rel_clip default, and for dev/pytorch_reference.py what its file starts from (reference:
# values away from the init, drawn after it) and its finite-difference step. Adding an
# encoding here is one entry.

def normal(std):
    return lambda shape, gen, cfg: torch.randn(shape, generator=gen, dtype=torch.float32) * std


def const(value):  # value: a number or a function of cfg
    return lambda shape, gen, cfg: torch.full(shape, float(value(cfg) if callable(value) else value), dtype=torch.float32)


def uniform_to(hi):
    """U(0, hi), as KERPLE's code draws (hi * rand)."""
    return lambda shape, gen, cfg: hi * torch.rand(shape, generator=gen, dtype=torch.float32)


def uniform_sym(bound):
    """U(-bound, bound), nn.Linear's default for a fan-in of 1 / bound^2."""
    return lambda shape, gen, cfg: (2 * torch.rand(shape, generator=gen, dtype=torch.float32) - 1) * bound


def const_after_draw(value):
    """value, after a U(-1/sqrt(32), 1/sqrt(32)) draw it discards (FIRE's c and L: drawn as its
    MLP, then set; the draws after them stay those the files were made with)."""
    def init(shape, gen, cfg):
        uniform_sym(1.0 / math.sqrt(FIRE_HIDDEN))(shape, gen, cfg)
        return const(value)(shape, gen, cfg)
    return init


@dataclass(frozen=True)
class Encoding:
    tables: object                                # (model, T, alphas (L floats), offset) -> dict of forward_tables' tables
    tensors: tuple = ()                           # (name, shape(cfg, model), init(shape, generator, cfg))
    bounds: dict = field(default_factory=dict)    # name -> (lo, hi)
    decay: frozenset = frozenset()                # its tensors that AdamW decays
    clip: object = lambda cfg: cfg.T - 1          # --rel_clip's default (eRPE's, Shaw's buckets)
    reference: object = None                      # (model, generator): the reference file's start, after the init
    fd_step: float = 1e-3                         # the reference's finite-difference step


def rope_tables(m, T, alphas, offset):
    cos, sin = m.rope_tables(T, alphas, offset)
    return {"cos": cos, "sin": sin}


def xpos_tables(m, T, alphas, offset):
    """RoPE's rotation with xPos's scales on cos and sin, queries' and keys' (xpos_scales)."""
    t = rope_tables(m, T, alphas, offset)
    sq, sk = zip(*[xpos_scales(T, m.cfg.hd, a, m.wte.dtype, m.wte.device) for a in alphas])
    return dict(t, scale_q=torch.stack(sq), scale_k=torch.stack(sk))


def sinusoidal_tables(scale):
    """PE(p_t) added to the embedding scaled by sqrt(C) (layer 0's alpha: the embedding is below every layer)."""
    return lambda m, T, alphas, offset: {"pe": sinusoidal_pe(T, m.cfg.C, alphas[0], m.wte.dtype, m.wte.device, offset,
                                                             scale(m.cfg))}


def learned_tables(m, T, alphas, offset):
    assert T <= m.cfg.T, f"learned APE has {m.cfg.T} rows, got T = {T}"
    return {"wpe": m.wpe[:T]}


def table_bias_tables(t5):
    """a learned bias per layer, head and bucket of floor(alpha_l (i - j)): clipped, or T5's buckets"""
    return lambda m, T, alphas, offset: {"bias": torch.stack([m.attn_bias[l][:, rel_buckets(T, a, t5, m.rel_clip)]
                                                               for l, a in enumerate(alphas)])}


def tupe_tables(m, T, alphas, offset):
    """T5's buckets of i - j (integer positions: alpha ignored), one table, and the untied positions' term,
    shared by the layers"""
    cfg, NH, hd = m.cfg, m.cfg.NH, m.cfg.hd
    bias = m.attn_bias[0][:, rel_buckets(T, 1.0, True, m.rel_clip)].expand(cfg.L, -1, -1, -1)
    p = F.layer_norm(m.wpe[:T], (cfg.C,), m.tupe_ln_w, m.tupe_ln_b, eps=1e-5)
    pq = F.linear(p, m.tupe_uq, m.tupe_bq).view(T, NH, hd).transpose(0, 1)  # (NH,T,hd)
    pk = F.linear(p, m.tupe_uk).view(T, NH, hd).transpose(0, 1)
    return {"bias": bias, "untied": (pq @ pk.transpose(-2, -1)) / math.sqrt(2 * hd)}  # (NH,T,T)


def kerple_tables(m, T, alphas, offset):
    """-r1 ln(1 + r2 dist) per head, r1 and r2 shared by the layers"""
    return {"bias": torch.stack([-m.kerple_r1[0][:, None, None]
                                 * torch.log(1 + m.kerple_r2[0][:, None, None] * distances(T, a).to(m.wte.dtype))
                                 for a in alphas])}


def kerple_power_tables(m, T, alphas, offset):
    """-r1 dist^r2 per head, r1 and r2 shared by the layers (torch's pow takes d(0^r2)/dr2 as 0)"""
    return {"bias": torch.stack([-m.kerple_pow_r1[0][:, None, None]
                                 * distances(T, a).to(m.wte.dtype) ** m.kerple_pow_r2[0][:, None, None]
                                 for a in alphas])}


def kerple_power_reference(m, gen):
    """half the heads' powers at their ceiling 2 (the trainer's too: AdamW's steps push some above it, where
    the bound holds them: a path that ignores it fails the file's final weights)"""
    m.kerple_pow_r2[0, :m.cfg.NH // 2].fill_(2.0)


def set_attn_bias(m, gen):
    """a table away from zero (the model's init is zeros), so that the check pass reads it"""
    m.attn_bias.copy_(0.5 * torch.randn(m.attn_bias.shape, generator=gen, dtype=torch.float32))


TPE_W2_SCALE = 0.2  # the T-PE file's output weights: PyTorch's own bf16 drift 1.2e-2 at 0.2, 9.7e-2 at the init's 0.02


def tpe_reference(m, gen):
    """keys of order 1 (the init's are ~0.07): AdamW's first steps would move a 0.02 tensor by its own
    size, and bf16 then flips signs"""
    m.tpe_w2.copy_(TPE_W2_SCALE * torch.randn(m.tpe_w2.shape, generator=gen, dtype=torch.float32))


def tupe_reference(m, gen):
    """an untied term of order 1 (the init's is ~1e-5); the LayerNorm's gain and bias and the query
    projection's bias away from 1 and 0"""
    set_attn_bias(m, gen)
    m.wpe.copy_(torch.randn(m.wpe.shape, generator=gen, dtype=torch.float32))
    for p in (m.tupe_uq, m.tupe_uk):
        p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) / math.sqrt(m.cfg.C))
    for p, base, scale in ((m.tupe_ln_w, 1.0, 0.1), (m.tupe_ln_b, 0.0, 0.1), (m.tupe_bq, 0.0, 0.5)):
        p.copy_(base + scale * torch.randn(p.shape, generator=gen, dtype=torch.float32))


def fire_reference(m, gen):
    """L = m * 512 between positions (T - 1.5, exact: 512 is a power of two): the alphas' query positions
    a * t never equal it"""
    m.fire_l_mult.fill_((m.cfg.T - 1.5) / FIRE_LENGTH)


KERPLE_EPS = 0.01  # the least r1, r2 (KERPLE's code clamps to it)
SHARED_NH = lambda cfg, m: (1, cfg.NH)  # noqa: E731  (one set for every layer)
ENCODINGS = {
    "rope": Encoding(rope_tables),
    "nope": Encoding(lambda m, T, alphas, offset: {}),
    "alibi": Encoding(lambda m, T, alphas, offset: {"bias": m.alibi_tables(T, alphas)}),
    "sinusoidal": Encoding(sinusoidal_tables(lambda cfg: 1.0)),
    "learned": Encoding(learned_tables, (("wpe", lambda cfg, m: (cfg.T, cfg.C), normal(0.02)),), decay=frozenset({"wpe"})),
    "erpe": Encoding(table_bias_tables(False), (("attn_bias", lambda cfg, m: (cfg.L, cfg.NH, m.rel_clip + 1), const(0.0)),),
                     reference=set_attn_bias),
    "t5": Encoding(table_bias_tables(True), (("attn_bias", lambda cfg, m: (cfg.L, cfg.NH, T5_BUCKETS), const(0.0)),),
                   reference=set_attn_bias),
    "tape": Encoding(sinusoidal_tables(lambda cfg: cfg.C / cfg.T)),
    "shaw": Encoding(lambda m, T, alphas, offset: {"relb": torch.stack([rel_buckets(T, a, False, m.rel_clip)
                                                                        for a in alphas])},
                     (("rel_key", lambda cfg, m: (cfg.L, m.rel_clip + 1, cfg.hd), normal(0.02)),),
                     decay=frozenset({"rel_key"}), clip=lambda cfg: 16),
    "tpe": Encoding(lambda m, T, alphas, offset: {"tpe_u": torch.stack([tpe_inputs(T, a) for a in alphas]).to(m.wte.dtype)},
                    (("tpe_w1", lambda cfg, m: (cfg.L, TPE_HIDDEN), normal(1.0)),
                     ("tpe_b1", lambda cfg, m: (cfg.L, TPE_HIDDEN), normal(1.0)),
                     ("tpe_w2", lambda cfg, m: (cfg.L, cfg.hd, TPE_HIDDEN), normal(0.02))),
                    decay=frozenset({"tpe_w2"}), reference=tpe_reference),
    "tupe": Encoding(tupe_tables,
                     (("wpe", lambda cfg, m: (cfg.T, cfg.C), normal(0.02)),
                      ("attn_bias", lambda cfg, m: (1, cfg.NH, T5_BUCKETS), normal(0.02)),  # one table, BERT's init
                      ("tupe_uq", lambda cfg, m: (cfg.NH * cfg.hd, cfg.C), normal(0.02)),
                      ("tupe_uk", lambda cfg, m: (cfg.NH * cfg.hd, cfg.C), normal(0.02)),
                      ("tupe_ln_w", lambda cfg, m: (cfg.C,), const(1.0)),
                      ("tupe_ln_b", lambda cfg, m: (cfg.C,), const(0.0)),
                      ("tupe_bq", lambda cfg, m: (cfg.NH * cfg.hd,), const(0.0))),
                     decay=frozenset({"wpe", "tupe_uq", "tupe_uk"}), reference=tupe_reference),
    "kerple": Encoding(kerple_tables,
                       (("kerple_r1", SHARED_NH, uniform_to(2.0)), ("kerple_r2", SHARED_NH, uniform_to(1.0))),
                       bounds={"kerple_r1": (KERPLE_EPS, math.inf), "kerple_r2": (KERPLE_EPS, math.inf)},
                       fd_step=1e-4),  # a shared r2 moves every layer's bias: at 1e-3 the stencil's O(h^4) reaches 1e-5
    "fire": Encoding(lambda m, T, alphas, offset: {"bias": torch.stack([m.fire_bias(l, T, a) for l, a in enumerate(alphas)])},
                     (("fire_w1", lambda cfg, m: (cfg.L, FIRE_HIDDEN), uniform_sym(1.0)),
                      ("fire_b1", lambda cfg, m: (cfg.L, FIRE_HIDDEN), uniform_sym(1.0)),
                      ("fire_w2", lambda cfg, m: (cfg.L, cfg.NH, FIRE_HIDDEN), uniform_sym(1.0 / math.sqrt(FIRE_HIDDEN))),
                      ("fire_c", lambda cfg, m: (cfg.L,), const_after_draw(0.1)),
                      ("fire_l_mult", lambda cfg, m: (cfg.L,), const_after_draw(1.0))),
                     bounds={"fire_c": (0.01, math.inf), "fire_l_mult": (0.01, math.inf)},
                     reference=fire_reference, fd_step=1e-4),  # its ReLU kinks: a step of 1e-3 crosses some
    "xpos": Encoding(xpos_tables),
    "kerple-power": Encoding(kerple_power_tables,
                             (("kerple_pow_r1", SHARED_NH, uniform_to(1.0)), ("kerple_pow_r2", SHARED_NH, uniform_to(2.0))),
                             bounds={"kerple_pow_r1": (KERPLE_EPS, math.inf), "kerple_pow_r2": (KERPLE_EPS, 2.0)},
                             reference=kerple_power_reference),
}
POS_KINDS = {name: i for i, name in enumerate(ENCODINGS)}
QK_NORM_TENSORS = (("q_norm", lambda cfg, m: (cfg.L, cfg.NH * cfg.hd), const(1.0)),
                   ("k_norm", lambda cfg, m: (cfg.L, cfg.NKV * cfg.hd), const(1.0)))
# the extra tensors' order, after PARAM_NAMES (the files' and the init's): wpe, the QK-norm gains, then the
# encodings' own in table order
EXTRA_NAMES = list(dict.fromkeys(["wpe"] + [t[0] for t in QK_NORM_TENSORS]
                                 + [t[0] for e in ENCODINGS.values() for t in e.tensors]))
BOUNDS = {n: b for e in ENCODINGS.values() for n, b in e.bounds.items()}
DECAY_NAMES = {"wte", "wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"} | {n for e in ENCODINGS.values() for n in e.decay}


class LlamaRoPE(nn.Module):
    def __init__(self, cfg: Config, attn="math", angles_fp32=False, slice_head=False,
                 pos_kind="rope", qk_norm=False, rel_clip=None):
        """attn: "math" (explicit softmax) or "sdpa". slice_head: compute logits only
        for the V real columns (same loss, faster) instead of Vp columns masked to -inf.
        pos_kind: one of POS_KINDS (default "rope"); qk_norm: RMSNorm q and k; rel_clip:
        eRPE's clip distance (default T - 1) (module docstring)."""
        super().__init__()
        cfg.check()
        assert pos_kind in POS_KINDS, pos_kind
        self.cfg = cfg
        self.pos_kind = pos_kind
        self.qk_norm = qk_norm
        self.attn = attn
        self.angles_fp32 = angles_fp32
        self.slice_head = slice_head
        C, L, NH, NKV, Fh, hd, Vp = cfg.C, cfg.L, cfg.NH, cfg.NKV, cfg.F, cfg.hd, cfg.Vp
        e = lambda *s: nn.Parameter(torch.empty(*s))
        # registration order == PARAM_NAMES order
        self.wte = e(Vp, C)
        self.attn_norm = e(L, C)
        self.wq = e(L, NH * hd, C)
        self.wk = e(L, NKV * hd, C)
        self.wv = e(L, NKV * hd, C)
        self.wo = e(L, C, NH * hd)
        self.mlp_norm = e(L, C)
        self.w_gate = e(L, Fh, C)
        self.w_up = e(L, Fh, C)
        self.w_down = e(L, C, Fh)
        self.final_norm = e(C)
        self.enc = ENCODINGS[pos_kind]
        self.rel_clip = self.enc.clip(cfg) if rel_clip is None else rel_clip
        own = {n: (shape, init) for n, shape, init in self.enc.tensors + (QK_NORM_TENSORS if qk_norm else ())}
        self.extra_init = {}
        for name in EXTRA_NAMES:  # the encoding's tensors and the QK-norm gains, in the files' order
            if name in own:
                setattr(self, name, e(*own[name][0](cfg, self)))
                self.extra_init[name] = own[name][1]
        names = [n for n, _ in self.named_parameters()]
        assert names == PARAM_NAMES + [n for n in EXTRA_NAMES if n in names]

    @torch.no_grad()
    def init_weights(self, generator):
        """N(0,0.02) matrices, wte and wpe, wo/w_down scaled by 1/sqrt(2L), gains 1
        (q_norm, k_norm too).

        Drawn in float32 on the CPU from `generator` and then copied into the
        parameters, so the stored init is exactly float32-representable. The
        padded wte rows (V..Vp-1) are zero (as in llm.c): they get no gradient,
        so they stay zero under AdamW whatever a trainer does with them.
        The extra tensors come last, so they leave the other draws unchanged.
        """
        cfg = self.cfg
        for name, p in self.named_parameters():
            if name in self.extra_init:  # the encoding's (or QK-norm's) own, held in its bounds
                w = self.extra_init[name](p.shape, generator, cfg)
                if name in BOUNDS:
                    w = w.clamp(min=BOUNDS[name][0], max=BOUNDS[name][1])
            elif name.endswith("norm"):
                w = torch.ones(p.shape, dtype=torch.float32)
            else:
                w = torch.randn(p.shape, generator=generator, dtype=torch.float32) * 0.02
                if name in ("wo", "w_down"):
                    w = w / math.sqrt(2 * cfg.L)
                if name == "wte":
                    w[cfg.V:] = 0.0
            p.copy_(w.to(p.dtype))

    def _alphas(self, alpha):
        if isinstance(alpha, (list, tuple)):
            assert len(alpha) == self.cfg.L
            return [float(a) for a in alpha]
        return [float(alpha)] * self.cfg.L

    def rope_tables(self, T, alpha=1.0, offset=0.0):
        """cos, sin of shape (L, T, hd/2) for p_t = alpha_l * t + offset in layer l."""
        cfg = self.cfg
        cache = {}
        for a in self._alphas(alpha):
            if a not in cache:
                cache[a] = rope_cos_sin(T, cfg.hd, a, cfg.rope_base, self.wte.dtype,
                                        self.wte.device, offset, self.angles_fp32)
        alphas = self._alphas(alpha)
        return (torch.stack([cache[a][0] for a in alphas]),
                torch.stack([cache[a][1] for a in alphas]))

    def forward(self, idx, targets=None, alpha=1.0, offset=0.0):
        """idx (B,T) int64. Returns (logits, loss or None); logits are (B,T,Vp) with the
        padded columns at -inf, or (B,T,V) with slice_head.

        alpha: a float (all layers) or a list of L floats (per-layer positions), which the
        encoding's tables read (ENCODINGS): the rotations' positions, the biases' distances
        times alpha, the sinusoids at layer 0's (the embedding is below every layer); the
        learned tables ignore it.
        """
        tables = self.enc.tables(self, idx.shape[1], self._alphas(alpha), offset)
        return self.forward_tables(idx, targets=targets, **tables)

    def fire_bias(self, l, T, alpha):
        """(NH, T, T) FIRE's bias of layer l: f(psi(alpha (i - j)) / psi(max(L, alpha i)))."""
        dt = self.wte.dtype
        dist = distances(T, alpha).to(dt)                                           # (T, T)
        qpos = (torch.tensor(alpha, dtype=torch.float32) * torch.arange(T, dtype=torch.float32)).to(dt)
        c, thresh = self.fire_c[l], self.fire_l_mult[l] * FIRE_LENGTH
        m = torch.where(thresh > qpos, thresh, qpos)  # max(L, i); its derivative goes to L only where L > i
        x = torch.log(c * dist + 1) / torch.log(c * m[:, None] + 1)
        hidden = torch.relu(x[..., None] * self.fire_w1[l] + self.fire_b1[l])      # (T, T, 32)
        return (hidden @ self.fire_w2[l].T).permute(2, 0, 1)                        # (NH, T, T)

    def alibi_tables(self, T, alpha=1.0):
        """(L, NH, T, T) ALiBi logit biases, alpha_l per layer."""
        slopes = alibi_slopes(self.cfg.NH)
        return torch.stack([alibi_bias(T, slopes, a, self.wte.dtype, self.wte.device)
                            for a in self._alphas(alpha)])

    def forward_tables(self, idx, cos=None, sin=None, targets=None, bias=None, pe=None, relb=None, tpe_u=None,
                       wpe=None, untied=None, scale_q=None, scale_k=None):
        """forward() with the encoding's tables given (its tables function, ENCODINGS): cos, sin
        (L, T, hd/2) the rotation of q and k, or None for none; scale_q, scale_k (L, T, hd/2) a
        rotation's scales of queries and keys on its cos and sin (xPos), or None. bias: None or
        (L, NH, T, T) additive attention-logit biases. pe: None or (T, C) added to the embedding,
        itself scaled by sqrt(C) (the sinusoids). wpe: None or (T, C) learned rows added to the
        embedding. relb: None or (L, T, T) the bucket of each distance (Shaw's relative keys).
        tpe_u: None or (L, T) T-PE's input ln(1 + alpha_l d) of each token distance d. untied:
        None or (NH, T, T) TUPE's untied term, with the content term's scale 1/sqrt(2 hd).
        The position schedule lives entirely in these tables (what torch.compile sees
        is static)."""
        cfg = self.cfg
        B, T = idx.shape
        NH, NKV, hd = cfg.NH, cfg.NKV, cfg.hd
        dev = self.wte.device
        x = self.wte[idx]                                  # (B,T,C)
        if pe is not None:  # the sinusoids' papers scale the (tied) embedding by sqrt(C)
            x = x * math.sqrt(cfg.C) + pe
        if wpe is not None:
            x = x + wpe
        for l in range(cfg.L):
            n1 = rmsnorm(x, self.attn_norm[l], cfg.rms_eps)
            q = F.linear(n1, self.wq[l])                   # (B,T,NH*hd)
            k = F.linear(n1, self.wk[l])                   # (B,T,NKV*hd)
            if self.qk_norm:  # over each token's whole q / k vector, before RoPE
                q = rmsnorm(q, self.q_norm[l], cfg.rms_eps)
                k = rmsnorm(k, self.k_norm[l], cfg.rms_eps)
            q = q.view(B, T, NH, hd).transpose(1, 2)
            k = k.view(B, T, NKV, hd).transpose(1, 2)
            v = F.linear(n1, self.wv[l]).view(B, T, NKV, hd).transpose(1, 2)
            if scale_q is not None:  # scaled cos and sin, as torchscale's apply_rotary_pos_emb
                q = apply_rope(q, cos[l] * scale_q[l], sin[l] * scale_q[l])
                k = apply_rope(k, cos[l] * scale_k[l], sin[l] * scale_k[l])
            elif cos is not None:
                q = apply_rope(q, cos[l], sin[l])
                k = apply_rope(k, cos[l], sin[l])
            bl = None if bias is None else bias[l]
            if untied is not None:  # q . k / sqrt(2 hd): the content term's scale
                q = q / math.sqrt(2.0)
                bl = bl + untied
            if relb is not None:  # q_i . r_bucket(i-j) / sqrt(hd), the keys shared by the heads
                bl = torch.einsum("bhtd,tsd->bhts", q, self.rel_key[l][relb[l]]) / math.sqrt(hd)
            if tpe_u is not None:  # q_i . r(u_(i-j)) / sqrt(hd), r = w2 tanh(w1 u + b1)
                keys = torch.tanh(tpe_u[l][:, None] * self.tpe_w1[l] + self.tpe_b1[l]) @ self.tpe_w2[l].T  # (T, hd)
                i = torch.arange(T, device=dev)
                dist = (i[:, None] - i[None, :]).clamp(min=0)  # (T, T), 0 above the diagonal (masked)
                bl = torch.einsum("bhtd,tsd->bhts", q, keys[dist]) / math.sqrt(hd)
            y = self._attention(q, k, v, bl)  # (B,NH,T,hd)
            y = y.transpose(1, 2).reshape(B, T, NH * hd)
            x = x + F.linear(y, self.wo[l])
            n2 = rmsnorm(x, self.mlp_norm[l], cfg.rms_eps)
            h = F.silu(F.linear(n2, self.w_gate[l])) * F.linear(n2, self.w_up[l])
            x = x + F.linear(h, self.w_down[l])
        xf = rmsnorm(x, self.final_norm, cfg.rms_eps)
        if self.slice_head:
            logits = F.linear(xf, self.wte[:cfg.V])        # (B,T,V)
        else:
            logits = F.linear(xf, self.wte)                # (B,T,Vp)
        if cfg.Vp > cfg.V and not self.slice_head:
            mask = torch.arange(cfg.Vp, device=dev) >= cfg.V
            logits = logits.masked_fill(mask, float("-inf"))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))
        return logits, loss

    def _attention(self, q, k, v, bias=None):
        """bias: None or (NH, T, T) added to the scaled logits before the causal mask."""
        cfg = self.cfg
        rep = cfg.NH // cfg.NKV
        if self.attn == "sdpa" and bias is not None:
            T = q.shape[2]
            causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
            mask = bias.masked_fill(~causal, float("-inf"))
            if rep > 1:
                k = k.repeat_interleave(rep, dim=1)
                v = v.repeat_interleave(rep, dim=1)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if self.attn == "sdpa":
            try:
                return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                      enable_gqa=rep > 1)
            except TypeError:  # older torch without enable_gqa
                if rep > 1:
                    k = k.repeat_interleave(rep, dim=1)
                    v = v.repeat_interleave(rep, dim=1)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        # explicit: query head h reads kv head h // rep
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        T = q.shape[2]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(cfg.hd)
        if bias is not None:
            att = att + bias
        causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        att = att.masked_fill(~causal, float("-inf"))
        att = torch.softmax(att, dim=-1)
        return att @ v


# ----------------------------------------------------------------------------
# optimizer, clipping, schedule

@dataclass
class OptConfig:
    lr_max: float = 3e-3
    min_lr: float = 3e-4
    warmup: int = 3
    steps: int = 10
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0


def lr_at(step, oc: OptConfig):
    """Linear warmup to lr_max over `warmup` steps, then cosine to min_lr (0-based step)."""
    if step < oc.warmup:
        return oc.lr_max * (step + 1) / oc.warmup
    r = (step - oc.warmup) / max(1, oc.steps - oc.warmup)
    return oc.min_lr + 0.5 * (oc.lr_max - oc.min_lr) * (1.0 + math.cos(math.pi * r))


def make_optimizer(model, oc: OptConfig, fast=False):
    decay = [p for n, p in model.named_parameters() if n in DECAY_NAMES]
    no_decay = [p for n, p in model.named_parameters() if n not in DECAY_NAMES]
    groups = [{"params": decay, "weight_decay": oc.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=oc.lr_max, betas=(oc.beta1, oc.beta2), eps=oc.eps)
    if fast:
        for extra in ({"fused": True}, {"foreach": True}, {}):
            try:
                return torch.optim.AdamW(groups, **kw, **extra)
            except (RuntimeError, TypeError, ValueError):
                continue
    return torch.optim.AdamW(groups, **kw, foreach=False)


def clip_grads(params, max_norm):
    """Global L2 norm over all grads; if norm > max_norm scale by max_norm/(norm+1e-6).

    Returns the norm before clipping (as a python float).
    """
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(g, dtype=torch.float64) for g in grads]))
    norm_f = float(norm)
    if norm_f > max_norm:
        scale = max_norm / (norm_f + 1e-6)
        for g in grads:
            g.mul_(scale)
    return norm_f


@torch.no_grad()
def apply_bounds(model):
    """Each tensor of BOUNDS the model has held in its [lo, hi] (after an optimizer step)."""
    for name, (lo, hi) in BOUNDS.items():
        if hasattr(model, name):
            getattr(model, name).clamp_(min=lo, max=hi)


def train_step(model, opt, oc: OptConfig, step, micro_batches, alpha):
    """One optimizer step. micro_batches: list of (inputs, targets) (B,T) int64.

    Gradients are the sum over micro-batches of grad(loss_micro / n_micro).
    Returns (mean micro loss, grad norm before clipping, lr).
    """
    opt.zero_grad(set_to_none=True)
    n = len(micro_batches)
    losses = []
    for inp, tgt in micro_batches:
        _, loss = model(inp, tgt, alpha=alpha)
        (loss / n).backward()
        losses.append(loss.detach())
    norm = clip_grads(list(model.parameters()), oc.grad_clip)
    lr = lr_at(step, oc)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.step()
    apply_bounds(model)
    return float(torch.stack(losses).mean()), norm, lr
