"""Export a checkpoint as a Hugging Face LlamaForCausalLM folder (numpy only).

    python dev/export_hf.py runs/tiny_rope/checkpoint.bin hf/tiny_rope
    python dev/export_hf.py CKPT OUT_DIR --scaling yarn --scale_factor 8
    python dev/export_hf.py CKPT OUT_DIR --tokenizer_json data/openwebtext/tokenizer.json

Writes OUT_DIR/config.json, model.safetensors (float32: the per-layer slices of the
stacked tensors, the padded vocabulary rows dropped, the head tied to the embedding),
generation_config.json, tokenizer.json and tokenizer_config.json, which
`LlamaForCausalLM.from_pretrained(OUT_DIR)` and `AutoTokenizer.from_pretrained(OUT_DIR)`
load with no custom code. The tokenizer is the byte vocabulary (257 ids, end-of-text 256,
added in front of every encoded text as our documents have it), or with --tokenizer_json
the BPE tokenizer the data was prepared with (data/prepare.py writes it next to the
shards). bos, eos and pad are the end-of-text id.

--scaling writes our evaluation-time RoPE scaling (doc/evaluation.md) as HF's RoPE
parameters: pi -> linear, dynamic-ntk -> dynamic, ntk-by-parts -> yarn with
attention_factor 1, yarn -> yarn (attention_factor 0.1 ln s + 1, or sqrt(1 + 0.1 ln s)
with --yarn_temperature paper), ntk -> rope_theta B * s^(hd/(hd-2)). The window HF's
scalings start from is max_position_embeddings, our training window T. A model trained
with --pos pose --pose_scaling linear or ntk is exported with that scaling (pi, ntk) and
s = --pose_target / T, as the trainer evaluates it; --scaling is refused there. --pose_scaling
yarn (PoSE's revised YaRN, theta / (r s + 1 - r)) is refused: HF's yarn is YaRN's own blend
(theta / s r + theta (1 - r)), another model.

A token embedding scaled by s (meta.embed_scale: sqrt(C), a model trained with the
sinusoids and continued with --pe rope) is folded into the weights, embed_tokens x s and
model.norm's gain / s: exact when s is a power of two (C = 4, 16, 64, 256, ...), refused
otherwise.

Refused, with the reason: models HF's Llama cannot express (--pe nope, alibi,
sinusoidal, learned, erpe, t5, tape, shaw, tpe, tupe; DroPE after its drop step, which is nope; --qk_norm; --pos rfs,
which evaluates at positions of its own; a factor on the embedding that no power of two
folds exactly); a damaged header value it would write. doc/huggingface.md has the details.
"""

import argparse
import json
import math
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "data"))
import needs  # noqa: E402
from prepare import bytes_to_unicode  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import hf_llama as hl  # noqa: E402 (numpy)

SCALINGS = ["none", "pi", "ntk", "dynamic-ntk", "ntk-by-parts", "yarn"]
BYTE_VOCAB, BYTE_EOT, EOT_TEXT = 257, 256, "<|endoftext|>"

WHY_NOT = {  # encodings LlamaForCausalLM has no place for
    "nope": "LlamaForCausalLM always rotates q and k (RoPE) and has no switch to turn it off; a NoPE model "
            "(--pe nope, or DroPE after --drope_step) would get a position encoding it never saw",
    "alibi": "LlamaForCausalLM has no attention biases, so ALiBi's linear distance biases cannot be written "
             "(HF has them only in other architectures, such as BLOOM and MPT)",
    "sinusoidal": "LlamaForCausalLM adds no absolute position embedding to the token embedding",
    "learned": "LlamaForCausalLM has no learned position table (our wpe)",
    "erpe": "LlamaForCausalLM has no attention biases, so a learned bias per distance cannot be written",
    "t5": "LlamaForCausalLM has no attention biases, so T5's bucketed bias cannot be written (HF's T5 has them)",
    "tape": "LlamaForCausalLM adds no absolute position embedding to the token embedding",
    "shaw": "LlamaForCausalLM has no relative key vectors (Shaw et al.'s q . r term)",
    "tpe": "LlamaForCausalLM has no relative key vectors (T-PE's q . h(distance) term)",
    "tupe": "LlamaForCausalLM has no untied position term (TUPE's (p_i U^Q) . (p_j U^K)) and no attention biases",
}


class Refused(Exception):
    pass


def rope_parameters(scaling, s, hd, base, temperature, beta_fast, beta_slow):
    """(rope_theta, rope_scaling) for config.json, rope_scaling None without scaling."""
    if scaling == "none":
        return base, None
    if scaling == "ntk":
        return base * s ** (hd / (hd - 2)), None
    if scaling == "pi":
        return base, {"rope_type": "linear", "factor": s}
    if scaling == "dynamic-ntk":
        return base, {"rope_type": "dynamic", "factor": s}
    if scaling == "ntk-by-parts":
        m = 1.0
    elif temperature == "paper":
        m = math.sqrt(1 + 0.1 * math.log(s))
    else:
        m = 0.1 * math.log(s) + 1 if s > 1 else 1.0
    return base, {"rope_type": "yarn", "factor": s, "attention_factor": m, "beta_fast": beta_fast, "beta_slow": beta_slow}


def byte_tokenizer_json():
    """The byte vocabulary as a `tokenizers` file: id = byte value, 256 = end-of-text, which
    is put in front of every encoded text (the documents of our shards start with it)."""
    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    eot = {"SpecialToken": {"id": EOT_TEXT, "type_id": 0}}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": BYTE_EOT, "content": EOT_TEXT, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": None, "pre_tokenizer": byte_level,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [eot, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [eot, {"Sequence": {"id": "A", "type_id": 0}}, eot, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {EOT_TEXT: {"id": EOT_TEXT, "ids": [BYTE_EOT], "tokens": [EOT_TEXT]}}},
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def token_id(tok, text):
    """The id of `text` in a `tokenizers` JSON (an added token or a vocabulary entry), or None."""
    for t in tok.get("added_tokens", []):
        if t["content"] == text:
            return t["id"]
    vocab = tok.get("model", {}).get("vocab")
    return vocab.get(text) if isinstance(vocab, dict) else None


def check_exportable(ci):
    if ci[hl.CKI["arch"]] != 0:
        raise Refused(f"--arch {hl.ARCH_NAMES[ci[hl.CKI['arch']]]} cannot be exported: LlamaForCausalLM is a transformer")
    pes, poss = hl.pe_names(), hl.pos_names()
    if not (0 <= ci[hl.CKI["pe"]] < len(pes) and 0 <= ci[hl.CKI["pos"]] < len(poss)):
        raise Refused(f"encoding {ci[hl.CKI['pe']]} or scheme {ci[hl.CKI['pos']]} is not one of this trainer's "
                      "(a checkpoint of a newer build?)")
    pe, pos = pes[ci[hl.CKI["pe"]]], poss[ci[hl.CKI["pos"]]]
    if pe != "rope":
        raise Refused(f"--pe {pe} cannot be exported: "
                      f"{WHY_NOT.get(pe, 'LlamaForCausalLM encodes positions by RoPE only')}")
    if ci[hl.CKI["qk_norm"]]:
        raise Refused("--qk_norm cannot be exported: LlamaForCausalLM has no QK-norm (ours RMS-normalizes the whole q "
                      "and k projections, with gains, before RoPE; HF's models with one normalize per head, as Qwen3, "
                      "or put the norms elsewhere in the block, as OLMo-2)")
    if pos == "rfs":
        raise Refused("--pos rfs cannot be exported: RFS evaluates at positions (2t+1)/(2 max(T, n)) * L that depend "
                      "on the input length n; LlamaForCausalLM uses position t (at most one rope_scaling factor)")


# --pose_scaling's interpolations as the evaluation-time scalings they equal (llmc/schedule.h)
POSE_SCALINGS = {"linear": "pi", "ntk": "ntk"}
NO_HF_POSE_SCALING = {"yarn": "PoSE's revised YaRN (theta_j / (r_j s + 1 - r_j)) has no Hugging Face rope type: HF's "
                              "yarn is YaRN's own blend (theta_j / s r_j + theta_j (1 - r_j)), which differs on the "
                              "ramp's frequencies; evaluate the model with the trainer"}


def pose_scaling(flags, T, scaling, scale_factor):
    """(scaling, scale_factor) of the export: a model trained with --pose_scaling carries its
    interpolation, factor --pose_target / T (the trainer evaluates it so); another --scaling
    on top is refused, as the trainer refuses it."""
    ps = flags.get("--pose_scaling", "none")
    if ps == "none":
        return scaling, scale_factor
    if ps in NO_HF_POSE_SCALING:
        raise Refused(f"--pose_scaling {ps} cannot be exported: {NO_HF_POSE_SCALING[ps]}")
    if ps not in POSE_SCALINGS:
        raise Refused(f"--pose_scaling {ps} is not one this exporter knows (a checkpoint of a newer build?)")
    if scaling != "none":
        raise Refused(f"--scaling {scaling}: the checkpoint was trained with --pose_scaling {ps}, which its export "
                      "carries already (factor --pose_target / --seq_len); export it without --scaling")
    target = int(flags.get("--pose_target", "0")) or 8 * T
    return POSE_SCALINGS[ps], target / T


def check_header(ckpt, cf):
    """The header values the export writes, checked for what they can be (the trainer's rules,
    llmc/config.h CKPT_FIELD_TABLE): a damaged one is refused, naming it."""
    for name, v, ok, what in (("rope_base", cf[0], cf[0] > 1 and math.isfinite(cf[0]), "a finite number above 1"),
                              ("rms_eps", cf[1], 0 < cf[1] < 1, "in (0, 1)")):
        if not ok:
            raise Refused(f"{ckpt} is corrupt: meta.config_f {name} is {v:g}; it can be {what}")


def fold_embed_scale(ckpt, C, params):
    """The token embedding's factor s (meta.embed_scale: 1, or sqrt(C) for a model trained with
    the sinusoids and continued with RoPE), which LlamaForCausalLM has no place for, folded into
    the weights it has: embed_tokens = wte * s gives the same residual stream, and the head,
    tied to it, the same logits with model.norm's gain / s. Exact, the same bits through the
    trainer, when s is a power of two (C = 4, 16, 64, 256, ...); another s is refused. Returns
    what was folded, or None for s = 1."""
    e = hl.tensorfile.read(ckpt).get("meta.embed_scale")
    if e is None:
        return None  # a checkpoint from before the factor was kept: 1
    root = float(np.sqrt(np.float32(C)))  # the trainer's sqrtf(C)
    s = float(e.reshape(-1)[0]) if e.dtype == np.float32 and e.size == 1 else None
    if s not in (1.0, root):
        raise Refused(f"{ckpt} is corrupt: meta.embed_scale is {e.reshape(-1)[:2].tolist()}; it can be 1 or "
                      f"sqrt(C) = {root:g}")
    if s == 1.0:
        return None
    f = np.float32(s)
    wte, gain = params["wte"] * f, params["final_norm"] / f
    if math.frexp(s)[0] != 0.5 or not (np.array_equal(wte / f, params["wte"]) and np.array_equal(gain * f, params["final_norm"])):
        raise Refused(f"the token embedding's factor {s:g} (meta.embed_scale: sqrt(C) of a model trained with the "
                      "sinusoids) cannot be exported: LlamaForCausalLM's embedding has no factor, and folding it into "
                      "embed_tokens and model.norm (x s, / s) is exact only for a power of two (C = 4, 16, 64, 256, ...)")
    params["wte"], params["final_norm"] = wte, gain
    return f"the token embedding's factor {s:g} (meta.embed_scale) folded exactly: embed_tokens x {s:g}, model.norm / {s:g}"


def export(ckpt, out_dir, scaling="none", scale_factor=None, yarn_temperature="hf", yarn_beta_fast=32.0,
           yarn_beta_slow=1.0, tokenizer_json=None, eot_token=EOT_TEXT):
    """Writes out_dir; returns (config, a line on what was folded into the weights, or None)."""
    ci, cf, _, params = hl.read_checkpoint(ckpt)
    check_exportable(ci)
    check_header(ckpt, cf)
    V, C, L, NH, NKV, F, T = (ci[hl.CKI[k]] for k in ("V", "C", "L", "NH", "NKV", "F", "T"))
    hd = C // NH
    folded = fold_embed_scale(ckpt, C, params)
    if not (math.isfinite(yarn_beta_fast) and yarn_beta_fast > yarn_beta_slow > 0):
        raise Refused(f"need --yarn_beta_fast > --yarn_beta_slow > 0, got {yarn_beta_fast:g} and {yarn_beta_slow:g}")
    scaling, scale_factor = pose_scaling(hl.checkpoint_flags(ckpt), T, scaling, scale_factor)
    if scaling != "none" and not (scale_factor and 1 <= scale_factor < math.inf):
        raise Refused(f"--scaling {scaling} needs --scale_factor s >= 1, finite (our evaluation's default is L_eval / T)")
    if tokenizer_json:
        with open(tokenizer_json, encoding="utf-8") as f:
            tok = json.load(f)
        eot = token_id(tok, eot_token)
        if eot is None or not 0 <= eot < V:
            raise Refused(f"{tokenizer_json} has no token {eot_token!r} below V={V} (set --eot_token)")
        eot_text = eot_token
    elif V == BYTE_VOCAB:
        tok, eot, eot_text = byte_tokenizer_json(), BYTE_EOT, EOT_TEXT
    else:
        raise Refused(f"V={V} is not the byte vocabulary ({BYTE_VOCAB}): pass --tokenizer_json, the tokenizer the data "
                      "was prepared with (data/prepare.py writes it next to the shards)")
    theta, rope_scaling = rope_parameters(scaling, scale_factor or 1.0, hd, hl.f32_text(cf[0]), yarn_temperature,
                                          yarn_beta_fast, yarn_beta_slow)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": V, "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
        "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": hd, "hidden_act": "silu",
        "max_position_embeddings": T, "rms_norm_eps": hl.f32_text(cf[1]), "rope_theta": theta,
        "rope_scaling": rope_scaling, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": True,
        "bos_token_id": eot, "eos_token_id": eot, "pad_token_id": eot,
        "initializer_range": 0.02, "use_cache": True, "attention_dropout": 0.0, "pretraining_tp": 1,
        "torch_dtype": "float32",
    }
    tensors = []
    for name in hl.PARAM_NAMES:
        p = params[name]
        if name == "wte":
            tensors.append((hl.HF_NAMES[name], p[:V]))  # rows V..Vp-1 are padding
        elif name == "final_norm":
            tensors.append((hl.HF_NAMES[name], p))
        else:
            tensors += [(hl.HF_NAMES[name].format(i=i), p[i]) for i in range(L)]
    os.makedirs(out_dir, exist_ok=True)
    hl.write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, {"format": "pt"})
    files = {
        "config.json": config,
        "generation_config.json": {"bos_token_id": eot, "eos_token_id": eot, "pad_token_id": eot},
        "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": eot_text,
                                  "eos_token": eot_text, "pad_token": eot_text},
    }
    for name, obj in files.items():
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    if tokenizer_json:
        shutil.copyfile(tokenizer_json, os.path.join(out_dir, "tokenizer.json"))
    else:
        with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False)
    return config, folded


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("out_dir")
    ap.add_argument("--scaling", default="none", choices=SCALINGS)
    ap.add_argument("--scale_factor", type=float, help="s of --scaling (required with it)")
    ap.add_argument("--yarn_temperature", default="hf", choices=["hf", "paper"])
    ap.add_argument("--yarn_beta_fast", type=float, default=32.0)
    ap.add_argument("--yarn_beta_slow", type=float, default=1.0)
    ap.add_argument("--tokenizer_json", help="the `tokenizers` file of a BPE vocabulary (default: the byte vocabulary)")
    ap.add_argument("--eot_token", default=EOT_TEXT, help="the end-of-text token of --tokenizer_json")
    a = ap.parse_args()
    missing.check()
    try:
        config, folded = export(a.ckpt, a.out_dir, a.scaling, a.scale_factor, a.yarn_temperature, a.yarn_beta_fast,
                                a.yarn_beta_slow, a.tokenizer_json, a.eot_token)
    except (Refused, ValueError, KeyError, OSError) as e:
        sys.exit(f"export_hf.py: error: {e}")
    if folded:
        print(folded)
    print(f"wrote {a.out_dir}: LlamaForCausalLM V={config['vocab_size']} C={config['hidden_size']} "
          f"L={config['num_hidden_layers']} NH={config['num_attention_heads']} NKV={config['num_key_value_heads']} "
          f"F={config['intermediate_size']} T={config['max_position_embeddings']} rope_theta={config['rope_theta']:g} "
          f"rope_scaling={json.dumps(config['rope_scaling'])}")


if __name__ == "__main__":
    main()
