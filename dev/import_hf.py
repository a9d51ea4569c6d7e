"""Import a Hugging Face Llama-architecture model as a checkpoint (numpy only).

    python dev/import_hf.py HF_DIR CKPT
    python dev/import_hf.py HF_DIR CKPT --seq_len 2048     # the training window to store

HF_DIR holds config.json and model.safetensors (or the shards model.safetensors.index.json
lists; F32, F16, BF16 or F64). CKPT is a weights-only checkpoint (no AdamW moments) that
the trainers evaluate (--resume CKPT --eval_only), sample (--generate) and continue from
with any --pos and --pe (--init_from CKPT: PosAug fine-tuning, DroPE retrofitting), with
no shape flags: the trainers take the shape from the checkpoint.

The window T stored is max_position_embeddings unless --seq_len says otherwise (it is the
window --init_from trains at and the one evaluation calls "in distribution").

Refused, with the reason: another model_type; biases; an activation other than SiLU; a
head_dim other than hidden_size / num_attention_heads, or partial rotary; an untied
lm_head (the project ties the head to wte); rope_scaling (llama3, yarn, ...), unless
--drop_rope_scaling; shapes outside the trainers' limits. doc/huggingface.md.

Bad input stops the import with one line `import_hf.py: error: ...` naming the problem and
exit status 1, no file written: config.json not a JSON object, a key missing, a value not
a positive integer (or number) where one belongs, heads that do not divide; a safetensors
file whose header breaks the format's rules (dev/hf_llama.py, safetensors_layout); CKPT a
folder or in no existing folder; CKPT an existing file, unless --overwrite (a trained
checkpoint would lose its optimizer state and its run). The checkpoint is written through
CKPT.tmp, which a failure removes.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import hf_llama as hl  # noqa: E402

# the trainers' limits (llmc/config.h, llmc/schedule.h)
MAX_VOCAB, MAX_SEQ, MAX_LAYERS, MAX_HEADS, MAX_HEAD_DIM = 1 << 24, 1 << 20, 64, 64, 256
IGNORED = ("rotary_emb.inv_freq",)  # buffers some old checkpoints saved


class Refused(Exception):
    pass


REQUIRED = object()


def _what(v):
    """A config.json value as JSON spells it, and its JSON type."""
    if v is None:
        return "null"
    kind = ("a boolean" if isinstance(v, bool) else "a string" if isinstance(v, str) else "an array"
            if isinstance(v, list) else "an object" if isinstance(v, dict) else "a number")
    text = json.dumps(v)
    return f"{text if len(text) <= 40 else text[:37] + '...'} ({kind})"


def config_int(cfg, key, default=REQUIRED):
    """The positive integer config.json holds at `key` (absent or null: `default`), or Refused
    naming the key and the value."""
    v = cfg.get(key)
    if v is None and default is not REQUIRED:
        return default
    if key not in cfg:
        raise Refused(f'config.json has no "{key}"')
    if not isinstance(v, int) or isinstance(v, bool):
        raise Refused(f'config.json: "{key}" is {_what(v)}, not an integer')
    if v < 1:
        raise Refused(f'config.json: "{key}" is {v}; it must be a positive integer')
    return v


def config_float(obj, key, default, where=""):
    """The finite number at `key` of config.json (or of its object `where`), `default` when absent."""
    v = obj.get(key)
    if v is None:
        return default
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        raise Refused(f'config.json: "{where}{key}" is {_what(v)}, not a finite number')
    return float(v)


def config_object(cfg, key):
    v = cfg.get(key)
    if v is not None and not isinstance(v, dict):
        raise Refused(f'config.json: "{key}" is {_what(v)}, not an object')
    return v or {}


def rope_of(cfg):
    """(rope_theta, rope_type, partial_rotary_factor): transformers 5 writes rope_parameters,
    older versions rope_theta and rope_scaling."""
    rp, rs = config_object(cfg, "rope_parameters"), config_object(cfg, "rope_scaling")
    theta = config_float(rp, "rope_theta", None, "rope_parameters.")
    theta = config_float(cfg, "rope_theta", 10000.0) if theta is None else theta
    kind = rs.get("rope_type", rs.get("type")) or rp.get("rope_type", "default")
    partial = config_float(rp, "partial_rotary_factor", None, "rope_parameters.")
    return theta, kind, config_float(cfg, "partial_rotary_factor", 1.0) if partial is None else partial


def model_of(cfg, seq_len, drop_rope_scaling):
    """[V, C, L, NH, NKV, F, T], rope_theta, rms_eps from config.json, or Refused."""
    if not isinstance(cfg, dict):
        raise Refused(f"config.json is {_what(cfg)}, not a JSON object")
    if cfg.get("model_type") != "llama":
        raise Refused(f"model_type {cfg.get('model_type')!r}: only Llama ('llama') maps onto our model")
    if cfg.get("hidden_act", "silu") != "silu":
        raise Refused(f"hidden_act {cfg['hidden_act']!r}: our MLP is SwiGLU (silu)")
    for bias in ("attention_bias", "mlp_bias"):
        if cfg.get(bias):
            raise Refused(f"{bias} is true: our model has no biases")
    V, C, L = config_int(cfg, "vocab_size"), config_int(cfg, "hidden_size"), config_int(cfg, "num_hidden_layers")
    NH, F = config_int(cfg, "num_attention_heads"), config_int(cfg, "intermediate_size")
    NKV = config_int(cfg, "num_key_value_heads", NH)
    T = seq_len if seq_len is not None else config_int(cfg, "max_position_embeddings", 2048)
    if C % NH:
        raise Refused(f"hidden_size {C} is not a multiple of num_attention_heads {NH}")
    hd = C // NH
    if config_int(cfg, "head_dim", hd) != hd:
        raise Refused(f"head_dim {cfg['head_dim']} is not hidden_size / num_attention_heads = {hd}: our head dim "
                      "is n_embd / n_head")
    theta, kind, partial = rope_of(cfg)
    if partial != 1.0:
        raise Refused(f"partial_rotary_factor {partial}: our RoPE rotates the whole head")
    if kind != "default" and not drop_rope_scaling:
        raise Refused(f"rope_scaling {kind!r}: our checkpoint stores plain RoPE (base {theta:g}) only; pass "
                      "--drop_rope_scaling to import the weights with plain RoPE (the model then is not the same "
                      "past its window; DroPE removes RoPE anyway)")
    eps = config_float(cfg, "rms_norm_eps", 1e-6)
    checks = [(NH % NKV == 0, f"num_attention_heads {NH} is not a multiple of num_key_value_heads {NKV}"),
              (hd % 2 == 0 and hd <= MAX_HEAD_DIM, f"head dim {hd} must be even and at most {MAX_HEAD_DIM}"),
              (2 <= V <= MAX_VOCAB, f"vocab_size {V} must lie in [2, {MAX_VOCAB}]"),
              (1 <= L <= MAX_LAYERS, f"num_hidden_layers {L} must lie in [1, {MAX_LAYERS}]"),
              (NH <= MAX_HEADS, f"num_attention_heads {NH} exceeds {MAX_HEADS}"),
              (1 <= F <= MAX_SEQ, f"intermediate_size {F} must lie in [1, {MAX_SEQ}]"),
              (1 <= T <= MAX_SEQ, f"the window {T} must lie in [1, {MAX_SEQ}] (set --seq_len)"),
              (theta > 1, f"rope_theta {theta} must be > 1"),
              (eps > 0, f"rms_norm_eps {eps} must be > 0")]
    for ok, why in checks:
        if not ok:
            raise Refused(why)
    return [V, C, L, NH, NKV, F, T], theta, eps


def read_config(hf_dir):
    """config.json of a model folder as a dict, or Refused."""
    if not os.path.isdir(hf_dir):
        raise Refused(f"{hf_dir} is not a folder (a Hugging Face model folder: config.json, model.safetensors)")
    path = os.path.join(hf_dir, "config.json")
    if not os.path.isfile(path):
        raise Refused(f"{hf_dir} has no config.json (not a Hugging Face model folder)")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, RecursionError) as e:
        raise Refused(f"{path} is not JSON ({type(e).__name__}: {e})") from None


def check_target(ckpt):
    """Refused when the checkpoint file `ckpt` cannot be written (before reading any weights)."""
    if os.path.isdir(ckpt):
        raise Refused(f"{ckpt} is a folder: name the checkpoint file to write, e.g. "
                      f"{os.path.join(ckpt, 'checkpoint.bin')}")
    parent = os.path.dirname(ckpt) or "."
    if not os.path.isdir(parent):
        raise Refused(f"cannot write {ckpt}: {parent} is not an existing folder")


def import_hf(hf_dir, ckpt, seq_len=None, seed=42, drop_rope_scaling=False):
    cfg = read_config(hf_dir)
    (V, C, L, NH, NKV, F, T), theta, eps = model_of(cfg, seq_len, drop_rope_scaling)
    check_target(ckpt)
    hd = C // NH
    w = {k: v for k, v in hl.read_hf_weights(hf_dir).items() if not k.endswith(IGNORED)}
    head = w.pop("lm_head.weight", None)
    if head is not None and not np.array_equal(head, w.get(hl.HF_NAMES["wte"])):
        raise Refused("the model has its own lm_head (untied from embed_tokens): our parameter contract ties the "
                      "head to wte on both trainers, so an untied head cannot be imported (doc/huggingface.md)")
    if head is None and cfg.get("tie_word_embeddings") is False:
        raise Refused("tie_word_embeddings is false but there is no lm_head.weight")
    shapes = {"wte": (V, C), "attn_norm": (C,), "wq": (NH * hd, C), "wk": (NKV * hd, C), "wv": (NKV * hd, C),
              "wo": (C, NH * hd), "mlp_norm": (C,), "w_gate": (F, C), "w_up": (F, C), "w_down": (C, F),
              "final_norm": (C,)}
    params = {}
    for name, pattern in hl.HF_NAMES.items():
        per_layer = "{i}" in pattern
        parts = []
        for i in range(L if per_layer else 1):
            key = pattern.format(i=i)
            if key not in w:
                raise Refused(f"{hf_dir}: no tensor {key}")
            a = w.pop(key)
            if a.shape != shapes[name]:
                raise Refused(f"{key} has shape {list(a.shape)}, config.json implies {list(shapes[name])}")
            if not np.all(np.isfinite(a)):
                raise Refused(f"{key} holds NaN or Inf")
            parts.append(a)
        params[name] = np.stack(parts) if per_layer else parts[0]
    if w:
        raise Refused(f"tensors our model has no place for: {', '.join(sorted(w)[:5])}{' ...' if len(w) > 5 else ''}")
    params["wte"] = np.concatenate([params["wte"], np.zeros((hl.padded_vocab(V) - V, C), np.float32)])
    ci = [V, hl.padded_vocab(V), C, L, NH, NKV, F, T, 0, 0, 0, 0, 0]  # --pos rope, --pe rope, no QK-norm, no wpe, a transformer
    cf = [theta, eps, *hl.DEFAULT_ALPHAS]
    try:  # through ckpt.tmp, which a failure removes (tensorfile.write_atomic)
        hl.write_checkpoint(ckpt, ci, cf, [0, seed, 0, 0, 0], params)
    except OSError as e:
        raise Refused(f"cannot write {ckpt}: {e.strerror or e}") from None
    return ci, cf


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("hf_dir")
    ap.add_argument("ckpt")
    ap.add_argument("--seq_len", type=int, help="the window T to store (default: max_position_embeddings)")
    ap.add_argument("--seed", type=int, default=42, help="the seed stored (what --eval_only adopts)")
    ap.add_argument("--drop_rope_scaling", action="store_true", help="import a model with rope_scaling as plain RoPE")
    ap.add_argument("--overwrite", action="store_true", help="replace CKPT when it exists")
    a = ap.parse_args()
    if not -2**63 <= a.seed < 2**63:  # the trainer's --seed: a 64-bit integer
        sys.exit(f"import_hf.py: error: --seed {a.seed} is out of range (a 64-bit integer, as the trainer's --seed)")
    if os.path.lexists(a.ckpt) and not os.path.isdir(a.ckpt) and not a.overwrite:
        sys.exit(f"import_hf.py: error: {a.ckpt} exists (a checkpoint would lose its weights, moments and run): "
                 "choose another path, or pass --overwrite to replace it")
    missing.check()
    try:
        ci, cf = import_hf(a.hf_dir, a.ckpt, a.seq_len, a.seed, a.drop_rope_scaling)
    except (Refused, ValueError, KeyError, OSError) as e:
        sys.exit(f"import_hf.py: error: {e}")
    V, Vp, C, L, NH, NKV, F, T = ci[:8]
    print(f"wrote {a.ckpt}: V={V} (padded {Vp}) C={C} L={L} NH={NH} NKV={NKV} F={F} T={T} rope_base={cf[0]:g} "
          f"rms_eps={cf[1]:g}")


if __name__ == "__main__":
    main()
