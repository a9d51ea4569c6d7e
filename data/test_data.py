"""Tests for data/ (stdlib, plus `tokenizers` for the BPE tests, which SKIP without it), and
every data/ script's --help and missing-package line.

    python data/test_data.py

Prints PASS/FAIL/SKIP per test and ends with "N passed, N failed, N skipped";
exits 1 if any test failed.
"""
import atexit
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from array import array

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "dev"))
import builtin_corpus  # noqa: E402
import prepare  # noqa: E402
import shards  # noqa: E402
from testkit import Skip, Suite  # noqa: E402

SUITE = Suite()
test = SUITE.test


def tmpdir():
    d = tempfile.mkdtemp(prefix="test_data_")
    atexit.register(shutil.rmtree, d, True)
    return d


def run(script, *args):
    r = subprocess.run([sys.executable, os.path.join(HERE, script)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "%s failed (rc %d): %s" % (script, r.returncode, r.stderr[-2000:])
    return r.stdout


def expect_error(fn, *words):
    try:
        fn()
    except ValueError as e:
        msg = str(e)
        for w in words:
            assert w in msg, "error message %r lacks %r" % (msg, w)
        return msg
    raise AssertionError("no error raised")


def read_split(out_dir, name, split):
    """(decoded documents, shard paths) of a prepared split, via tokenizer.bin."""
    tb, eot = shards.read_tokenizer(os.path.join(out_dir, "tokenizer.bin"))
    paths = sorted(glob.glob(os.path.join(out_dir, "%s_%s_*.bin" % (name, split))))
    docs = []
    for p in paths:
        toks = shards.read_shard(p, len(tb))
        assert len(toks) and toks[0] == eot, "%s does not start with EOT" % p
        docs += [shards.decode(d, tb).decode("utf-8") for d in shards.split_documents(toks, eot)]
    return docs, paths


def sample_text():
    docs = builtin_corpus.generate(99, 60000)
    docs = [p for d in docs for p in prepare.split_text(d)][:150]
    docs += ["Unicode: caf\u00e9, na\u00efve, \u65e5\u672c\u8a9e, emoji \U0001F600.",
             "A web page with a literal <|endoftext|> in it.\nand a second line\twith a tab."]
    return docs


def write_text(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(docs) + "\n")


# ---- shards -----------------------------------------------------------------------
@test
def shard_roundtrip_uint16():
    d = tmpdir()
    p = os.path.join(d, "a.bin")
    toks = [0, 1, 256, 65535, 42] * 1000
    shards.write_shard(p, toks, 65536)
    with open(p, "rb") as f:
        head = array("i", f.read(12))
    if sys.byteorder == "big":
        head.byteswap()
    assert list(head) == [20240520, 1, len(toks)], head
    assert os.path.getsize(p) == 1024 + 2 * len(toks)
    assert list(shards.read_shard(p, 65536)) == toks
    assert not [f for f in os.listdir(d) if f != "a.bin"], "temporary file left behind"


@test
def shard_roundtrip_uint32():
    p = os.path.join(tmpdir(), "a.bin")
    toks = [0, 50276, 65536, 99999, 7] * 1000
    shards.write_shard(p, toks, 100000)
    with open(p, "rb") as f:
        head = array("i", f.read(12))
    if sys.byteorder == "big":
        head.byteswap()
    assert list(head) == [20240801, 7, len(toks)], head
    assert os.path.getsize(p) == 1024 + 4 * len(toks)
    assert list(shards.read_shard(p)) == toks


@test
def shard_empty_roundtrip():
    p = os.path.join(tmpdir(), "a.bin")
    shards.write_shard(p, [], 257)
    assert list(shards.read_shard(p)) == []


def _patched(tmp, index, value):
    p = os.path.join(tmp, "a.bin")
    shards.write_shard(p, list(range(100)), 257)
    with open(p, "r+b") as f:
        f.seek(4 * index)
        f.write(int(value).to_bytes(4, "little", signed=True))
    return p


@test
def reader_rejects_bad_magic():
    p = _patched(tmpdir(), 0, 12345)
    expect_error(lambda: shards.read_shard(p), "bad magic 12345", "20240520")


@test
def reader_rejects_bad_version():
    p = _patched(tmpdir(), 1, 7)
    expect_error(lambda: shards.read_shard(p), "version 7", "needs version 1")


@test
def reader_rejects_truncated():
    d = tmpdir()
    p = os.path.join(d, "a.bin")
    shards.write_shard(p, list(range(100)), 257)
    with open(p, "r+b") as f:
        f.truncate(1024 + 2 * 99)
    expect_error(lambda: shards.read_shard(p), "100 tokens", "truncated")
    with open(p, "r+b") as f:
        f.truncate(100)
    expect_error(lambda: shards.read_shard(p), "shorter than the 1024-byte header")
    p2 = _patched(d, 2, 50)   # header says fewer tokens than the file holds
    expect_error(lambda: shards.read_shard(p2), "trailing data")


@test
def reader_rejects_token_ge_vocab():
    p = os.path.join(tmpdir(), "a.bin")
    shards.write_shard(p, [1, 2, 300], 1000)
    expect_error(lambda: shards.read_shard(p, 257), "token id 300 at index 2", ">= vocab size 257")


@test
def writer_rejects_token_ge_vocab():
    d = tmpdir()
    p = os.path.join(d, "a.bin")
    expect_error(lambda: shards.write_shard(p, [1, 2, 257, 3], 257), "token id 257", "vocab size 257")
    expect_error(lambda: shards.write_shard(p, [1, -1], 257))
    expect_error(lambda: shards.write_shard(p, [70000], 65536))
    assert os.listdir(d) == [], "a rejected shard left a file: %s" % os.listdir(d)


@test
def shard_with_loss_mask():
    d = tmpdir()
    p = os.path.join(d, "m.bin")
    toks, mask = [256, 1, 2, 3, 4, 256, 5], [0, 0, 1, 1, 0, 0, 1]
    shards.write_shard(p, toks, 257, mask)
    t, m = shards.read_shard(p, 257, with_mask=True)
    assert list(t) == toks and list(m) == mask, (list(t), list(m))
    with open(p, "rb") as f:
        raw = f.read()
    assert len(raw) == 1024 + 2 * 7 + 7 and raw[12:16] == bytes([1, 0, 0, 0]), "header[3] and size"
    assert shards.read_shard(p, 257) == t and shards.read_shard_header(p) == (7, 2)
    shards.write_shard(p, toks, 257)
    assert shards.read_shard(p, 257, with_mask=True)[1] is None, "an unmasked shard has no mask"
    expect_error(lambda: shards.write_shard(p, toks, 257, [1, 0]), "one 0/1 per token")
    expect_error(lambda: shards.write_shard(p, toks, 257, [0] * 7), "a 1 somewhere")
    expect_error(lambda: shards.write_shard(p, toks, 257, [2] * 7), "0/1")
    shards.write_shard(p, toks, 257, mask)
    with open(p, "r+b") as f:
        f.seek(1024 + 14 + 3)
        f.write(bytes([7]))
    expect_error(lambda: shards.read_shard(p, 257), "loss mask value 7 at index 3")
    with open(p, "r+b") as f:
        f.truncate(1024 + 14 + 5)
    expect_error(lambda: shards.read_shard(p, 257), "truncated")


@test
def tokenizer_roundtrip():
    p = os.path.join(tmpdir(), "tok.bin")
    tb = [bytes([i]) for i in range(256)] + [b"", b"<|endoftext|>", "\u00e9t\u00e9".encode(), b"x" * 255]
    shards.write_tokenizer(p, tb, 257)
    got, eot = shards.read_tokenizer(p)
    assert got == tb and eot == 257
    with open(p, "rb") as f:
        head = array("I", f.read(16))
    if sys.byteorder == "big":
        head.byteswap()
    assert list(head) == [20240328, 2, len(tb), 257], head
    with open(p, "r+b") as f:
        f.truncate(os.path.getsize(p) - 3)
    expect_error(lambda: shards.read_tokenizer(p), "truncated")


# ---- built-in corpus ----------------------------------------------------------------
def _builtin(d, seed):
    run("builtin_corpus.py", "--seed", seed, "--out_dir", d, "--train_tokens", 60000,
        "--val_tokens", 15000)
    return {f: open(os.path.join(d, f), "rb").read() for f in ("train.bin", "val.bin", "tokenizer.bin")}


@test
def builtin_deterministic():
    a, b, c = _builtin(tmpdir(), 1337), _builtin(tmpdir(), 1337), _builtin(tmpdir(), 1338)
    assert a == b, "same seed gave different files"
    assert a["train.bin"] != c["train.bin"] and a["val.bin"] != c["val.bin"], "seed ignored"


@test
def builtin_structure():
    d = tmpdir()
    out = run("builtin_corpus.py", "--out_dir", d, "--train_tokens", 100000, "--val_tokens", 20000)
    assert "entropy" in out and "nats/token" in out, out
    tb, eot = shards.read_tokenizer(os.path.join(d, "tokenizer.bin"))
    assert (len(tb), eot) == (257, 256) and tb[256] == b"<|endoftext|>"
    firsts = {}
    for split, n in (("train", 100000), ("val", 20000)):
        toks = shards.read_shard(os.path.join(d, split + ".bin"), 257)
        assert toks.typecode == shards.U16
        assert n <= len(toks) < n + 5000, (split, len(toks))
        assert toks[0] == 256, "shard does not start with EOT"
        docs = shards.split_documents(toks, 256)
        assert toks.count(256) == len(docs) >= 3
        for doc in docs:
            assert 1400 <= len(doc) <= 4500, "document of %d bytes" % len(doc)
            text = bytes(doc).decode("ascii")
            head = text.split("\n")[0]
            name = head[len("The story of "):].split(" and the ")[0]
            assert text.count(name) >= 3, "entity %r is not referred back to" % name
        firsts[split] = {bytes(doc[:200]) for doc in docs}
    assert not firsts["train"] & firsts["val"], "train and val share documents"


@test
def rng_reference_values():
    # splitmix64, seed 1234567: the published reference outputs (e.g. Rosetta Code)
    r = builtin_corpus.Rng(1234567)
    got = [r.next() for _ in range(3)]
    assert got == [6457827717110365317, 3203168211198807973, 9817491932198370423], got


# ---- prepare.py ------------------------------------------------------------------------
@test
def prepare_local_byte_roundtrip():
    d = tmpdir()
    docs = sample_text()
    write_text(os.path.join(d, "in.txt"), docs)
    out = os.path.join(d, "out")
    run("prepare.py", "--local_text", os.path.join(d, "in.txt"), "--tokenizer", "byte",
        "--out_dir", out, "--shard_tokens", 4000, "--num_proc", 1)
    got, paths = read_split(out, "local", "train")
    assert len(paths) > 3, "expected several shards, got %d" % len(paths)
    assert got == docs, "decoded documents differ from the text"
    assert shards.read_shard(paths[0]).typecode == shards.U16
    for p in paths:   # documents are never split: every shard is <= the limit or one document
        n = len(shards.read_shard(p))
        assert n <= 4000 or shards.read_shard(p).count(256) == 1


@test
def prepare_workers_identical():
    d = tmpdir()
    write_text(os.path.join(d, "in.txt"), sample_text())
    outs = []
    for k in (1, 3):
        out = os.path.join(d, "out%d" % k)
        run("prepare.py", "--local_text", os.path.join(d, "in.txt"), "--tokenizer", "byte",
            "--dataset", "openwebtext", "--val_fraction", 0.1, "--out_dir", out,
            "--shard_tokens", 5000, "--num_proc", k)
        outs.append({f: open(os.path.join(out, f), "rb").read() for f in sorted(os.listdir(out))})
    assert outs[0] == outs[1], "output depends on --num_proc"


@test
def prepare_shuffle_holdout():
    d = tmpdir()
    docs = sample_text()
    write_text(os.path.join(d, "in.txt"), docs)
    res = {}
    for seed in (42, 43):
        out = os.path.join(d, "out%d" % seed)
        run("prepare.py", "--local_text", os.path.join(d, "in.txt"), "--tokenizer", "byte",
            "--dataset", "openwebtext", "--val_fraction", 0.1, "--seed", seed, "--out_dir", out,
            "--num_proc", 2)
        val, _ = read_split(out, "openwebtext", "val")
        train, _ = read_split(out, "openwebtext", "train")
        assert len(val) == round(0.1 * len(docs)) and len(val) + len(train) == len(docs)
        assert sorted(val + train) == sorted(docs), "documents lost or changed"
        assert train != [x for x in docs if x in set(train)], "train is not shuffled"
        res[seed] = (val, train)
    assert res[42][0] != res[43][0], "the seed does not change the held-out documents"


@test
def prepare_folder_and_policies():
    d = tmpdir()
    os.makedirs(os.path.join(d, "txt", "sub"))
    files = {"b.txt": "second doc\n\nstill second", "a.txt": "first doc",
             os.path.join("sub", "c.txt"): "third doc", "skip.md": "not text"}
    for f, t in files.items():
        with open(os.path.join(d, "txt", f), "w") as fh:
            fh.write(t)
    out = os.path.join(d, "out")
    run("prepare.py", "--local_text", os.path.join(d, "txt"), "--tokenizer", "byte",
        "--dataset", "wikitext103", "--out_dir", out)
    got, _ = read_split(out, "wikitext103", "val")   # a test/validation-only corpus -> val
    assert got == ["first doc", "second doc\n\nstill second", "third doc"], got
    assert not glob.glob(os.path.join(out, "*_train_*")), "wikitext103 wrote a train split"
    arts = list(prepare.wikitext_articles([" = A = \n", " x \n", " = = Sub = = \n", " = B = \n", " y \n"]))
    assert arts == [" = A = \n x \n = = Sub = = \n", " = B = \n y \n"], arts


def _tiny_bpe(d, docs):
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise Skip("the tokenizers library is not installed (pip install tokenizers)")
    write_text(os.path.join(d, "train.txt"), docs)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train([os.path.join(d, "train.txt")],
              trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False))
    path = os.path.join(d, "tok.json")
    tok.save(path)
    return path


@test
def prepare_bpe_roundtrip():
    d = tmpdir()
    docs = sample_text()
    tok = _tiny_bpe(d, docs)
    write_text(os.path.join(d, "in.txt"), docs)
    outs = []
    for k in (1, 2):
        out = os.path.join(d, "out%d" % k)
        run("prepare.py", "--local_text", os.path.join(d, "in.txt"), "--tokenizer_file", tok,
            "--out_dir", out, "--shard_tokens", 3000, "--num_proc", k)
        got, paths = read_split(out, "local", "train")
        assert len(paths) > 2, "expected several shards"
        assert got == docs, "BPE shards do not decode back to the text"
        outs.append([open(p, "rb").read() for p in paths])
    tb, eot = shards.read_tokenizer(os.path.join(d, "out1", "tokenizer.bin"))
    assert eot == 0 and tb[0] == b"<|endoftext|>" and len(tb) >= 300
    assert open(os.path.join(d, "out1", "tokenizer.json"), "rb").read() == open(tok, "rb").read(), \
        "tokenizer.json (for dev/export_hf.py) is not the tokenizer used"
    toks = shards.read_shard(paths[0])
    assert toks.count(eot) < len(toks) // 10, "BPE did not compress"
    assert outs[0] == outs[1], "output depends on --num_proc"
    # the literal "<|endoftext|>" inside a document is text, not a document boundary
    assert sum(len(shards.split_documents(shards.read_shard(p), eot)) for p in paths) == len(docs)


# ---- every script: --help, and one line for a missing package (issue 25) ------------------
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "dev"))
from needs import hiding_env as hiding, pythons  # noqa: E402  (the package-hiding helpers dev's tests share)


def data_scripts():
    out = []
    for p in sorted(glob.glob(os.path.join(HERE, "*.py"))):
        with open(p, encoding="utf-8") as f:
            if not os.path.basename(p).startswith("test_") and '__name__ == "__main__"' in f.read():
                out.append("data/" + os.path.basename(p))
    return out


def one_line(r, what):
    """The refusal's one stderr line: exit 1, no traceback, nothing on stdout."""
    err = r.stderr.strip()
    assert r.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1 and not r.stdout, \
        "%s: exit %d, %r" % (what, r.returncode, err[-1500:])
    return err


@test
def data_scripts_answer_help_without_packages():
    d = tmpdir()
    env, scripts = hiding(os.path.join(d, "hide")), data_scripts()
    assert len(scripts) >= 6 and "data/shards.py" in scripts, scripts
    for py in pythons():
        for rel in scripts:
            for flag in ("-h", "--help"):
                r = subprocess.run([py, os.path.join(HERE, os.path.basename(rel)), flag], capture_output=True,
                                   text=True, timeout=60, env=env, cwd=d)
                assert r.returncode == 0 and r.stdout.startswith("usage: ") and not r.stderr, \
                    "%s %s %s: exit %d, %r" % (py, rel, flag, r.returncode, (r.stderr or r.stdout)[-800:])


# (script, arguments that parse, packages hidden (none named: all), the one line)
MISSING_CASES = [
    ("hellaswag.py", ["--tokenizer", "byte", "--out", "hs.bin"], (),
     "error: data/hellaswag.py needs numpy: run `make venv` and use .venv/bin/python (or pip install numpy)"),
    ("passkey_prompts.py", ["--tokenizer", "byte", "--out", "pk.bin"], (),
     "error: data/passkey_prompts.py needs numpy: run `make venv` and use .venv/bin/python (or pip install numpy)"),
    ("rfs_tasks.py", ["--task", "copy", "--out_dir", "rfs"], (),
     "error: data/rfs_tasks.py needs numpy: run `make venv` and use .venv/bin/python (or pip install numpy)"),
    ("prepare.py", ["--local_text", "LOCAL", "--tokenizer", "neox", "--out_dir", "out"], ("tokenizers",),
     "prepare.py: error: the neox tokenizer needs the `tokenizers` library: run `make venv` and use "
     ".venv/bin/python (or pip install tokenizers)"),
    ("prepare.py", ["--local_text", "LOCAL", "--tokenizer_file", "tok.json", "--out_dir", "out"], ("tokenizers",),
     "prepare.py: error: --tokenizer_file needs the `tokenizers` library"),
    ("prepare.py", ["--dataset", "openwebtext", "--tokenizer", "byte", "--out_dir", "out"], ("datasets",),
     "prepare.py: error: downloading openwebtext needs the Hugging Face `datasets` library: pip install datasets"),
]


@test
def data_scripts_name_a_missing_package():
    d = tmpdir()
    local = os.path.join(d, "local.txt")
    write_text(local, sample_text())
    for k, (script, args, hidden, words) in enumerate(MISSING_CASES):
        cwd = os.path.join(d, "run%d" % k)
        os.makedirs(cwd)
        r = subprocess.run([sys.executable, os.path.join(HERE, script)] + [local if a == "LOCAL" else a for a in args],
                           capture_output=True, text=True, timeout=60, env=hiding(os.path.join(d, "hide%d" % k), *hidden),
                           cwd=cwd)
        err = one_line(r, script)
        assert err.startswith(words), "%s: %r lacks %r" % (script, err, words)
        assert os.listdir(cwd) == [], "%s left %s" % (script, os.listdir(cwd))


@test
def shards_cli_summary_random_and_bad_input():
    d = tmpdir()
    out = os.path.join(d, "r.bin")
    run("shards.py", "--random", 100, 70000, out)
    assert "r.bin: 100 tokens (uint32), first [" in run("shards.py", out)
    for args, words in (([os.path.join(d, "none.bin")], "No such file or directory"),
                        ([os.path.join(HERE, "shards.py")], "bad magic"),
                        ([out, os.path.join(d, "none.bin")], "none.bin")):
        r = subprocess.run([sys.executable, os.path.join(HERE, "shards.py")] + args, capture_output=True, text=True)
        err = r.stderr.strip()
        assert r.returncode == 1 and err.startswith("shards.py: error: ") and words in err and "Traceback" not in err \
            and len(err.splitlines()) == 1, "%s: exit %d, %r" % (args, r.returncode, err)
    for args, words in (([], "give token shard files, or --random N V OUT"),
                        (["--random", "10", "0", out], "V in [1, 2^32]"),
                        (["--random", "ten", "257", out], "N and V must be integers"),
                        (["--random", "10", "257", out, out], "--random N V OUT takes no shard files")):
        r = subprocess.run([sys.executable, os.path.join(HERE, "shards.py")] + args, capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.startswith("usage: ") and words in r.stderr and "Traceback" not in r.stderr, \
            "%s: exit %d, %r" % (args, r.returncode, r.stderr)
    assert sorted(os.listdir(d)) == ["r.bin"], os.listdir(d)


def main():
    sys.exit(SUITE.run())


if __name__ == "__main__":
    main()
