"""Tests for the Hugging Face interop (dev/export_hf.py, dev/import_hf.py; doc/huggingface.md).

    python dev/test_hf.py          # part of make test; needs numpy (and `tokenizers` for one test)

Without torch: the round trip CKPT -> HF -> CKPT is bit-identical; the export of the
reference model is byte for byte the one transformers evaluated (dev/hf_reference.bin);
the C trainer's per-position losses with every scaling mapping and its greedy tokens
equal what transformers computed; every refusal; bad input (safetensors headers breaking
the format's rules, malformed config.json values, a folder as the target, a failed write)
stops dev/import_hf.py with one line and exit 1, no traceback, no .tmp left. When torch
and transformers import (a scratch environment, not the project's .venv), the live tests
also run transformers on fresh exports and on an imported non-preset model continued with
--pos posaug; otherwise they SKIP. Prints PASS/FAIL/SKIP per test and "N passed, N failed, N skipped"; exits 1 on
a failure.
"""
import atexit
import hashlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "data"))
from testkit import Skip, Suite  # noqa: E402
try:
    import numpy as np
    import export_hf
    import hf_llama as hl
    import import_hf
    import shards
    import tensorfile
except ImportError as e:  # python3 without numpy: every test skips
    np, MISSING = None, str(e)

TRAINER = os.path.join(ROOT, os.environ.get("TRAINER", "train_gpt_cpu"))
REF_PATH = os.path.join(HERE, "hf_reference.bin")
TOL = 1e-4  # |loss difference| at any position; about 1e-5 measured (fp32 C against float64 transformers)
MAPPINGS = ["none", "pi", "ntk", "dynamic-ntk", "ntk-by-parts", "yarn", "yarn-paper"]  # dev/hf_reference.py's
SMALL = ("--n_embd 32 --n_layer 2 --n_head 4 --n_kv_head 2 --ffn_hidden 64 --seq_len 32 --batch_size 2 "
         "--total_batch 4 --warmup 1 --eval_len 0 --val_every 0").split()
SUITE = Suite()
test = SUITE.test


_tmp = []


def path(*parts):
    if not _tmp:
        _tmp.append(tempfile.mkdtemp(prefix="test_hf_"))
        atexit.register(shutil.rmtree, _tmp[0], True)
    p = os.path.join(_tmp[0], *parts)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


def folder(*parts):
    return os.path.dirname(path(*parts, "x"))


def trainer(*args):
    r = subprocess.run([TRAINER, "--threads", "2", *map(str, args)], cwd=ROOT, capture_output=True, timeout=600)
    out = (r.stdout + r.stderr).decode("utf-8", "replace")
    assert r.returncode == 0, f"train_gpt_cpu {' '.join(map(str, args))} failed (exit {r.returncode}): {out[-1500:]}"
    return r.stdout


_ref = {}


def ref():
    """dev/hf_reference.bin, and made from it once: its checkpoint, the validation shard, the
    export without scaling and that export imported again."""
    if not _ref:
        r = tensorfile.read(REF_PATH)
        params = {k[len("param."):]: v for k, v in r.items() if k.startswith("param.")}
        hl.write_checkpoint(path("ref", "ckpt.bin"), [int(x) for x in r["meta.config_i"]],
                            [float(x) for x in r["meta.config_f"]], [int(x) for x in r["meta.state"]], params)
        shards.write_shard(path("ref", "val.bin"), [int(x) for x in r["tokens"]], 257)
        export_hf.export(path("ref", "ckpt.bin"), path("ref", "hf", "none"))
        import_hf.import_hf(path("ref", "hf", "none"), path("ref", "reimported.bin"))
        assert sorted(k[5:] for k in r if k.startswith("loss.")) == sorted(MAPPINGS), "the reference's mappings changed"
        _ref.update(r)
    return _ref


def scale(m):
    """(export_hf.export keywords, the trainer's flags) of a mapping, s from the reference."""
    s = float(ref()["scale_factor"][0])
    if m == "none":
        return {}, []
    if m == "yarn-paper":
        return ({"scaling": "yarn", "yarn_temperature": "paper", "scale_factor": s},
                ["--scaling", "yarn", "--yarn_temperature", "paper", "--scale_factor", s])
    return {"scaling": m, "scale_factor": s}, ["--scaling", m, "--scale_factor", s]


def exported(m):
    d = path("ref", "hf", m)
    if not os.path.exists(os.path.join(d, "config.json")):
        export_hf.export(path("ref", "ckpt.bin"), d, **scale(m)[0])
    return d


def c_losses(ckpt, m, tag):
    """The C trainer's per-position losses of the reference sequences: --eval_only with no
    shape flag (the checkpoint's model is used)."""
    L, n = (int(x) for x in ref()["eval"])
    out_dir = folder("eval")
    trainer("--resume", ckpt, "--eval_only", "--eval_len", L, "--eval_n", n, "--gain_window", 0, "--val_data",
            path("ref", "val.bin"), "--out_dir", out_dir, "--eval_tag", tag, *scale(m)[1])
    return np.loadtxt(os.path.join(out_dir, tag + ".csv"), delimiter=",", skiprows=1)[:, 1]


def c_greedy(ckpt, prompt_ids, n_new):
    """The C trainer's greedy continuation (--generate) as the bytes it prints."""
    prompt = bytes(prompt_ids[1:])  # after the end-of-text the trainer puts first
    out = trainer("--resume", ckpt, "--steps", 0, "--generate", n_new, "--prompt", prompt.decode())
    text = out[out.index(b"\n", out.index(b"\nmodel ") + 1) + 1:]
    assert text.startswith(prompt), text[:100]
    return text[len(prompt):]


def as_bytes(tokens):
    return b"".join(bytes([t]) if t < 256 else b"<|endoftext|>" for t in tokens)


def sha(p):
    return np.frombuffer(hashlib.sha256(open(p, "rb").read()).digest(), dtype="<u8")


def refused(fn, *words):
    try:
        fn()
    except (export_hf.Refused, import_hf.Refused) as e:
        for w in words:
            assert w in str(e), f"refusal {str(e)!r} lacks {w!r}"
        return
    raise AssertionError("not refused")


def small_checkpoint(name, *flags):
    d = folder(name)
    trainer(*SMALL, *flags, "--out_dir", d)
    return os.path.join(d, "checkpoint.bin")


# ---- a Llama folder made with numpy: a shape that is none of our presets -------------------

HF_CFG = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=300, hidden_size=96,
              intermediate_size=200, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
              max_position_embeddings=48, rms_norm_eps=1e-6, rope_theta=50000.0, tie_word_embeddings=True,
              hidden_act="silu")


def hf_tensors(cfg, seed=0):
    """Random Llama weights in HF's names, float32 values that bfloat16 holds exactly."""
    rng = np.random.default_rng(seed)
    C, F, hd = cfg["hidden_size"], cfg["intermediate_size"], cfg["hidden_size"] // cfg["num_attention_heads"]
    shapes = {"wte": (cfg["vocab_size"], C), "attn_norm": (C,), "wq": (C, C), "wk": (cfg["num_key_value_heads"] * hd, C),
              "wv": (cfg["num_key_value_heads"] * hd, C), "wo": (C, C), "mlp_norm": (C,), "w_gate": (F, C),
              "w_up": (F, C), "w_down": (C, F), "final_norm": (C,)}
    out = {}
    for name, pattern in hl.HF_NAMES.items():
        for i in range(cfg["num_hidden_layers"] if "{i}" in pattern else 1):
            a = (1 + 0.1 * rng.standard_normal(shapes[name])) if "norm" in name else 0.05 * rng.standard_normal(shapes[name])
            out[pattern.format(i=i)] = (a.astype(np.float32).view(np.uint32) & 0xFFFF0000).view(np.float32)
    return out


def write_st(p, tensors, dtype):
    """A safetensors file in F32 or BF16, written here independently of hf_llama's writer."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        b = (a.view(np.uint32) >> 16).astype("<u2").tobytes() if dtype == "BF16" else a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def hf_folder(name, cfg=None, tensors=None, dtype="F32", n_files=1):
    cfg = dict(HF_CFG, **(cfg or {}))
    tensors = hf_tensors(cfg) if tensors is None else tensors
    d = folder(name)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    names = list(tensors)
    if n_files == 1:
        write_st(os.path.join(d, "model.safetensors"), tensors, dtype)
        return d, tensors
    weight_map = {}
    for k in range(n_files):
        part = f"model-{k + 1:05d}-of-{n_files:05d}.safetensors"
        write_st(os.path.join(d, part), {n: tensors[n] for n in names[k::n_files]}, dtype)
        weight_map.update({n: part for n in names[k::n_files]})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return d, tensors


# ---- without torch -----------------------------------------------------------------------

@test
def scheme_names_come_from_the_trainer():
    """hf_llama.py reads the index -> name tables (a checkpoint stores --pos and --pe as indices)
    from the trainer's --describe; they are the lists --help prints (llmc/schedule.h's POS_TABLE
    and PE_TABLE), and --describe's tensors are the ones a checkpoint holds."""
    r = subprocess.run([TRAINER, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    listed, flag = {"--pos": [], "--pe": []}, None
    for line in r.stdout.splitlines():
        m = re.match(r"  (--\S+) ", line)
        if m:
            flag = m.group(1)
        elif flag in listed and re.match(r" {21}\S", line):
            listed[flag].append(line.split()[0])
    assert listed["--pos"] == hl.pos_names() and len(listed["--pos"]) >= 11, \
        f"--pos lists {listed['--pos']}, --describe {hl.pos_names()}"
    assert listed["--pe"] == hl.pe_names() and len(listed["--pe"]) >= 5, f"--pe lists {listed['--pe']}, --describe {hl.pe_names()}"
    ck = small_checkpoint("describe", "--steps", 1)
    _, _, _, params = hl.read_checkpoint(ck)
    described = [t["name"] for t in hl.trainer_tables()["tensors"]]
    assert set(params) <= set(described) and set(hl.PARAM_NAMES) <= set(described), \
        f"checkpoint tensors {sorted(params)}, --describe {described}"


@test
def roundtrip_bit_identical():
    ck = small_checkpoint("rt", "--steps", 2, "--seed", 7)  # AdamW moments, GQA, a non-preset shape
    export_hf.export(ck, folder("rt", "hf1"))
    import_hf.import_hf(path("rt", "hf1"), path("rt", "back.bin"), seed=7)
    a, b = hl.read_checkpoint(ck), hl.read_checkpoint(path("rt", "back.bin"))
    assert a[0][:8] == b[0][:8] and a[1][:2] == b[1][:2] and a[2][1] == b[2][1], (a[:3], b[:3])
    for name in hl.PARAM_NAMES:
        assert a[3][name].tobytes() == b[3][name].tobytes(), f"param.{name} changed"
    csv = []
    for c, tag in ((ck, "orig"), (path("rt", "back.bin"), "back")):
        trainer("--resume", c, "--eval_only", "--eval_len", 96, "--eval_n", 2, "--gain_window", 16, "--out_dir",
                folder("rt"), "--eval_tag", tag)
        csv.append(open(path("rt", tag + ".csv"), "rb").read())
    assert csv[0] == csv[1], "the trainer evaluates the round-tripped checkpoint differently"
    export_hf.export(path("rt", "back.bin"), folder("rt", "hf2"))
    import_hf.import_hf(path("rt", "hf2"), path("rt", "back2.bin"), seed=7)
    for x, y in (("hf1/model.safetensors", "hf2/model.safetensors"), ("back.bin", "back2.bin")):
        assert open(path("rt", x), "rb").read() == open(path("rt", y), "rb").read(), f"{x} and {y} differ"
    return "11 parameter tensors bit-identical, evaluation CSV byte-identical, HF -> CKPT -> HF -> CKPT files identical"


@test
def export_is_what_transformers_evaluated():
    r = ref()
    why = "the export differs from the one dev/hf_reference.bin was made from: regenerate the reference (its docstring)"
    assert np.array_equal(sha(os.path.join(exported("none"), "model.safetensors")), r["sha256.model"]), why
    for m in MAPPINGS:
        assert np.array_equal(sha(os.path.join(exported(m), "config.json")), r[f"sha256.{m}"]), f"{m}: {why}"


def losses_test(m):
    def fn():
        got = c_losses(path("ref", "reimported.bin"), m, m)
        d = float(np.abs(got - ref()[f"loss.{m}"]).max())
        assert d < TOL, f"max |loss diff| {d:.3g} >= {TOL}"
        return f"max |loss diff| {d:.2e} over {len(got)} positions (8x the window)"
    fn.__name__ = f"losses_match_transformers_{m.replace('-', '_')}"
    return fn


for _m in MAPPINGS:
    test(losses_test(_m))


@test
def greedy_matches_transformers():
    r = ref()
    want = as_bytes(int(t) for t in r["greedy.tokens"])
    got = c_greedy(path("ref", "reimported.bin"), [int(t) for t in r["greedy.prompt"]], 50)
    assert got.startswith(want), f"C {got[:len(want)]!r} vs transformers {want!r}"
    return f"{len(r['greedy.tokens'])} tokens: {want.decode('utf-8', 'replace')!r}"


@test
def export_config_per_scaling():
    s, lns = 8.0, math.log(8.0)
    yarn = {"rope_type": "yarn", "factor": s, "beta_fast": 32.0, "beta_slow": 1.0}
    want = {"none": (10000.0, None), "pi": (10000.0, {"rope_type": "linear", "factor": s}),
            "ntk": (10000.0 * s ** (16 / 14), None), "dynamic-ntk": (10000.0, {"rope_type": "dynamic", "factor": s}),
            "ntk-by-parts": (10000.0, dict(yarn, attention_factor=1.0)),
            "yarn": (10000.0, dict(yarn, attention_factor=0.1 * lns + 1)),
            "yarn-paper": (10000.0, dict(yarn, attention_factor=math.sqrt(1 + 0.1 * lns)))}
    for m, (theta, rs) in want.items():
        with open(os.path.join(exported(m), "config.json")) as f:
            cfg = json.load(f)
        assert cfg["rope_theta"] == theta and cfg["rope_scaling"] == rs, (m, cfg["rope_theta"], cfg["rope_scaling"])
        fixed = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=257, hidden_size=64,
                     intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=16, max_position_embeddings=32, rms_norm_eps=1e-05, tie_word_embeddings=True,
                     bos_token_id=256, eos_token_id=256, pad_token_id=256, attention_bias=False, mlp_bias=False)
        assert all(cfg[k] == v for k, v in fixed.items()), {k: cfg.get(k) for k in fixed}
    d = exported("none")
    with open(os.path.join(d, "generation_config.json")) as f:
        assert json.load(f) == {"bos_token_id": 256, "eos_token_id": 256, "pad_token_id": 256}
    with open(os.path.join(d, "model.safetensors"), "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    names = {hl.HF_NAMES[k].format(i=i) for k in hl.PARAM_NAMES for i in range(2)}
    assert set(header) - {"__metadata__"} == names, "tensor names (no lm_head: tied)"
    assert header["__metadata__"] == {"format": "pt"} and header["model.embed_tokens.weight"]["shape"] == [257, 64]
    assert all(h["dtype"] == "F32" for k, h in header.items() if k != "__metadata__")


@test
def byte_tokenizer():
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise Skip("needs the tokenizers package (dev/requirements.txt)")
    ref()
    tok = Tokenizer.from_file(os.path.join(exported("none"), "tokenizer.json"))
    text = "Caf\u00e9 \u65e5\u672c \U0001F600\n\tx\x00 <b>"
    ids = tok.encode(text).ids
    assert ids == [256] + list(text.encode()), ids[:20]
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok.token_to_id("<|endoftext|>") == 256 and tok.get_vocab_size() == 257


@test
def import_non_preset_bf16_shards():
    d, tensors = hf_folder("np", dtype="BF16", n_files=3)
    ck = path("np", "ckpt.bin")
    ci, cf = import_hf.import_hf(d, ck)
    assert ci == [300, 384, 96, 3, 6, 2, 200, 48, 0, 0, 0, 0, 0] and cf[:2] == [50000.0, 1e-6], (ci, cf)
    params = hl.read_checkpoint(ck)[3]
    assert np.array_equal(params["wte"][:300], tensors["model.embed_tokens.weight"]) and not params["wte"][300:].any()
    assert np.array_equal(params["wk"][2], tensors["model.layers.2.self_attn.k_proj.weight"])
    out = trainer("--resume", ck, "--eval_only", "--eval_len", 96, "--eval_n", 2, "--gain_window", 16,
                  "--out_dir", os.path.dirname(ck)).decode()
    assert "C=96 L=3 NH=6 NKV=2 hd=16 F=200 T=48" in out and "cliff" in out, out[-800:]
    export_hf.export(ck, folder("np", "hf"), tokenizer_json=write_bpe_json())
    back = hl.read_safetensors(path("np", "hf", "model.safetensors"))
    assert set(back) == set(tensors) and all(np.array_equal(back[k], tensors[k]) for k in tensors)
    assert import_hf.import_hf(d, path("np", "t64.bin"), seq_len=64)[0][7] == 64
    return "V 300, C 96, L 3, NH 6, NKV 2, F 200, T 48, base 5e4, eps 1e-6: imported, evaluated, exported back"


def write_bpe_json():
    """A minimal BPE `tokenizers` file whose end-of-text is id 3."""
    p = path("bpe", "tokenizer.json")
    tok = {"version": "1.0", "added_tokens": [{"id": 3, "content": "<|endoftext|>", "special": True}],
           "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3}, "merges": ["a b"]}}
    with open(p, "w") as f:
        json.dump(tok, f)
    return p


@test
def export_bpe_tokenizer():
    ck = path("np", "ckpt.bin")
    if not os.path.exists(ck):
        import_hf.import_hf(hf_folder("np")[0], ck)
    refused(lambda: export_hf.export(ck, folder("bpe", "no")), "V=300 is not the byte vocabulary", "--tokenizer_json")
    cfg, _ = export_hf.export(ck, folder("bpe", "hf"), tokenizer_json=write_bpe_json())
    assert (cfg["bos_token_id"], cfg["eos_token_id"], cfg["pad_token_id"]) == (3, 3, 3)
    assert open(path("bpe", "hf", "tokenizer.json"), "rb").read() == open(write_bpe_json(), "rb").read()
    refused(lambda: export_hf.export(ck, folder("bpe", "eot"), tokenizer_json=write_bpe_json(), eot_token="</s>"),
            "has no token '</s>'")


# every encoding LlamaForCausalLM cannot express: a checkpoint of the trainer, refused with the reason
EXPORT_REFUSALS = [
    ("nope", ["--pe", "nope"], "--pe nope cannot be exported: LlamaForCausalLM always rotates q and k"),
    ("drope", ["--drope_step", "1"], "--pe nope cannot be exported"),
    ("alibi", ["--pe", "alibi"], "--pe alibi cannot be exported: LlamaForCausalLM has no attention biases"),
    ("sinusoidal", ["--pe", "sinusoidal"], "--pe sinusoidal cannot be exported: LlamaForCausalLM adds no absolute"),
    ("learned", ["--pe", "learned"], "--pe learned cannot be exported: LlamaForCausalLM has no learned position table"),
    ("erpe", ["--pe", "erpe"], "--pe erpe cannot be exported: LlamaForCausalLM has no attention biases"),
    ("t5", ["--pe", "t5"], "--pe t5 cannot be exported: LlamaForCausalLM has no attention biases"),
    ("tape", ["--pe", "tape"], "--pe tape cannot be exported: LlamaForCausalLM adds no absolute"),
    ("shaw", ["--pe", "shaw"], "--pe shaw cannot be exported: LlamaForCausalLM has no relative key vectors"),
    ("tpe", ["--pe", "tpe"], "--pe tpe cannot be exported: LlamaForCausalLM has no relative key vectors"),
    ("tupe", ["--pe", "tupe"], "--pe tupe cannot be exported: LlamaForCausalLM has no untied position term"),
    ("qk_norm", ["--qk_norm"], "--qk_norm cannot be exported: LlamaForCausalLM has no QK-norm"),
    ("rfs", ["--pos", "rfs"], "--pos rfs cannot be exported: RFS evaluates at positions"),
    ("gru", ["--arch", "gru"], "--arch gru cannot be exported: LlamaForCausalLM is a transformer"),
]


def export_refusal_test(name, flags, words):
    def fn():
        ck = small_checkpoint("refuse_" + name, "--steps", 2, *flags)
        refused(lambda: export_hf.export(ck, folder("refuse_" + name, "hf")), words)
        assert not os.path.exists(path("refuse_" + name, "hf", "model.safetensors")), "wrote files before refusing"
    fn.__name__ = f"export_refuses_{name}"
    return fn


for _r in EXPORT_REFUSALS:
    test(export_refusal_test(*_r))


@test
def export_refuses_scaling_without_factor():
    ref()
    refused(lambda: export_hf.export(path("ref", "ckpt.bin"), folder("nofactor"), scaling="yarn"),
            "--scaling yarn needs --scale_factor")


@test
def export_carries_pose_scaling():
    """A --pos pose --pose_scaling model exports with its interpolation at s = --pose_target / T:
    the config equals the export of the same weights with that --scaling (whose losses
    losses_match_transformers_* compare with transformers); --scaling on top is refused, and so
    is --pose_scaling yarn (PoSE's revised YaRN, which HF's yarn is not)."""
    for ps, sc in export_hf.POSE_SCALINGS.items():
        ck = small_checkpoint("pose_" + ps, "--steps", 2, "--pos", "pose", "--pose_target", 256, "--pose_scaling", ps)
        with open(os.path.join(export_hf_dir(ck, "pose_" + ps + "_hf"), "config.json")) as f:
            got = json.load(f)
        plain = path("pose_" + ps + "_weights.bin")  # the same weights, no --pose_scaling in its flags
        hl.write_checkpoint(plain, *hl.read_checkpoint(ck))
        with open(os.path.join(export_hf_dir(plain, "pose_" + ps + "_as", scaling=sc, scale_factor=8.0), "config.json")) as f:
            want = json.load(f)
        assert got == want and (got["rope_scaling"] or got["rope_theta"] != 10000.0), (ps, got["rope_scaling"])
        refused(lambda: export_hf.export(ck, folder("pose_refused"), scaling="pi", scale_factor=8.0),
                "--pose_scaling " + ps, "without --scaling")
    ck = small_checkpoint("pose_yarn", "--steps", 2, "--pos", "pose", "--pose_target", 256, "--pose_scaling", "yarn")
    refused(lambda: export_hf.export(ck, folder("pose_refused_yarn")), "--pose_scaling yarn cannot be exported",
            "revised YaRN")
    return "linear, ntk at s = 8: the configs of --scaling pi, ntk; PoSE's revised YaRN refused"


def scaled_embedding_checkpoint(name, C):
    """A RoPE model whose token embedding keeps the factor sqrt(C) of its start with the
    sinusoids (--pe sinusoidal for 2 steps, resumed with --pe rope for 1 more)."""
    shape = ["--n_embd", C, "--n_head", 4, "--n_kv_head", 2]
    sin = small_checkpoint(name + "_sin", "--steps", 2, "--pe", "sinusoidal", *shape)
    d = folder(name)
    trainer("--resume", sin, "--pe", "rope", "--steps", 3, "--out_dir", d)
    ck = os.path.join(d, "checkpoint.bin")
    s = float(tensorfile.read(ck)["meta.embed_scale"][0])
    assert s == float(np.sqrt(np.float32(C))), f"meta.embed_scale {s}, not sqrt({C})"
    return ck


@test
def export_folds_a_power_of_two_embedding_factor():
    """A RoPE checkpoint whose embedding is scaled by sqrt(C) = 8 exports with the factor in
    the weights (embed_tokens x 8, model.norm / 8): imported again, the trainer evaluates it to
    the same bits as the original."""
    ck = scaled_embedding_checkpoint("fold", 64)
    d = folder("fold", "hf")
    _, folded = export_hf.export(ck, d)
    import_hf.import_hf(d, path("fold", "back.bin"), seed=42)
    st = hl.read_safetensors(os.path.join(d, "model.safetensors"))
    params = hl.read_checkpoint(ck)[3]
    assert folded and "folded exactly" in folded, folded
    assert np.array_equal(st["model.embed_tokens.weight"], params["wte"][:257] * np.float32(8)), "embed_tokens is not wte x 8"
    assert np.array_equal(st["model.norm.weight"], params["final_norm"] / np.float32(8)), "model.norm is not the gain / 8"
    csv = []
    for c, tag in ((ck, "orig"), (path("fold", "back.bin"), "back")):
        trainer("--resume", c, "--eval_only", "--eval_len", 96, "--eval_n", 2, "--gain_window", 16, "--out_dir",
                folder("fold", "eval"), "--eval_tag", tag)
        csv.append(open(path("fold", "eval", tag + ".csv"), "rb").read())
    assert csv[0] == csv[1], "the exported and imported model evaluates differently from the checkpoint"
    return "factor 8 folded; the round trip's evaluation CSV byte-identical"


@test
def export_refuses_an_embedding_factor_it_cannot_fold():
    """sqrt(32) is no power of two: the fold would round, so the export is refused, no file written;
    a damaged factor (3, the checksum rewritten) is refused as corrupt."""
    ck = scaled_embedding_checkpoint("nofold", 32)
    refused(lambda: export_hf.export(ck, folder("nofold", "hf")), "factor 5.65685", "cannot be exported", "power of two")
    assert not os.listdir(folder("nofold", "hf")), "wrote files before refusing"
    t = tensorfile.read(ck)
    t["meta.embed_scale"] = np.array([3.0], np.float32)
    tensorfile.write(path("nofold", "damaged.bin"), hl.KIND_CHECKPOINT, list(t.items()))
    refused(lambda: export_hf.export(path("nofold", "damaged.bin"), folder("nofold", "hf2")),
            "is corrupt: meta.embed_scale is [3.0]; it can be 1 or sqrt(C) = 5.65685")


def export_hf_dir(ck, name, **kw):
    d = folder(name)
    export_hf.export(ck, d, **kw)
    return d


# Llama folders our model cannot hold: (name, config changes, tensor changes, words of the refusal)
def _untied(t):
    t["lm_head.weight"] = t["model.embed_tokens.weight"] + 1


def _bias(t):
    t["model.layers.0.self_attn.q_proj.bias"] = np.zeros(96, np.float32)


def _missing(t):
    del t["model.layers.1.mlp.up_proj.weight"]


IMPORT_REFUSALS = [
    ("untied_head", {"tie_word_embeddings": False}, _untied, "untied from embed_tokens"),
    ("other_model", {"model_type": "mistral"}, None, "model_type 'mistral'"),
    ("bias", {"attention_bias": True}, None, "attention_bias is true: our model has no biases"),
    ("bias_tensor", {}, _bias, "tensors our model has no place for: model.layers.0.self_attn.q_proj.bias"),
    ("gelu", {"hidden_act": "gelu"}, None, "hidden_act 'gelu'"),
    ("head_dim", {"head_dim": 32}, None, "head_dim 32 is not hidden_size / num_attention_heads = 16"),
    ("rope_scaling", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, None, "rope_scaling 'llama3'"),
    ("partial_rotary", {"partial_rotary_factor": 0.5}, None, "partial_rotary_factor 0.5"),
    ("gqa_groups", {"num_key_value_heads": 4}, None, "num_attention_heads 6 is not a multiple of num_key_value_heads 4"),
    ("missing_tensor", {}, _missing, "no tensor model.layers.1.mlp.up_proj.weight"),
]


def import_refusal_test(name, cfg, change, words):
    def fn():
        t = hf_tensors(dict(HF_CFG, **cfg))
        if change:
            change(t)
        d = hf_folder("imp_" + name, cfg, t)[0]
        refused(lambda: import_hf.import_hf(d, path("imp_" + name, "ckpt.bin")), words)
    fn.__name__ = f"import_refuses_{name}"
    return fn


for _r in IMPORT_REFUSALS:
    test(import_refusal_test(*_r))


@test
def import_tied_in_name_only_and_dropped_rope_scaling():
    t = hf_tensors(HF_CFG)
    t["lm_head.weight"] = t["model.embed_tokens.weight"].copy()  # untied but equal: the same model
    d = hf_folder("imp_equal_head", {"tie_word_embeddings": False, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, t)[0]
    ci, cf = import_hf.import_hf(d, path("imp_equal_head", "ckpt.bin"), drop_rope_scaling=True)
    assert ci[:8] == [300, 384, 96, 3, 6, 2, 200, 48] and cf[0] == 50000.0


@test
def command_lines():
    ck = path("refuse_alibi", "checkpoint.bin")
    if not os.path.exists(ck):
        small_checkpoint("refuse_alibi", "--steps", 2, "--pe", "alibi")
    for script, args, words in (("export_hf.py", [ck, path("cli", "hf")], "export_hf.py: error: --pe alibi cannot be exported"),
                                ("import_hf.py", [hf_folder("imp_gelu", {"hidden_act": "gelu"})[0], path("cli", "c.bin")],
                                 "import_hf.py: error: hidden_act 'gelu'")):
        r = subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True)
        assert r.returncode == 1 and words in r.stderr, (script, r.returncode, r.stderr[-500:])
    ref()
    r = subprocess.run([sys.executable, os.path.join(HERE, "export_hf.py"), path("ref", "ckpt.bin"), path("cli", "ok"),
                        "--scaling", "yarn", "--scale_factor", "8"], capture_output=True, text=True)
    assert r.returncode == 0 and '"rope_type": "yarn"' in r.stdout, r.stderr[-500:]


@test
def numbers_out_of_range_are_refused():
    """A number the tools would write into a model (config.json, the checkpoint) is range-checked:
    an infinite --scale_factor, a NaN YaRN bound, a --seed past 64 bits; one line, exit 1,
    nothing written."""
    ref()
    for script, args, words in (
            ("export_hf.py", [path("ref", "ckpt.bin"), path("cli_num", "a"), "--scaling", "yarn", "--scale_factor", "inf"],
             "--scale_factor s >= 1, finite"),
            ("export_hf.py", [path("ref", "ckpt.bin"), path("cli_num", "b"), "--yarn_beta_fast", "nan"],
             "need --yarn_beta_fast > --yarn_beta_slow > 0"),
            ("import_hf.py", [path("ref", "hf", "none"), path("cli_num", "c.bin"), "--seed", str(2**64)],
             "--seed 18446744073709551616 is out of range")):
        r = subprocess.run([sys.executable, os.path.join(HERE, script), *args], capture_output=True, text=True)
        err = r.stderr.strip()
        assert r.returncode == 1 and len(err.splitlines()) == 1 and words in err, (script, args[2:], r.returncode, err[-300:])
        assert not os.path.exists(args[1]), f"{script} {args[2:]} wrote {args[1]}"


# ---- bad input: one line, exit 1, no traceback, no file left (issue 25) --------------------

def import_cli(hf_dir, ckpt, *flags, limit_bytes=None):
    """dev/import_hf.py HF_DIR CKPT as a user runs it (limit_bytes: RLIMIT_FSIZE, a full disk)."""
    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return subprocess.run([sys.executable, os.path.join(HERE, "import_hf.py"), hf_dir, ckpt, *map(str, flags)],
                          capture_output=True, text=True, timeout=120, preexec_fn=limit if limit_bytes else None)


def tmp_left(*folders):
    return [os.path.join(d, n) for d in folders for n in os.listdir(d) if ".tmp" in n]


def one_line_error(r, words, *folders):
    """The refusal: exit 1, one stderr line `import_hf.py: error: ...` with `words`, no
    traceback, no .tmp in `folders`. Returns the line, the scratch path shortened."""
    err = r.stderr.strip()
    assert "Traceback" not in r.stderr, f"a traceback:\n{r.stderr[-1500:]}"
    assert r.returncode == 1, f"exit {r.returncode}: {err[-500:]}"
    assert len(err.splitlines()) == 1 and err.startswith("import_hf.py: error: "), f"not one error line: {err!r}"
    assert words in err, f"{err!r} lacks {words!r}"
    assert not tmp_left(*folders), f"left {tmp_left(*folders)}"
    return err.replace(_tmp[0], "$TMP")


def st_bytes(header, data=b"", n=None):
    """A safetensors file's bytes as given: the header (a JSON value, or raw bytes), its
    length (n, or the header's), the data."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(h) if n is None else n) + h + data


def f32(shape, begin, end=None):
    n = math.prod(shape) * 4
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, begin + n if end is None else end]}


# (name, model.safetensors bytes, words of the message): each breaks one rule of the format
BAD_SAFETENSORS = [
    ("header_length_past_file", st_bytes({"a": f32([2], 0)}, bytes(8), n=10**6),
     "header of 1000000 bytes in a file of 77 bytes: truncated or not safetensors"),
    ("shorter_than_header_length", b"\x10\x00\x00", "not a safetensors file (3 bytes"),
    ("header_not_json", st_bytes(b"{\"a\": nope}", bytes(8)), "the header is not UTF-8 JSON"),
    ("non_object_header", st_bytes([1, 2, 3]), "the header is [1, 2, 3], not a JSON object of tensors"),
    ("tensor_not_object", st_bytes({"a": 5}), "tensor 'a' is 5, not an object with dtype, shape and data_offsets"),
    ("tensor_without_offsets", st_bytes({"a": {"dtype": "F32", "shape": [2]}}, bytes(8)),
     "tensor 'a' has no \"data_offsets\""),
    ("unknown_dtype", st_bytes({"a": dict(f32([2], 0), dtype="Q7")}, bytes(8)),
     "tensor 'a' has dtype \"Q7\"; this reader takes F32, F16, F64, BF16"),
    ("negative_dim", st_bytes({"a": dict(f32([2], 0), shape=[-2])}, bytes(8)),
     "tensor 'a' has shape [-2], not a list of non-negative integers"),
    ("string_dim", st_bytes({"a": dict(f32([2], 0), shape=["2"])}, bytes(8)),
     "tensor 'a' has shape [\"2\"], not a list of non-negative integers"),
    ("three_offsets", st_bytes({"a": dict(f32([2], 0), data_offsets=[0, 4, 8])}, bytes(8)),
     "tensor 'a' has data_offsets [0, 4, 8], not a list of two integers [begin, end]"),
    ("offsets_past_data", st_bytes({"a": f32([4], 0)}, bytes(8)),
     "tensor 'a' has data_offsets [0, 16], not 0 <= begin <= end <= 8 (the data's size)"),
    ("end_before_begin", st_bytes({"a": f32([0], 8, 4)}, bytes(8)), "has data_offsets [8, 4], not 0 <= begin <= end"),
    ("shape_offsets_size_mismatch", st_bytes({"a": f32([3], 0, 8)}, bytes(8)),
     "tensor 'a' has data_offsets [0, 8] (8 bytes), but shape [3] of F32 takes 12 bytes"),
    ("overlapping_ranges", st_bytes({"a": f32([2], 0), "b": f32([2], 4)}, bytes(12)),
     "tensors 'a' (data_offsets [0, 8]) and 'b' ([4, 12]) overlap"),
    ("same_range_twice", st_bytes({"a": f32([2], 0), "b": f32([2], 0)}, bytes(8)), "overlap"),
    ("hole_between_ranges", st_bytes({"a": f32([2], 0), "b": f32([2], 12)}, bytes(20)),
     "bytes [8, 12) of the data belong to no tensor (a hole after 'a')"),
    ("hole_at_start", st_bytes({"a": f32([2], 4)}, bytes(12)),
     "bytes [0, 4) of the data belong to no tensor (a hole before the first tensor)"),
    ("bytes_after_last_tensor", st_bytes({"a": f32([2], 0)}, bytes(12)),
     "bytes [8, 12) of the data belong to no tensor (after the last one)"),
    ("name_twice", st_bytes(b'{"a": %s, "a": %s}' % (json.dumps(f32([2], 0)).encode(), json.dumps(f32([2], 0)).encode()),
                            bytes(8)), "the header names 'a' twice"),
    ("metadata_not_strings", st_bytes({"__metadata__": {"format": 1}, "a": f32([2], 0)}, bytes(8)),
     "__metadata__ is {\"format\": 1}, not an object of strings"),
]


def bad_import_test(what, name, file, content, words):
    """A test: an HF folder whose `file` is replaced by `content` (bytes or text, or a callable
    giving it) is refused with one line containing `words`, and nothing is written."""
    def fn():
        d = hf_folder("bad_%s_%s" % (what, name), tensors=hf_tensors(HF_CFG))[0]
        data = content() if callable(content) else content
        with open(os.path.join(d, file), "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        r = import_cli(d, os.path.join(d, "ckpt.bin"))
        assert not os.path.exists(os.path.join(d, "ckpt.bin")), "wrote a checkpoint"
        return one_line_error(r, words, d)
    fn.__name__ = f"import_rejects_{what}_{name}"
    return fn


for _name, _data, _words in BAD_SAFETENSORS:
    test(bad_import_test("safetensors", _name, "model.safetensors", _data, _words))


@test
def safetensors_reader_takes_what_the_format_allows():
    """__metadata__, a 0-d tensor, a zero-size tensor, header padding, a header order that is not the data order."""
    t = {"b": np.arange(3, dtype=np.float32), "a": np.float32(7.0).reshape(()), "z": np.zeros((0, 4), np.float32)}
    header = {"__metadata__": {"format": "pt"}, "b": f32([3], 4), "a": f32([], 0), "z": f32([0, 4], 16)}
    p = path("st_ok", "model.safetensors")
    with open(p, "wb") as f:
        f.write(st_bytes(json.dumps(header).encode() + b"    ", t["a"].tobytes() + t["b"].tobytes()))
    got = hl.read_safetensors(p)
    assert set(got) == set(t) and all(got[k].shape == t[k].shape and np.array_equal(got[k], t[k]) for k in t), got


def drop_key(key):
    def change(cfg):
        del cfg[key]
    return change


# (name, config.json change: a dict merged into HF_CFG, or a function of the dict, or the whole file's text, words)
BAD_CONFIGS = [
    ("missing_key", drop_key("hidden_size"), 'config.json has no "hidden_size"'),
    ("missing_layers", drop_key("num_hidden_layers"), 'config.json has no "num_hidden_layers"'),
    ("string_head_count", {"num_attention_heads": "6"}, '"num_attention_heads" is "6" (a string), not an integer'),
    ("bool_layers", {"num_hidden_layers": True}, '"num_hidden_layers" is true (a boolean), not an integer'),
    ("float_ffn", {"intermediate_size": 200.0}, '"intermediate_size" is 200.0 (a number), not an integer'),
    ("null_vocab", {"vocab_size": None}, '"vocab_size" is null, not an integer'),
    ("zero_heads", {"num_attention_heads": 0}, '"num_attention_heads" is 0; it must be a positive integer'),
    ("zero_kv_heads", {"num_key_value_heads": 0}, '"num_key_value_heads" is 0; it must be a positive integer'),
    ("negative_hidden_size", {"hidden_size": -96}, '"hidden_size" is -96; it must be a positive integer'),
    ("heads_not_dividing_hidden_size", {"num_attention_heads": 5},
     "hidden_size 96 is not a multiple of num_attention_heads 5"),
    ("kv_heads_not_dividing_heads", {"num_key_value_heads": 4},
     "num_attention_heads 6 is not a multiple of num_key_value_heads 4"),
    ("string_eps", {"rms_norm_eps": "1e-6"}, '"rms_norm_eps" is "1e-6" (a string), not a finite number'),
    ("string_theta", {"rope_theta": "5e4"}, '"rope_theta" is "5e4" (a string), not a finite number'),
    ("rope_scaling_not_object", {"rope_scaling": "yarn"}, '"rope_scaling" is "yarn" (a string), not an object'),
    ("string_window", {"max_position_embeddings": "48"}, '"max_position_embeddings" is "48" (a string), not an integer'),
    ("not_an_object", "[1, 2]", "config.json is [1, 2] (an array), not a JSON object"),
    ("not_json", "{'vocab_size': 300}", "config.json is not JSON (JSONDecodeError"),
]


def config_text(change):
    """config.json's text: a string as it is, else HF_CFG changed by a dict or a function."""
    if isinstance(change, str):
        return change
    cfg = dict(HF_CFG)
    change(cfg) if callable(change) else cfg.update(change)
    return json.dumps(cfg)


for _name, _change, _words in BAD_CONFIGS:
    test(bad_import_test("config", _name, "config.json", lambda c=_change: config_text(c), _words))


@test
def import_rejects_folder_as_target():
    d = hf_folder("target_dir")[0]
    out = folder("target_dir", "out")
    msg = one_line_error(import_cli(d, out), "out is a folder: name the checkpoint file to write", d,
                         os.path.dirname(out), out)
    assert os.listdir(out) == [], os.listdir(out)
    r = import_cli(d, os.path.join(out, "ckpt.bin"))
    assert r.returncode == 0 and "wrote " in r.stdout and os.listdir(out) == ["ckpt.bin"], (r.stderr[-500:], os.listdir(out))
    return msg


@test
def import_keeps_an_existing_checkpoint():
    """A trained checkpoint at CKPT is not replaced by an import (its moments and run would be
    lost) unless --overwrite says so."""
    d = hf_folder("target_exists")[0]
    out = folder("target_exists", "out")
    ck = os.path.join(out, "ckpt.bin")
    with open(ck, "wb") as f:
        f.write(b"a trained run's checkpoint")
    before = sha(ck)
    msg = one_line_error(import_cli(d, ck), "exists (a checkpoint would lose its weights, moments and run)", out)
    assert (sha(ck) == before).all() and os.listdir(out) == ["ckpt.bin"], os.listdir(out)
    r = import_cli(d, ck, "--overwrite")
    assert r.returncode == 0 and "wrote " in r.stdout and (sha(ck) != before).any(), r.stderr[-500:]
    return msg


@test
def import_rejects_target_in_missing_folder():
    d = hf_folder("target_missing")[0]
    return one_line_error(import_cli(d, os.path.join(d, "no", "such", "ckpt.bin")), "is not an existing folder", d)


@test
def import_rejects_missing_hf_folder_or_config():
    msgs = [one_line_error(import_cli(path("no_such_model"), path("nm.bin")), "is not a folder", _tmp[0])]
    d = folder("no_config")
    msgs.append(one_line_error(import_cli(d, path("nc.bin")), "has no config.json", d, _tmp[0]))
    return "; ".join(msgs)


@test
def import_removes_tmp_when_the_write_fails():
    d = hf_folder("full_disk")[0]
    out = folder("full_disk", "out")
    r = import_cli(d, os.path.join(out, "ckpt.bin"), limit_bytes=8192)  # the checkpoint is about 500 KB
    msg = one_line_error(r, "cannot write", out)
    assert os.listdir(out) == [], os.listdir(out)
    return msg


# ---- live: transformers itself -------------------------------------------------------------

def live():
    try:
        import hf_reference  # torch and transformers
    except ImportError as e:
        raise Skip(f"needs torch and transformers, which make test does not install ({e}); see dev/hf_reference.py")
    return hf_reference


@test
def live_losses_per_mapping():
    hr, r = live(), ref()
    L, n = (int(x) for x in r["eval"])
    diffs, drift = [], 0.0
    for m in MAPPINGS:
        hf = hr.hf_losses(exported(m), r["tokens"], L, n)
        d = float(np.abs(c_losses(path("ref", "reimported.bin"), m, "live_" + m) - hf).max())
        drift = max(drift, float(np.abs(hf - r[f"loss.{m}"]).max()))
        assert d < TOL, f"{m}: max |loss diff| {d:.3g}"
        diffs.append(f"{m} {d:.2e}")
    return f"max |loss diff| C vs transformers: {', '.join(diffs)} (transformers now vs the committed file: {drift:.1e})"


@test
def live_greedy_and_tokenizer():
    hr, r = live(), ref()
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(exported("none"))
    prompt = tok("Lasras looked for the").input_ids
    assert prompt == [int(t) for t in r["greedy.prompt"]], prompt
    toks, margin = hr.hf_greedy(exported("none"), prompt)
    got = c_greedy(path("ref", "reimported.bin"), prompt, 50)
    assert got.startswith(as_bytes(toks)), (got, as_bytes(toks))
    assert tok.decode(toks) == as_bytes(toks).decode("utf-8", "replace")
    return f"{len(toks)} greedy tokens equal (top-2 margin >= {margin:.3g}); AutoTokenizer puts end-of-text first"


@test
def live_import_non_preset_posaug():
    hr = live()
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = {k: v for k, v in HF_CFG.items() if k not in ("architectures", "model_type")}
    torch.manual_seed(0)
    d = folder("live_np", "hf")
    LlamaForCausalLM(LlamaConfig(**cfg, bos_token_id=256, eos_token_id=256, pad_token_id=256)).save_pretrained(d)
    ck = path("live_np", "ckpt.bin")
    import_hf.import_hf(d, ck)
    L, n = 384, 2  # 8x the window of 48
    stream = np.array(shards.read_shard(os.path.join(ROOT, "data", "builtin", "val.bin"))[:n * L + 1], dtype=np.int32)
    run = folder("live_np", "run")

    def c_eval(c, tag):
        trainer("--resume", c, "--eval_only", "--eval_len", L, "--eval_n", n, "--gain_window", 0, "--out_dir", run,
                "--eval_tag", tag)
        return np.loadtxt(os.path.join(run, tag + ".csv"), delimiter=",", skiprows=1)[:, 1]

    d0 = float(np.abs(c_eval(ck, "imported") - hr.hf_losses(d, stream, L, n)).max())
    out = trainer("--init_from", ck, "--pos", "posaug", "--steps", 30, "--batch_size", 4, "--total_batch", 4, "--warmup",
                  3, "--lr", 2e-3, "--min_lr", 2e-4, "--val_every", 0, "--eval_len", L, "--eval_n", n, "--gain_window", 0,
                  "--out_dir", run).decode()
    steps = [ln for ln in out.splitlines() if ln.startswith("step ")]
    summary = [ln for ln in out.splitlines() if ln.startswith("eval ")][0]
    export_hf.export(os.path.join(run, "checkpoint.bin"), folder("live_np", "hf_posaug"), tokenizer_json=write_bpe_json())
    d1 = float(np.abs(c_eval(os.path.join(run, "checkpoint.bin"), "posaug") - hr.hf_losses(
        folder("live_np", "hf_posaug"), stream, L, n)).max())
    assert d0 < TOL and d1 < TOL, (d0, d1)
    assert "C=96 L=3 NH=6 NKV=2 hd=16 F=200 T=48" in out and "--pos posaug" in out, out[:600]
    loss = lambda s: s.split("| loss ")[1].split()[0]  # noqa: E731
    return (f"random LlamaForCausalLM (V 300, C 96, L 3, NH 6, NKV 2, F 200, T 48, base 5e4, eps 1e-6) imported: "
            f"max |loss diff| {d0:.2e} at 8x its window; --init_from --pos posaug, 30 steps, loss {loss(steps[0])} -> "
            f"{loss(steps[-1])}; {summary.split(': ', 1)[1]}; exported again: max |loss diff| {d1:.2e}")


def main():
    sys.exit(SUITE.run(skip_all=None if np is not None else f"needs numpy ({MISSING})"))


if __name__ == "__main__":
    main()
