"""The Hugging Face parity reference: what transformers' own LlamaForCausalLM computes for an
exported checkpoint, checked by dev/test_hf.py without torch.

Regenerate (needs torch and transformers, e.g. in a scratch environment; mostly the C
trainer's 1000 small steps; byte-identical on rerun with the same trainer build):

    python -m venv /tmp/hfenv && /tmp/hfenv/bin/pip install torch transformers numpy
    make train_gpt_cpu data && /tmp/hfenv/bin/python dev/hf_reference.py   # -> dev/hf_reference.bin

Steps: train a small model with the C trainer (MODEL_FLAGS: V 257, C 64, L 2, NH 4, NKV 2
(GQA), F 128, T 32, 1000 steps of the built-in corpus; or --ckpt CKPT), export it with
dev/export_hf.py once per scaling mapping (s = 8), load each export with
LlamaForCausalLM.from_pretrained (float64 weights, eager attention) and compute the loss
at every position of EVAL_N sequences of 8T tokens of the built-in validation stream, one
full pass each; then greedy-decode 50 tokens with `generate` (KV cache) from the export
without scaling. The prompt is the first of PROMPTS whose greedy path has a top-2 logit
margin of at least 1e-3 at every step, so that fp32 rounding cannot flip a token.

Contents (kind-1 tensor file, dev/tensorfile.py):
    meta.config_i, meta.config_f, meta.state, param.<name>   the checkpoint (weights only)
    eval            int32 (2)      [L_eval, n_sequences]
    scale_factor    f32 (1)        s of every mapping
    tokens          int32 (n*L+1)  the validation stream evaluated
    loss.<mapping>  f32 (L)        transformers' per-position loss (mean over sequences)
    greedy.prompt   int32          end-of-text, then the prompt's bytes
    greedy.tokens   int32 (<= 50)  transformers' greedy continuation (stops at end-of-text)
    greedy.margin   f32 (1)        the smallest top-2 logit margin on that path
    sha256.model    uint64 (4)     SHA-256 of the exported model.safetensors
    sha256.<mapping> uint64 (4)    SHA-256 of that mapping's config.json
so the test knows that the export it checks is the one transformers saw.
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "data"))
import needs  # noqa: E402
import shards  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import torch
    import transformers
    from transformers import LlamaForCausalLM
    import export_hf  # noqa: E402
    import hf_llama as hl  # noqa: E402
    import tensorfile  # noqa: E402

MODEL_FLAGS = ("--n_embd 64 --n_layer 2 --n_head 4 --n_kv_head 2 --ffn_hidden 128 --seq_len 32 --batch_size 16 "
               "--total_batch 16 --steps 1000 --warmup 50 --lr 3e-3 --min_lr 3e-4 --eval_len 0 --val_every 0").split()
SCALE = 8.0
EVAL_N = 4
N_NEW = 50
PROMPTS = ["Lasras looked for the", "The village of", "It was a quiet day", "Mondfes Kaivo is a"]
MAPPINGS = {  # name: export_hf.export keywords (and scale_factor SCALE)
    "none": {},
    "pi": {"scaling": "pi"},
    "ntk": {"scaling": "ntk"},
    "dynamic-ntk": {"scaling": "dynamic-ntk"},
    "ntk-by-parts": {"scaling": "ntk-by-parts"},
    "yarn": {"scaling": "yarn"},
    "yarn-paper": {"scaling": "yarn", "yarn_temperature": "paper"},
}


def load(hf_dir):
    torch.set_num_threads(2)
    return LlamaForCausalLM.from_pretrained(hf_dir, dtype=torch.float64, attn_implementation="eager").eval()


def hf_losses(hf_dir, stream, L, n):
    """transformers' loss at each position, mean over n sequences of L tokens (offsets 0, L, ...)."""
    model = load(hf_dir)
    total = np.zeros(L)
    with torch.no_grad():
        for s in range(n):
            seq = torch.tensor(stream[s * L:s * L + L + 1], dtype=torch.long)
            logp = torch.log_softmax(model(input_ids=seq[None, :L]).logits[0], dim=-1)
            total += -logp[torch.arange(L), seq[1:]].numpy()
    return total / n


def hf_greedy(hf_dir, prompt_ids, n_new=N_NEW):
    """(tokens, smallest top-2 margin) of transformers' greedy decoding (KV cache)."""
    model = load(hf_dir)
    x = torch.tensor([prompt_ids], dtype=torch.long)
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n_new, do_sample=False,
                             output_scores=True, return_dict_in_generate=True)
    top2 = [torch.topk(sc[0], 2).values for sc in out.scores]
    return [int(t) for t in out.sequences[0, len(prompt_ids):]], min(float(v[0] - v[1]) for v in top2)


def sha(path):
    return np.frombuffer(hashlib.sha256(open(path, "rb").read()).digest(), dtype="<u8").copy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", help="a checkpoint to use instead of training one")
    ap.add_argument("--out", default=os.path.join(HERE, "hf_reference.bin"))
    a = ap.parse_args()
    missing.check()
    with tempfile.TemporaryDirectory(prefix="hf_reference_") as tmp:
        ckpt = a.ckpt
        if not ckpt:
            subprocess.run([os.path.join(ROOT, "train_gpt_cpu"), *MODEL_FLAGS, "--threads", "2", "--out_dir", tmp],
                           cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
            ckpt = os.path.join(tmp, "checkpoint.bin")
        ci, cf, state, params = hl.read_checkpoint(ckpt)
        T = ci[hl.CKI["T"]]
        L = 8 * T
        stream = np.array(shards.read_shard(os.path.join(ROOT, "data", "builtin", "val.bin"))[:EVAL_N * L + 1], dtype=np.int32)
        out = [("meta.config_i", np.array(ci, np.int32)), ("meta.config_f", np.array(cf, np.float32)),
               ("meta.state", np.array([s & (2**64 - 1) for s in state], np.uint64))]
        out += [("param." + k, params[k]) for k in hl.PARAM_NAMES]
        out += [("eval", np.array([L, EVAL_N], np.int32)), ("scale_factor", np.array([SCALE], np.float32)),
                ("tokens", stream)]
        hashes = []
        for m in MAPPINGS:
            d = os.path.join(tmp, m)
            kw = dict(MAPPINGS[m], scale_factor=SCALE) if MAPPINGS[m] else {}
            export_hf.export(ckpt, d, **kw)
            loss = hf_losses(d, stream, L, EVAL_N)
            out.append((f"loss.{m}", loss.astype(np.float32)))
            hashes.append((f"sha256.{m}", sha(os.path.join(d, "config.json"))))
            print(f"{m:13s} loss in window {loss[:T].mean():.4f}, past it {loss[T:].mean():.4f}")
        hashes.append(("sha256.model", sha(os.path.join(tmp, "none", "model.safetensors"))))
        for text in PROMPTS:
            prompt = [export_hf.BYTE_EOT] + list(text.encode())
            toks, margin = hf_greedy(os.path.join(tmp, "none"), prompt)
            if margin >= 1e-3:
                break
        else:
            sys.exit("hf_reference.py: every prompt's greedy path has a near tie; add a prompt to PROMPTS")
        print(f"greedy from {text!r}: {bytes(t for t in toks if t < 256)!r} (smallest top-2 margin {margin:.3g})")
        out += [("greedy.prompt", np.array(prompt, np.int32)), ("greedy.tokens", np.array(toks, np.int32)),
                ("greedy.margin", np.array([margin], np.float32))] + hashes
    tensorfile.write(a.out, tensorfile.KIND_REFERENCE, out)
    print(f"wrote {a.out} ({os.path.getsize(a.out)} bytes; torch {torch.__version__}, "
          f"transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
