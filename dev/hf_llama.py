"""What dev/export_hf.py and dev/import_hf.py share: the tensor names of Hugging Face's
LlamaForCausalLM against ours, the checkpoint header (llmc/checkpoint.h), and safetensors
files read and written with numpy alone (doc/huggingface.md).

safetensors (https://github.com/huggingface/safetensors): an unsigned 64-bit little-endian
header length n, n bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]},
"__metadata__": {str: str}} (offsets relative to the end of the header), then the raw
little-endian tensor data, contiguous, without holes.
"""

import functools
import itertools
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tensorfile  # noqa: E402

KIND_CHECKPOINT = 2
# meta.config_i: [V, Vp, C, L, NH, NKV, F, T, pos_scheme, pe, qk_norm, wpe_rows, arch]
# meta.config_f: [rope_base, rms_eps, alpha_min, alpha_max, alpha_fixed]
# meta.state:    [step, seed, data_epoch, data_shard, data_sample]
CKI = {name: i for i, name in enumerate(["V", "Vp", "C", "L", "NH", "NKV", "F", "T", "pos", "pe", "qk_norm", "wpe_rows",
                                           "arch"])}
ARCH_NAMES = ["transformer", "gru"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=None)
def trainer_tables():
    """The trainer's own tables (`train_gpt_cpu --describe`): position schemes and encodings in
    checkpoint index order, their parameters, the tensors. $TRAINER names another build."""
    exe = os.path.join(ROOT, os.environ.get("TRAINER", "train_gpt_cpu"))
    if not os.path.exists(exe):
        raise SystemExit(f"{exe} does not exist: run make first (the scheme names come from the trainer itself)")
    r = subprocess.run([exe, "--describe"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise SystemExit(f"{exe} --describe failed (exit {r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def pos_names():
    """--pos values by the index a checkpoint's meta.config_i stores (llmc/schedule.h's POS_TABLE)."""
    return [p["name"] for p in trainer_tables()["pos"]]


def pe_names():
    """--pe values by index (PE_TABLE)."""
    return [p["name"] for p in trainer_tables()["pe"]]
DEFAULT_ALPHAS = (0.125, 8.0, 4.0)  # --alpha_range and --alpha defaults: stored, unused by a rope run

# our stacked tensors (llmc/checkpoint.h PARAM_NAMES, the 11 base ones) -> HF names, {i} the layer
HF_NAMES = {
    "wte": "model.embed_tokens.weight",
    "attn_norm": "model.layers.{i}.input_layernorm.weight",
    "wq": "model.layers.{i}.self_attn.q_proj.weight",
    "wk": "model.layers.{i}.self_attn.k_proj.weight",
    "wv": "model.layers.{i}.self_attn.v_proj.weight",
    "wo": "model.layers.{i}.self_attn.o_proj.weight",
    "mlp_norm": "model.layers.{i}.post_attention_layernorm.weight",
    "w_gate": "model.layers.{i}.mlp.gate_proj.weight",
    "w_up": "model.layers.{i}.mlp.up_proj.weight",
    "w_down": "model.layers.{i}.mlp.down_proj.weight",
    "final_norm": "model.norm.weight",
}
PARAM_NAMES = list(HF_NAMES)


def padded_vocab(V):
    return (V + 127) // 128 * 128


def f32_text(x):
    """The shortest decimal that reads back as the same float32 (1e-05, not 9.99999974737875e-06)."""
    return float(str(np.float32(x)))


# ---- safetensors --------------------------------------------------------------------

_ST_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8"), "BF16": np.dtype("<u2")}


def write_safetensors(path, tensors, metadata=None):
    """Write [(name, float32 array), ...] as one safetensors file (F32), atomically."""
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, a in tensors:
        n = int(np.asarray(a).size) * 4
        header[name] = {"dtype": "F32", "shape": list(np.shape(a)), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as the reference writer pads it
    data = (np.ascontiguousarray(a, dtype="<f4").tobytes() for _, a in tensors)  # one tensor in memory at a time
    tensorfile.write_atomic(path, itertools.chain([struct.pack("<Q", len(text)), text], data))


def _int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _json(x, limit=60):
    text = json.dumps(x)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise _Duplicate(k)
        seen[k] = v
    return seen


def safetensors_layout(path, buf):
    """(where the data starts, [(name, dtype, shape, begin, end)]) of a safetensors file's
    bytes `buf` (begin and end relative to the data; the tensors in header order), after
    checking the header against the format's rules: the 8-byte length inside the file; a
    UTF-8 JSON object, no name twice; __metadata__ str -> str; each tensor an object with
    a dtype this reader takes, a shape of non-negative integers and data_offsets [begin,
    end] with 0 <= begin <= end <= the data's size and end - begin = prod(shape) * the
    dtype's size; the byte ranges neither overlapping nor leaving holes, covering the
    data. ValueError naming the first problem otherwise."""
    if len(buf) < 8:
        raise ValueError(f"{path}: not a safetensors file ({len(buf)} bytes, shorter than its 8-byte header length)")
    (n,) = struct.unpack("<Q", buf[:8])
    if n > len(buf) - 8:
        raise ValueError(f"{path}: header of {n} bytes in a file of {len(buf)} bytes: truncated or not safetensors")
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"), object_pairs_hook=_no_duplicates)
    except _Duplicate as e:
        raise ValueError(f"{path}: the header names {e.args[0]!r} twice") from None
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{path}: the header is not UTF-8 JSON ({type(e).__name__}: {e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the header is {_json(header)}, not a JSON object of tensors")
    size = len(buf) - 8 - n
    entries = []
    for name, h in header.items():
        if name == "__metadata__":
            if not isinstance(h, dict) or not all(isinstance(v, str) for v in h.values()):
                raise ValueError(f"{path}: __metadata__ is {_json(h)}, not an object of strings")
            continue
        where = f"{path}: tensor {name!r}"
        if not isinstance(h, dict):
            raise ValueError(f"{where} is {_json(h)}, not an object with dtype, shape and data_offsets")
        for key in ("dtype", "shape", "data_offsets"):
            if key not in h:
                raise ValueError(f'{where} has no "{key}"')
        dtype, shape, offsets = h["dtype"], h["shape"], h["data_offsets"]
        if not isinstance(dtype, str) or dtype not in _ST_DTYPES:
            raise ValueError(f"{where} has dtype {_json(dtype)}; this reader takes {', '.join(_ST_DTYPES)}")
        if not isinstance(shape, list) or not all(_int(d) and d >= 0 for d in shape):
            raise ValueError(f"{where} has shape {_json(shape)}, not a list of non-negative integers")
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(_int(o) for o in offsets):
            raise ValueError(f"{where} has data_offsets {_json(offsets)}, not a list of two integers [begin, end]")
        begin, end = offsets
        if not 0 <= begin <= end <= size:
            raise ValueError(f"{where} has data_offsets [{begin}, {end}], not 0 <= begin <= end <= {size} "
                             "(the data's size)")
        want = math.prod(shape) * _ST_DTYPES[dtype].itemsize
        if end - begin != want:
            raise ValueError(f"{where} has data_offsets [{begin}, {end}] ({end - begin} bytes), but shape {shape} of "
                             f"{dtype} takes {want} bytes")
        entries.append((name, dtype, shape, begin, end))
    pos, prev = 0, None
    for entry in sorted(entries, key=lambda e: (e[3], e[4])):
        name, _, _, begin, end = entry
        if begin < pos:
            raise ValueError(f"{path}: tensors {prev[0]!r} (data_offsets [{prev[3]}, {prev[4]}]) and {name!r} "
                             f"([{begin}, {end}]) overlap; safetensors allows no overlap and no holes")
        if begin > pos:
            raise ValueError(f"{path}: bytes [{pos}, {begin}) of the data belong to no tensor (a hole "
                             f"{'after ' + repr(prev[0]) if prev else 'before the first tensor'}); safetensors "
                             "allows no holes")
        pos, prev = end, entry
    if pos != size:
        raise ValueError(f"{path}: bytes [{pos}, {size}) of the data belong to no tensor (after the last one); "
                         "safetensors allows no holes")
    return 8 + n, entries


def read_safetensors(path):
    """{name: float32 array} of one safetensors file (F32, F16, BF16 or F64 tensors), its
    header checked (safetensors_layout)."""
    with open(path, "rb") as f:
        buf = f.read()
    start, entries = safetensors_layout(path, buf)
    data = memoryview(buf)[start:]
    out = {}
    for name, dtype, shape, begin, end in entries:
        a = np.frombuffer(data[begin:end], dtype=_ST_DTYPES[dtype]).reshape(shape)
        if dtype == "BF16":  # the upper half of a float32
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.astype(np.float32)
    return out


def read_hf_weights(hf_dir):
    """Every tensor of a Hugging Face model folder: model.safetensors, or the shards that
    model.safetensors.index.json lists."""
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        try:
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f)
        except (ValueError, RecursionError) as e:
            raise ValueError(f"{index}: not JSON ({type(e).__name__}: {e})") from None
        weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
        if not isinstance(weight_map, dict) or not weight_map or not all(
                isinstance(v, str) and v and os.path.basename(v) == v for v in weight_map.values()):
            raise ValueError(f'{index}: no "weight_map" object of tensor names -> file names in {hf_dir}')
        files = sorted(set(weight_map.values()))
    elif os.path.exists(os.path.join(hf_dir, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        raise ValueError(f"{hf_dir}: no model.safetensors (nor model.safetensors.index.json); PyTorch .bin weights are "
                         "not read here: save the model with save_pretrained(..., safe_serialization=True)")
    out, where = {}, {}
    for name in files:
        for k, a in read_safetensors(os.path.join(hf_dir, name)).items():
            if k in out:
                raise ValueError(f"{hf_dir}: tensor {k!r} is in both {where[k]} and {name}")
            out[k], where[k] = a, name
    return out


# ---- checkpoints ---------------------------------------------------------------------

def read_checkpoint(path):
    """(config_i, config_f, state, {name: stacked float32 array}) of a checkpoint."""
    kind, t = tensorfile.read_with_kind(path)
    if kind != KIND_CHECKPOINT:
        raise ValueError(f"{path}: tensor file of kind {kind}, not a checkpoint (kind {KIND_CHECKPOINT})")
    ci = [int(x) for x in t["meta.config_i"]]
    if len(ci) == 10:  # written before QK-norm and learned APE: neither
        ci += [0, 0]
    if len(ci) == 12:  # written before the GRU: a transformer
        ci += [0]
    params = {k[len("param."):]: v for k, v in t.items() if k.startswith("param.")}
    return ci, [float(x) for x in t["meta.config_f"]], [int(x) for x in t["meta.state"]], params


def checkpoint_flags(path):
    """The flags a checkpoint's run was given ({"--name": "value"}, from meta.flags: one byte
    per int32 of "name\tvalue\n" lines); {} for a checkpoint written before they were kept."""
    t = tensorfile.read(path)
    if "meta.flags" not in t:
        return {}
    text = bytes(int(b) for b in t["meta.flags"]).decode("utf-8", "replace")
    return dict(line.split("\t", 1) for line in text.split("\n") if "\t" in line)


def write_checkpoint(path, ci, cf, state, params):
    """A weights-only checkpoint (no AdamW moments): --eval_only, --generate, --init_from."""
    tensors = [("meta.config_i", np.array(ci, dtype=np.int32)), ("meta.config_f", np.array(cf, dtype=np.float32)),
               ("meta.state", np.array([s & (2**64 - 1) for s in state], dtype=np.uint64))]
    tensors += [("param." + name, np.ascontiguousarray(params[name], dtype=np.float32)) for name in PARAM_NAMES]
    tensorfile.write(path, KIND_CHECKPOINT, tensors)
