"""Token shard and tokenizer files in the llm.c formats (stdlib only).

Token shard: a header of 256 little-endian int32, then the tokens.
    header[0] = 20240520, header[1] = 1   -> uint16 tokens (vocab size <= 65536)
    header[0] = 20240801, header[1] = 7   -> uint32 tokens (vocab size  > 65536)
    header[2] = number of tokens
    header[3] = 1: a loss mask follows the tokens (this project's extension), one byte
                per token, 1 when the token counts in the loss as a target; 0: no mask
Documents are separated by the end-of-text (EOT) token, which PRECEDES every
document, so a shard written by this project starts with EOT.

Tokenizer (decode only): a header of 256 little-endian uint32
    [0] = 20240328, [1] = 2, [2] = vocab size V, [3] = EOT token id,
then for each token id 0..V-1: one uint8 length and that many raw bytes.
"""
import os
import sys
from array import array

HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
MAGIC_U16, VERSION_U16 = 20240520, 1
MAGIC_U32, VERSION_U32 = 20240801, 7
TOKENIZER_MAGIC, TOKENIZER_VERSION = 20240328, 2


class ShardError(ValueError):
    """A shard or tokenizer file is malformed; the message says what is wrong."""


def _le(arr):
    """Return `arr` in little-endian byte order (a copy on big-endian hosts)."""
    if sys.byteorder == "big":
        arr = array(arr.typecode, arr)
        arr.byteswap()
    return arr


def _typecode(nbytes):
    for code in ("H", "I", "L"):
        if array(code).itemsize == nbytes:
            return code
    raise RuntimeError("no %d-byte unsigned array type on this platform" % nbytes)


U16, U32 = _typecode(2), _typecode(4)


def _write_atomic(path, chunks):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp.%d" % os.getpid()
    try:
        with open(tmp, "wb") as f:
            for c in chunks:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def token_dtype(vocab_size):
    """'uint16' when every token id fits in 16 bits, else 'uint32'."""
    return "uint16" if vocab_size <= 65536 else "uint32"


def write_shard(path, tokens, vocab_size, mask=None):
    """Write `tokens` (any sequence of ints) to `path` atomically, with a loss mask (a
    sequence of 0/1, one per token) when given.

    Raises ValueError if a token is negative or >= vocab_size, or the mask is wrong."""
    if not 0 < vocab_size <= 2**32:
        raise ValueError("vocab_size must be in [1, 2^32], got %r" % (vocab_size,))
    u16 = vocab_size <= 65536
    code = U16 if u16 else U32
    if isinstance(tokens, array) and tokens.typecode == code:
        toks = tokens
    else:
        try:
            toks = array(code, tokens)
        except OverflowError:
            raise ValueError("%s: a token id is negative or does not fit in %s"
                             % (path, token_dtype(vocab_size)))
    if len(toks) and max(toks) >= vocab_size:
        bad = max(toks)
        raise ValueError("%s: token id %d at index %d is >= vocab size %d"
                         % (path, bad, toks.index(bad), vocab_size))
    if len(toks) >= 2**31:
        raise ValueError("%s: %d tokens do not fit in the int32 count" % (path, len(toks)))
    chunks = []
    if mask is not None:
        mask = bytes(bytearray(mask))
        if len(mask) != len(toks) or max(mask, default=0) > 1 or not any(mask):
            raise ValueError("%s: the mask needs one 0/1 per token (%d), and a 1 somewhere" % (path, len(toks)))
        chunks = [mask]
    header = array("i", [0] * HEADER_INTS)
    header[0], header[1] = (MAGIC_U16, VERSION_U16) if u16 else (MAGIC_U32, VERSION_U32)
    header[2] = len(toks)
    header[3] = 1 if mask is not None else 0
    _write_atomic(path, [_le(header).tobytes(), _le(toks).tobytes()] + chunks)


def read_shard_header(path):
    """Return (num_tokens, bytes_per_token) after checking magic and version."""
    n, width, _ = _header(path)
    return n, width


def _header(path):
    """(num_tokens, bytes_per_token, has_mask) after checking magic, version and header[3]."""
    with open(path, "rb") as f:
        raw = f.read(HEADER_BYTES)
    if len(raw) < HEADER_BYTES:
        raise ShardError("%s: file is %d bytes, shorter than the %d-byte header"
                         % (path, len(raw), HEADER_BYTES))
    header = array("i")
    header.frombytes(raw)
    header = _le(header)
    magic, version, n = header[0], header[1], header[2]
    if magic == MAGIC_U16:
        want, width = VERSION_U16, 2
    elif magic == MAGIC_U32:
        want, width = VERSION_U32, 4
    else:
        raise ShardError("%s: bad magic %d (expected %d for uint16 or %d for uint32 "
                         "tokens); not an llm.c token shard"
                         % (path, magic, MAGIC_U16, MAGIC_U32))
    if version != want:
        raise ShardError("%s: magic %d needs version %d, found version %d"
                         % (path, magic, want, version))
    if n < 0:
        raise ShardError("%s: negative token count %d in header" % (path, n))
    if header[3] not in (0, 1):
        raise ShardError("%s: header[3] is %d, neither 0 (no loss mask) nor 1 (a mask follows)" % (path, header[3]))
    return n, width, header[3] == 1


def read_shard(path, vocab_size=None, with_mask=False):
    """Read a shard; returns an array of ints ('H' or 'I'), or with with_mask
    (tokens, mask bytes or None).

    Checks magic, version, file size against the header's token count, and,
    when vocab_size is given, every token against it."""
    n, width, masked = _header(path)
    size = os.path.getsize(path)
    expected = HEADER_BYTES + n * width + (n if masked else 0)
    if size != expected:
        raise ShardError("%s: header says %d tokens of %d bytes (file should be %d "
                         "bytes) but the file is %d bytes (%s)"
                         % (path, n, width, expected, size,
                            "truncated" if size < expected else "trailing data"))
    toks = array(U16 if width == 2 else U32)
    with open(path, "rb") as f:
        f.seek(HEADER_BYTES)
        toks.frombytes(f.read(n * width))
        mask = f.read(n) if masked else None
    toks = _le(toks)
    if vocab_size is not None and n and max(toks) >= vocab_size:
        bad = max(toks)
        raise ShardError("%s: token id %d at index %d is >= vocab size %d"
                         % (path, bad, toks.index(bad), vocab_size))
    if mask is not None and max(mask, default=0) > 1:
        raise ShardError("%s: loss mask value %d at index %d (must be 0 or 1)" % (path, max(mask), mask.index(max(mask))))
    return (toks, mask) if with_mask else toks


def write_tokenizer(path, token_bytes_list, eot_id):
    """Write a decode-only tokenizer: token_bytes_list[i] is the bytes of token i."""
    V = len(token_bytes_list)
    if not 0 <= eot_id < V:
        raise ValueError("eot_id %d out of range for vocab size %d" % (eot_id, V))
    header = array(U32, [0] * HEADER_INTS)
    header[0], header[1], header[2], header[3] = TOKENIZER_MAGIC, TOKENIZER_VERSION, V, eot_id
    body = bytearray()
    for i, b in enumerate(token_bytes_list):
        b = bytes(b)
        if len(b) > 255:
            raise ValueError("token %d is %d bytes; the format allows at most 255" % (i, len(b)))
        body.append(len(b))
        body += b
    _write_atomic(path, [_le(header).tobytes(), bytes(body)])


def read_tokenizer(path):
    """Return (list of bytes per token id, eot_id)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < HEADER_BYTES:
        raise ShardError("%s: file is %d bytes, shorter than the %d-byte header"
                         % (path, len(data), HEADER_BYTES))
    header = array(U32)
    header.frombytes(data[:HEADER_BYTES])
    header = _le(header)
    if header[0] != TOKENIZER_MAGIC:
        raise ShardError("%s: bad tokenizer magic %d (expected %d)"
                         % (path, header[0], TOKENIZER_MAGIC))
    if header[1] != TOKENIZER_VERSION:
        raise ShardError("%s: tokenizer version %d, expected %d"
                         % (path, header[1], TOKENIZER_VERSION))
    V, eot = header[2], header[3]
    out, pos = [], HEADER_BYTES
    for i in range(V):
        if pos >= len(data):
            raise ShardError("%s: truncated at token %d of %d" % (path, i, V))
        n = data[pos]
        if pos + 1 + n > len(data):
            raise ShardError("%s: truncated inside token %d of %d" % (path, i, V))
        out.append(data[pos + 1:pos + 1 + n])
        pos += 1 + n
    if pos != len(data):
        raise ShardError("%s: %d trailing bytes after %d tokens" % (path, len(data) - pos, V))
    if not eot < V:
        raise ShardError("%s: eot id %d >= vocab size %d" % (path, eot, V))
    return out, eot


def byte_tokenizer_bytes():
    """The built-in byte tokenizer: ids 0..255 are bytes, 256 is <|endoftext|>."""
    return [bytes([i]) for i in range(256)] + [b"<|endoftext|>"]


BYTE_EOT, BYTE_VOCAB = 256, 257


def split_documents(tokens, eot_id):
    """Split a token stream at EOT tokens into documents (lists of tokens, EOT
    removed). A leading EOT starts the first document; it does not end one."""
    docs, cur, started = [], [], False
    for t in tokens:
        if t == eot_id:
            if started or cur:
                docs.append(cur)
            cur, started = [], True
        else:
            cur.append(t)
    if started or cur:
        docs.append(cur)
    return docs


def decode(tokens, token_bytes_list):
    """Concatenate the bytes of `tokens`."""
    return b"".join(token_bytes_list[t] for t in tokens)


def random_tokens(n, vocab_size, seed=12345):
    """n pseudo-random token ids below vocab_size (a 64-bit LCG, the same on every
    machine): benchmark data for vocabularies the built-in corpus does not have."""
    x, toks = seed, array(U16 if vocab_size <= 65536 else U32)
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        toks.append((x >> 33) % vocab_size)
    return toks


def _main(argv):
    """python data/shards.py FILE... : print a summary of each shard.
    python data/shards.py --random N V OUT : write N random tokens below V to OUT."""
    import argparse
    ap = argparse.ArgumentParser(
        prog="shards.py", description="Print a summary of each token shard (count, token width, first tokens), "
        "or with --random write N pseudo-random tokens below V to OUT (benchmark data).",
        epilog="The shard and tokenizer formats: this file's docstring and doc/formats.md.")
    ap.add_argument("files", nargs="*", metavar="FILE", help="token shards to summarise")
    ap.add_argument("--random", nargs=3, metavar=("N", "V", "OUT"), help="write N random tokens below V to OUT")
    a = ap.parse_args(argv)
    if a.random and a.files:
        ap.error("--random N V OUT takes no shard files")
    if not a.random and not a.files:
        ap.error("give token shard files, or --random N V OUT")
    try:
        if a.random:
            try:
                n, v = int(a.random[0]), int(a.random[1])
            except ValueError:
                ap.error("--random N V OUT: N and V must be integers, got %r and %r" % tuple(a.random[:2]))
            if n < 0 or not 0 < v <= 2**32:
                ap.error("--random N V OUT: N must be >= 0 and V in [1, 2^32], got %d and %d" % (n, v))
            write_shard(a.random[2], random_tokens(n, v), v)
            return
        for p in a.files:
            toks = read_shard(p)
            width = "uint16" if toks.typecode == U16 else "uint32"
            print("%s: %d tokens (%s), first %s" % (p, len(toks), width, list(toks[:8])))
    except (OSError, ValueError) as e:  # ShardError is a ValueError
        sys.exit("shards.py: error: %s" % e)


if __name__ == "__main__":
    _main(sys.argv[1:])
