"""Read and write the project's named-tensor file format.

The same container holds checkpoints (kind 2), the PyTorch reference files (kind 1)
and dumps (kind 3); llmc/tensorfile.h is the C side. Everything is little-endian:

    header:
        int32  magic      = 20261121
        int32  version    = 2
        int32  kind       (1 = reference file, 2 = checkpoint, 3 = dump)
        int32  n_tensors
    then n_tensors records, each:
        int32  name_len
        bytes  name       (ASCII, name_len bytes, no NUL terminator)
        int32  dtype      (0 = float32, 1 = int32, 2 = uint64)
        int32  ndim
        int32  shape[ndim]
        zero bytes up to the next file offset that is a multiple of 64
        data              (prod(shape) elements, row-major / C order)
    trailer:
        int32  end marker = 0x454E4421  (bytes "!DNE" on disk)
        uint32 CRC-32 (zlib.crc32) of every byte before it, end marker included

Version 1 files (no padding, no checksum) are still read.

A 0-d tensor has ndim 0 and one element. Tensors keep the order they were
written in; `read` returns an insertion-ordered dict.

    write(path, kind, [(name, array), ...])   # written to path.tmp, then renamed
    read(path) -> {name: numpy array}
    read_with_kind(path) -> (kind, {name: numpy array})

Run `python dev/tensorfile.py FILE` to list a file's tensors.
"""

import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:  # `python dev/tensorfile.py --help` needs no numpy
    import numpy as np

    _DTYPES = {0: np.dtype("<f4"), 1: np.dtype("<i4"), 2: np.dtype("<u8")}
    _CODES = {np.dtype("float32"): 0, np.dtype("int32"): 1, np.dtype("uint64"): 2}

MAGIC = 20261121
VERSION = 2
ALIGN = 64
END_MARKER = 0x454E4421
KIND_REFERENCE = 1


def write(path, kind, tensors):
    """Write `tensors` (a list of (name, array-like)) to `path` atomically."""
    names = set()
    parts = [struct.pack("<4i", MAGIC, VERSION, int(kind), len(tensors))]
    size = 16
    for name, arr in tensors:
        if name in names:
            raise ValueError(f"duplicate tensor name {name!r}")
        names.add(name)
        a = np.asarray(arr)
        if a.dtype not in _CODES:
            raise TypeError(f"tensor {name!r}: unsupported dtype {a.dtype} "
                            "(convert to float32, int32 or uint64 first)")
        code = _CODES[a.dtype]
        nb = name.encode("ascii")
        head = struct.pack("<i", len(nb)) + nb + struct.pack("<2i", code, a.ndim) + struct.pack(f"<{a.ndim}i", *a.shape)
        size += len(head)
        pad = b"\0" * (-size % ALIGN)
        size += len(pad)
        data = np.ascontiguousarray(a, dtype=_DTYPES[code]).tobytes()
        size += len(data)
        parts += [head, pad, data]
    parts.append(struct.pack("<i", END_MARKER))
    crc = 0
    for p in parts:
        crc = zlib.crc32(p, crc)
    parts.append(struct.pack("<I", crc))
    write_atomic(path, parts)


def write_atomic(path, parts):
    """Write the byte strings `parts` (any iterable) to path through path.tmp, fsync'd, then
    renamed; on any failure after path.tmp was created (a full disk, path a folder, an
    interrupt) path.tmp is removed and the error raised."""
    tmp = str(path) + ".tmp"
    f = open(tmp, "wb")
    try:
        with f:
            for p in parts:
                f.write(p)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def read_with_kind(path):
    """Return (kind, {name: numpy array}); raises ValueError on a malformed file."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(n, what):
        nonlocal pos
        if pos + n > len(buf):
            raise ValueError(f"{path}: truncated while reading {what} at byte {pos}")
        out = buf[pos:pos + n]
        pos += n
        return out

    magic, version, kind, n = struct.unpack("<4i", take(16, "header"))
    if magic != MAGIC:
        raise ValueError(f"{path}: bad magic {magic} (expected {MAGIC})")
    if version not in (1, VERSION):
        raise ValueError(f"{path}: unsupported version {version} (expected 1 or {VERSION})")
    if n < 0:
        raise ValueError(f"{path}: negative tensor count {n}")
    out = {}
    for i in range(n):
        (name_len,) = struct.unpack("<i", take(4, f"tensor {i} name length"))
        if not 0 < name_len <= 4096:
            raise ValueError(f"{path}: tensor {i}: bad name length {name_len}")
        name = take(name_len, f"tensor {i} name").decode("ascii")
        code, ndim = struct.unpack("<2i", take(8, f"tensor {name} dtype/ndim"))
        if code not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unknown dtype code {code}")
        if not 0 <= ndim <= 8:
            raise ValueError(f"{path}: tensor {name}: bad ndim {ndim}")
        shape = struct.unpack(f"<{ndim}i", take(4 * ndim, f"tensor {name} shape"))
        if any(s < 0 for s in shape):
            raise ValueError(f"{path}: tensor {name}: negative dimension in {shape}")
        dt = _DTYPES[code]
        count = int(np.prod(shape, dtype=np.int64))
        if version > 1:
            take(-pos % ALIGN, f"tensor {name} padding")
        data = take(count * dt.itemsize, f"tensor {name} data")
        if name in out:
            raise ValueError(f"{path}: duplicate tensor name {name!r}")
        out[name] = np.frombuffer(data, dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
    (end,) = struct.unpack("<i", take(4, "end marker"))
    if end != END_MARKER:
        raise ValueError(f"{path}: bad end marker {end:#x} (expected {END_MARKER:#x})")
    if version > 1:
        (stored,) = struct.unpack("<I", take(4, "checksum"))
        if zlib.crc32(buf[:pos - 4]) != stored:
            raise ValueError(f"{path}: checksum mismatch: the file changed after it was written")
    if pos != len(buf):
        raise ValueError(f"{path}: {len(buf) - pos} trailing bytes after end marker")
    return kind, out


def read(path):
    """Return {name: numpy array} for the tensors in `path`, in file order."""
    return read_with_kind(path)[1]


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description="List the tensors of a named-tensor file (a checkpoint, a reference "
                                 "file, a dump): kind, then name, dtype, shape and the first values of each.")
    ap.add_argument("file")
    a = ap.parse_args(argv)
    missing.check()
    try:
        kind, ts = read_with_kind(a.file)
    except (OSError, ValueError) as e:
        sys.exit(f"tensorfile.py: error: {e}")
    print(f"kind {kind}, {len(ts)} tensors")
    for k, v in ts.items():
        flat = v.reshape(-1)
        head = ", ".join(f"{x:.6g}" if v.dtype.kind == "f" else str(x) for x in flat[:4])
        print(f"  {k:24s} {str(v.dtype):8s} {str(tuple(v.shape)):18s} [{head}{', ...' if flat.size > 4 else ''}]")


if __name__ == "__main__":
    main()
