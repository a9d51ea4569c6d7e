"""Fetch a real corpus, tokenize it and write llm.c token shards.

    python data/prepare.py --dataset openwebtext --tokenizer neox
    python data/prepare.py --dataset tinystories --tokenizer gpt2
    python data/prepare.py --dataset tinyshakespeare --tokenizer byte
    python data/prepare.py --dataset wikitext103          # test split only -> *_val_*
    python data/prepare.py --dataset c4                   # validation split only
    python data/prepare.py --local_text my.txt --tokenizer byte   # no download

Writes data/<dataset>/<dataset>_{train,val}_NNNNNN.bin (llm.c shards, every
document preceded by the EOT token, documents never split across shards; a
shard holds at most --shard_tokens tokens unless one document is longer),
data/<dataset>/tokenizer.bin (decode-only, llm.c format) and, for a BPE
tokenizer, data/<dataset>/tokenizer.json (the `tokenizers` file itself, which
dev/export_hf.py --tokenizer_json gives to Hugging Face).

Splits: openwebtext has only a train split, so documents are shuffled (seeded)
and a seeded, document-level fraction is held out as val; tinyshakespeare's
first 10% of paragraphs are val; tinystories uses its train/validation splits;
wikitext103 writes its *test* split, c4 its validation split, both as "val".

--local_text PATH replaces the download with a text file (documents separated
by blank lines) or a folder of .txt files (one document per file, sorted by
path); everything after that is the same code path, including the dataset's
split policy (default dataset name "local": all documents go to --local_split).

Output is identical for any --num_proc: documents are tokenized in batches and
the batches are written back in input order.
"""
import argparse
import json
import os
import re
import sys
import time
from array import array
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import shards  # noqa: E402
from builtin_corpus import Rng  # noqa: E402

# policy: "shuffle" = seeded shuffle + held-out val fraction; "head" = first
# fraction of documents is val; None = the source's own splits.
DATASETS = {
    "openwebtext": dict(hf=("Skylion007/openwebtext", None), splits={"train": "train"},
                        policy="shuffle", val_fraction=0.0005),
    "tinystories": dict(hf=("roneneldan/TinyStories", None),
                        splits={"train": "train", "val": "validation"}, policy=None),
    "tinyshakespeare": dict(url="https://raw.githubusercontent.com/karpathy/char-rnn/"
                                "master/data/tinyshakespeare/input.txt",
                            policy="head", val_fraction=0.1),
    "wikitext103": dict(hf=("Salesforce/wikitext", "wikitext-103-raw-v1"),
                        splits={"val": "test"}, policy=None, articles=True),
    "c4": dict(hf=("allenai/c4", None), data_files={"validation": "en/c4-validation.*.json.gz"},
               splits={"val": "validation"}, policy=None),
    "local": dict(policy=None),
}
TOKENIZERS = {  # name -> (hub repo, expected vocab size, EOT id)
    "neox": ("EleutherAI/gpt-neox-20b", 50277, 0),
    "gpt2": ("openai-community/gpt2", 50257, 50256),
}


def die(msg):
    sys.exit("prepare.py: error: " + msg)


# ---- tokenizers ---------------------------------------------------------------
def bytes_to_unicode():
    """GPT-2's byte <-> printable-unicode table used by byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) \
        + list(range(ord("\xae"), ord("\xff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class ByteEncoder:
    vocab_size, eot = shards.BYTE_VOCAB, shards.BYTE_EOT

    def encode_batch(self, texts):
        return [t.encode("utf-8") for t in texts]

    def token_bytes(self):
        return shards.byte_tokenizer_bytes()


class HFEncoder:
    """A `tokenizers` tokenizer given as its JSON string (picklable spec)."""

    def __init__(self, json_str, eot_token="<|endoftext|>"):
        from tokenizers import Tokenizer
        self.tok = Tokenizer.from_str(json_str)
        cfg = json.loads(json_str)
        self.added = {t["id"]: t for t in cfg.get("added_tokens", [])}
        self.byte_level = '"ByteLevel"' in json.dumps(cfg.get("decoder"))
        self.vocab_size = max([self.tok.get_vocab_size(with_added_tokens=True)]
                              + [i + 1 for i in self.added])
        self.eot = self.tok.token_to_id(eot_token)
        if self.eot is None:
            die("the tokenizer has no token %r (set --eot_token)" % eot_token)
        specials = [t["content"] for t in self.added.values() if t.get("special")]
        self.special_re = re.compile("|".join(map(re.escape, specials))) if specials else None

    def _encode_literal(self, text):
        """Encode text in which special-token strings are ordinary text."""
        ids, pos = [], 0
        for m in self.special_re.finditer(text):
            lit = m.group()
            for piece in (text[pos:m.start()], lit[:1], lit[1:]):
                if piece:
                    ids.extend(self.tok.encode(piece, add_special_tokens=False).ids)
            pos = m.end()
        if pos < len(text):
            ids.extend(self.tok.encode(text[pos:], add_special_tokens=False).ids)
        return ids

    def encode_batch(self, texts):
        out = []
        for text, enc in zip(texts, self.tok.encode_batch(texts, add_special_tokens=False)):
            ids = enc.ids
            if self.special_re is not None and self.special_re.search(text):
                ids = self._encode_literal(text)   # e.g. "<|endoftext|>" inside a web page
            out.append(ids)
        return out

    def token_bytes(self):
        dec = {c: b for b, c in bytes_to_unicode().items()}
        out = []
        for i in range(self.vocab_size):
            if i in self.added:
                out.append(self.added[i]["content"].encode("utf-8"))
                continue
            s = self.tok.id_to_token(i)
            if s is None:
                out.append(b"")
            elif self.byte_level and all(c in dec for c in s):
                out.append(bytes(dec[c] for c in s))
            else:
                out.append(self.tok.decode([i], skip_special_tokens=False).encode("utf-8"))
        return out


def load_tokenizer_json(args):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        die("%s needs the `tokenizers` library: run `make venv` and use .venv/bin/python (or pip install "
            "tokenizers)" % ("--tokenizer_file" if args.tokenizer_file else "the %s tokenizer" % args.tokenizer))
    if args.tokenizer_file:
        with open(args.tokenizer_file, encoding="utf-8") as f:
            return f.read()
    repo = TOKENIZERS[args.tokenizer][0]
    try:
        return Tokenizer.from_pretrained(repo).to_str()
    except Exception as e:  # noqa: BLE001 - any hub/network failure
        die("could not fetch the tokenizer %s from the Hugging Face hub (%s: %s). "
            "Without internet access, pass a local tokenizer.json with --tokenizer_file PATH."
            % (repo, type(e).__name__, e))


def make_encoder(spec):
    kind, payload, eot_token = spec
    return ByteEncoder() if kind == "byte" else HFEncoder(payload, eot_token)


_ENC = None


def _worker_init(spec):
    global _ENC
    os.environ["TOKENIZERS_PARALLELISM"] = "false"   # parallelism comes from --num_proc
    _ENC = make_encoder(spec)


def _encode(texts):
    """Token arrays (compact to pickle) for a batch of texts."""
    code = shards.U16 if _ENC.vocab_size <= 65536 else shards.U32
    out = []
    for ids in _ENC.encode_batch(texts):
        a = array(code)
        a.extend(ids)   # not array(code, ids): that would reinterpret a bytes object
        out.append(a)
    return out


def tokenize(docs, spec, num_proc, batch_docs=256):
    """Yield token arrays (no EOT) for the documents, in input order."""
    def batches():
        batch = []
        for d in docs:
            batch.append(d)
            if len(batch) == batch_docs:
                yield batch
                batch = []
        if batch:
            yield batch
    if num_proc <= 1:
        _worker_init(spec)
        for b in batches():
            yield from _encode(b)
        return
    import multiprocessing as mp
    with mp.Pool(num_proc, initializer=_worker_init, initargs=(spec,)) as pool:
        pending = deque()  # bounded window of in-flight batches, collected in order
        for b in batches():
            pending.append(pool.apply_async(_encode, (b,)))
            if len(pending) >= 4 * num_proc:
                yield from pending.popleft().get()
        while pending:
            yield from pending.popleft().get()


# ---- shards ---------------------------------------------------------------------
class ShardWriter:
    def __init__(self, out_dir, name, split, shard_tokens, vocab_size, eot):
        self.out_dir, self.name, self.split = out_dir, name, split
        self.shard_tokens, self.vocab_size, self.eot = shard_tokens, vocab_size, eot
        self.code = shards.U16 if vocab_size <= 65536 else shards.U32
        self.buf, self.paths, self.tokens, self.docs = array(self.code), [], 0, 0

    def add(self, ids):
        if len(self.buf) and len(self.buf) + 1 + len(ids) > self.shard_tokens:
            self.flush()
        self.buf.append(self.eot)
        self.buf.extend(ids)
        self.docs += 1

    def flush(self):
        if not len(self.buf):
            return
        path = os.path.join(self.out_dir, "%s_%s_%06d.bin" % (self.name, self.split, len(self.paths)))
        shards.write_shard(path, self.buf, self.vocab_size)
        self.tokens += len(self.buf)
        self.paths.append(path)
        self.buf = array(self.code)

    def close(self):
        self.flush()
        pat = re.compile(r"%s_%s_(\d{6})\.bin$" % (re.escape(self.name), self.split))
        for f in sorted(os.listdir(self.out_dir)):   # stale shards of an earlier, longer run
            m = pat.match(f)
            if m and int(m.group(1)) >= len(self.paths):
                os.remove(os.path.join(self.out_dir, f))


# ---- documents ------------------------------------------------------------------
def split_text(text):
    """Documents of a text separated by blank lines (empty ones dropped)."""
    return [d.strip("\n") for d in re.split(r"\n(?:[ \t]*\n)+", text) if d.strip()]


def read_local(path):
    if os.path.isdir(path):
        files = sorted(os.path.relpath(os.path.join(r, f), path)
                       for r, _, fs in os.walk(path) for f in fs if f.endswith(".txt"))
        docs = []
        for f in files:
            with open(os.path.join(path, f), encoding="utf-8") as fh:
                docs.append(fh.read())
        return [d for d in docs if d.strip()]
    with open(path, encoding="utf-8") as f:
        return split_text(f.read())


def wikitext_articles(lines):
    """Group WikiText lines into articles; each starts at a ' = Title = ' line."""
    cur = []
    for line in lines:
        if re.match(r"^ = [^=].* = \n?$", line) and cur:
            yield "".join(cur)
            cur = []
        cur.append(line)
    if cur:
        yield "".join(cur)


class HFDocs:
    """Documents of a Hugging Face dataset split, with length and index access."""

    def __init__(self, ds, field="text"):
        self.ds, self.field = ds, field

    def __len__(self):
        return len(self.ds)

    def take(self, indices):
        for batch in self.ds.select(indices).iter(batch_size=1000):
            yield from batch[self.field]

    def __iter__(self):
        for batch in self.ds.iter(batch_size=1000):
            yield from batch[self.field]


def load_source(args, cfg):
    """{source split name: documents (list or HFDocs)}."""
    if args.local_text:
        return {"local": read_local(args.local_text)}
    if "url" in cfg:
        import urllib.request
        try:
            with urllib.request.urlopen(cfg["url"], timeout=60) as r:
                text = r.read().decode("utf-8")
        except Exception as e:  # noqa: BLE001
            die("could not download %s (%s: %s). Without internet access, download it "
                "elsewhere and pass it with --local_text PATH." % (cfg["url"], type(e).__name__, e))
        return {"all": split_text(text)}
    if "hf" not in cfg:
        die("--dataset %s needs --local_text PATH" % args.dataset)
    try:
        import datasets
    except ImportError:
        die("downloading %s needs the Hugging Face `datasets` library: pip install datasets "
            "(or pass --local_text PATH)" % args.dataset)
    path, name = args.hf_path or cfg["hf"][0], args.hf_name or cfg["hf"][1]
    out = {}
    for src in cfg["splits"].values():
        kw = dict(split=src, revision=args.hf_revision)
        if "data_files" in cfg and not args.hf_path:
            kw["data_files"] = {src: cfg["data_files"][src]}
        try:
            ds = datasets.load_dataset(path, name, **kw)
        except Exception as e:  # noqa: BLE001
            die("could not load %s (%s) split %s from the Hugging Face hub (%s: %s). Without "
                "internet access, pass the text with --local_text PATH."
                % (path, name, src, type(e).__name__, e))
        docs = HFDocs(ds)
        out[src] = list(wikitext_articles(docs)) if cfg.get("articles") else docs
    return out


def limit(docs, n):
    if not n or len(docs) <= n:
        return docs
    return docs[:n] if isinstance(docs, list) else HFDocs(docs.ds.select(range(n)))


def take(docs, indices):
    return (docs[i] for i in indices) if isinstance(docs, list) else docs.take(indices)


def permutation(n, seed):
    """Seeded Fisher-Yates permutation of range(n) (splitmix64, version-stable)."""
    rng, p = Rng(seed), list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng.below(i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def plan_splits(args, cfg, sources):
    """[(our split, document iterable, count)] following the dataset's policy."""
    policy = cfg.get("policy")
    if policy is None:
        if args.local_text:
            docs = limit(sources["local"], args.max_docs)
            return [(args.local_split or next(iter(cfg.get("splits", {"train": 0}))), docs, len(docs))]
        return [(ours, limit(sources[src], args.max_docs), None) for ours, src in cfg["splits"].items()]
    (docs,) = sources.values()
    docs = limit(docs, args.max_docs)
    n = len(docs)
    frac = cfg["val_fraction"] if args.val_fraction is None else args.val_fraction
    n_val = 0 if frac <= 0 else min(n, max(1, int(n * frac + 0.5)))
    order = permutation(n, args.seed) if policy == "shuffle" else list(range(n))
    return [("val", take(docs, order[:n_val]), n_val),
            ("train", take(docs, order[n_val:]), n - n_val)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=None, choices=sorted(DATASETS),
                    help="default: local with --local_text, else required")
    ap.add_argument("--tokenizer", default="neox", choices=["neox", "gpt2", "byte"])
    ap.add_argument("--tokenizer_file", default=None, help="local `tokenizers` JSON file")
    ap.add_argument("--eot_token", default="<|endoftext|>")
    ap.add_argument("--local_text", default=None, help="text file or folder of .txt files")
    ap.add_argument("--local_split", default=None, help="split name for --local_text "
                    "when the dataset has no split policy (default: its first split, or train)")
    ap.add_argument("--out_dir", default=None, help="default: data/<dataset>")
    ap.add_argument("--shard_tokens", type=int, default=100_000_000)
    ap.add_argument("--num_proc", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--seed", type=int, default=42, help="shuffle / hold-out seed")
    ap.add_argument("--val_fraction", type=float, default=None)
    ap.add_argument("--max_docs", type=int, default=0, help="only the first N documents per source split")
    ap.add_argument("--hf_path", default=None)
    ap.add_argument("--hf_name", default=None)
    ap.add_argument("--hf_revision", default=None, help="e.g. refs/convert/parquet")
    args = ap.parse_args(argv)
    if args.dataset is None:
        if not args.local_text:
            ap.error("--dataset is required (or --local_text PATH)")
        args.dataset = "local"
    cfg = DATASETS[args.dataset]
    out_dir = args.out_dir or os.path.join(HERE, args.dataset)
    t0 = time.time()

    if args.tokenizer == "byte" and not args.tokenizer_file:
        spec = ("byte", None, None)
    else:
        spec = ("hf", load_tokenizer_json(args), args.eot_token)
    enc = make_encoder(spec)
    if args.tokenizer in TOKENIZERS and not args.tokenizer_file:
        _, want_v, want_eot = TOKENIZERS[args.tokenizer]
        if (enc.vocab_size, enc.eot) != (want_v, want_eot):
            print("warning: %s tokenizer has V=%d EOT=%d, expected V=%d EOT=%d"
                  % (args.tokenizer, enc.vocab_size, enc.eot, want_v, want_eot))
    sources = load_source(args, cfg)   # fail on a download before writing anything
    os.makedirs(out_dir, exist_ok=True)
    shards.write_tokenizer(os.path.join(out_dir, "tokenizer.bin"), enc.token_bytes(), enc.eot)
    if spec[0] == "hf":  # the tokenizer itself, for dev/export_hf.py --tokenizer_json
        with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(spec[1])
    print("tokenizer: %s V=%d EOT=%d (%s tokens)" % (args.tokenizer_file or args.tokenizer,
          enc.vocab_size, enc.eot, shards.token_dtype(enc.vocab_size)))
    for split, docs, count in plan_splits(args, cfg, sources):
        w = ShardWriter(out_dir, args.dataset, split, args.shard_tokens, enc.vocab_size, enc.eot)
        nonempty = (d for d in docs if d)
        for ids in tokenize(nonempty, spec, args.num_proc):
            w.add(ids)
        w.close()
        print("%s %s: %d documents, %d tokens, %d shard(s) in %s (%.1f s)"
              % (args.dataset, split, w.docs, w.tokens, len(w.paths), out_dir, time.time() - t0))


if __name__ == "__main__":
    main()
