"""Write pre-tokenized passkey-retrieval or RULER single-needle prompts (doc/evaluation.md).

    python data/passkey_prompts.py --tokenizer neox --lengths 1024,2048,4096 --out data/passkey_neox.bin
    python data/passkey_prompts.py --task ruler --tokenizer neox --lengths 4096 --n 50 --out data/ruler_neox.bin
    python data/passkey_prompts.py --tokenizer_file tokenizer.json --digits 5 --out passkey.bin
    python data/passkey_prompts.py --tokenizer byte --lengths 256,512,1024 --out passkey_bytes.bin

Prompt (the format of Landmark Attention, YaRN, LongLoRA), lines joined by "\\n":

    There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.
    The grass is green. The sky is blue. ... There and back again. The grass is green. ...   (filler before)
    The pass key is K. Remember it. K is the pass key.
    The grass is green. ...                                                                   (filler after)
    What is the pass key? The pass key is

The filler is the first N words of the repeated sentence block "The grass is green. The
sky is blue. The sun is yellow. Here we go. There and back again."; the needle goes at
the block boundary nearest to depth*N words (depth uniform in [0, 1)), so it always
sits between whole repeats; the last repeat may be cut after any word. N is the largest
word count whose prompt has at most the target length in tokens (so prompts are within
a token or two of the target). By default the prompt starts with the end-of-text token,
as every document in the training shards does (data/prepare.py); --no_eot leaves it out.
An empty filler line (needle at depth 0 or 1) is left out rather than written empty.

Output: a named-tensor file (dev/tensorfile.py, kind 3) with
    tokens  int32 (sum of prompt lengths)  all prompts concatenated
    offsets int32 (n+1)   prompt i is tokens[offsets[i]:offsets[i+1]]
    keys    int32 (n)     the pass key K of each prompt
    lengths int32 (n)     the target length (the prompt has <= this many tokens)
    depths  float32 (n)   realised needle depth: filler words before the needle / all filler words
Prompts are ordered by --lengths, then example index. K is uniform in [1, 50000], or in
[10^(d-1), 10^d - 1] with --digits d (the PosAug paper used 5). Randomness is splitmix64
(data/builtin_corpus.Rng) seeded from --seed and the target length, so the prompts of one
length do not depend on which other lengths are requested, and reruns are byte-identical.
The model's answer is correct when the first integer in its greedy output equals K.

--task ruler: RULER's single needle (niah_single with the noise haystack), as the byte
version of llmc/passkey.h builds it:

    Some special magic numbers are hidden within the following text. Make sure to memorize it. I will quiz you about the numbers afterwards.
    <fillers> One of the special magic numbers for KEY is: VALUE. <fillers>
    What is the special magic number for KEY mentioned in the provided text? The special magic number for KEY mentioned in the provided text is

with N whole filler sentence blocks joined by spaces, the needle after round(depth*N) of
them, KEY an adjective-noun pair from llmc/passkey.h's lists and VALUE a 7-digit number.
The file's `keys` hold the values; the answer is correct when VALUE appears in the
output (RULER's string match).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "dev"))
from builtin_corpus import Rng  # noqa: E402
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import tensorfile  # noqa: E402

KIND_PASSKEY = 3
INTRO = ("There is an important info hidden inside a lot of irrelevant text. "
         "Find it and memorize them. I will quiz you about the important information there.")
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "The pass key is {k}. Remember it. {k} is the pass key."
QUESTION = "What is the pass key? The pass key is"
FILLER_WORDS = FILLER.split(" ")


def die(msg):
    sys.exit("passkey_prompts.py: error: " + msg)


RULER_INTRO = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. "
               "I will quiz you about the numbers afterwards.")
RULER_ADJ = ["ancient", "bright", "calm", "damp", "eager", "faint", "gentle", "hollow",
             "icy", "jolly", "keen", "lively", "mellow", "noisy", "odd", "proud"]
RULER_NOUN = ["anchor", "basket", "candle", "desert", "engine", "forest", "garden", "harbor",
              "island", "jacket", "kettle", "ladder", "meadow", "needle", "orchard", "pillow"]


def ruler_text(key, value, n_blocks, depth):
    """RULER's prompt with n filler blocks, the needle after round(depth*n). (text, depth)."""
    before = int(depth * n_blocks + 0.5)
    parts = [FILLER] * before + ["One of the special magic numbers for %s is: %d." % (key, value)] \
        + [FILLER] * (n_blocks - before)
    question = ("What is the special magic number for {k} mentioned in the provided text? The special magic number "
                "for {k} mentioned in the provided text is").format(k=key)
    return "\n".join([RULER_INTRO, " ".join(parts), question]), (before / n_blocks if n_blocks else 0.0)


def prompt_text(key, n_words, depth):
    """The prompt with N filler words and the needle at the block boundary nearest depth*N.
    Returns (text, realised depth)."""
    per = len(FILLER_WORDS)
    words = [FILLER_WORDS[i % per] for i in range(n_words)]
    k = int(round(depth * n_words / per)) * per
    k = min(k, (n_words // per) * per) if n_words else 0
    before, after = " ".join(words[:k]), " ".join(words[k:])
    lines = [INTRO] + ([before] if before else []) + [NEEDLE.format(k=key)] \
        + ([after] if after else []) + [QUESTION]
    return "\n".join(lines), (k / n_words if n_words else 0.0)


class Encoder:
    """encode(text) -> list of ids; `eot` the end-of-text id or None."""

    def __init__(self, args):
        if args.tokenizer == "byte" and not args.tokenizer_file:
            self.tok, self.eot = None, 256
            self.name = "byte"
            return
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            needs.missing(e)
        if args.tokenizer_file:
            self.tok = Tokenizer.from_file(args.tokenizer_file)
            self.name = args.tokenizer_file
        else:
            import prepare  # hub lookup shared with prepare.py
            try:
                self.tok = Tokenizer.from_str(prepare.load_tokenizer_json(args))
            except SystemExit as e:
                die(str(e.code).replace("prepare.py: error: ", ""))
            self.name = args.tokenizer
        self.eot = self.tok.token_to_id(args.eot_token)

    def encode(self, text):
        if self.tok is None:
            return list(text.encode("utf-8"))
        return self.tok.encode(text, add_special_tokens=False).ids


def build_prompt(enc, prefix, key, depth, target, guess=0, text_fn=None):
    """Largest filler count N (words; blocks for RULER's text_fn(n, depth)) with
    len(prefix + tokens) <= target, searched from `guess` (the previous prompt's N) by
    galloping, then bisection. Returns (ids, depth, N)."""
    cache = {}
    text_fn = text_fn or (lambda n, d: prompt_text(key, n, d))

    def ids_for(n):
        if n not in cache:
            text, d = text_fn(n, depth)
            cache[n] = (prefix + enc.encode(text), d)
        return cache[n]

    def fits(n):
        return len(ids_for(n)[0]) <= target

    if not fits(0):
        die("target length %d is shorter than the prompt without filler (%d tokens)"
            % (target, len(ids_for(0)[0])))
    n, step = max(int(guess), 0), 1
    if fits(n):                      # gallop up: lo fits, hi does not
        lo, hi = n, n + step
        while fits(hi):
            lo, step = hi, step * 2
            hi = lo + step
    else:                            # gallop down
        hi, lo = n, max(n - step, 0)
        while not fits(lo):
            hi, step = lo, step * 2
            lo = max(hi - step, 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    best = lo                        # guard against a one-token wobble when the needle moves a block
    for n in (lo + 2, lo + 3):
        if fits(n):
            best = n
    ids, d = ids_for(best)
    return ids, d, best


def key_range(digits):
    if digits is None:
        return 1, 50000
    if not 1 <= digits <= 9:
        die("--digits must be in 1..9")
    return 10 ** (digits - 1) if digits > 1 else 1, 10 ** digits - 1


def make_prompts(enc, lengths, n, seed, digits=None, use_eot=True, task="passkey"):
    kmin, kmax = key_range(digits) if task == "passkey" else (1000000, 9999999)
    prefix = [enc.eot] if use_eot else []
    toks, offsets, keys, lens, depths = [], [0], [], [], []
    for L in lengths:
        rng = Rng((seed * 0x100000001B3) ^ (L * 0x9E3779B97F4A7C15))
        guess = L // 2 if task == "passkey" else 0
        for _ in range(n):
            key = kmin + rng.below(kmax - kmin + 1)
            text_fn = None
            if task == "ruler":
                word = "%s-%s" % (RULER_ADJ[rng.below(16)], RULER_NOUN[rng.below(16)])
                text_fn = (lambda w, v: lambda nb, dd: ruler_text(w, v, nb, dd))(word, key)
            depth = rng.below(1 << 53) / float(1 << 53)
            ids, d, guess = build_prompt(enc, prefix, key, depth, L, guess, text_fn)
            toks.extend(ids)
            offsets.append(len(toks))
            keys.append(key)
            lens.append(L)
            depths.append(d)
    return [("tokens", np.array(toks, dtype=np.int32)),
            ("offsets", np.array(offsets, dtype=np.int32)),
            ("keys", np.array(keys, dtype=np.int32)),
            ("lengths", np.array(lens, dtype=np.int32)),
            ("depths", np.array(depths, dtype=np.float32))]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write pre-tokenized passkey or RULER prompts (tensor file, kind 3).")
    ap.add_argument("--task", default="passkey", choices=["passkey", "ruler"],
                    help="passkey (--passkey_prompts) or RULER's single needle (--ruler_prompts)")
    ap.add_argument("--tokenizer", default="neox", choices=["neox", "gpt2", "byte"],
                    help="hub tokenizer (needs internet) or byte tokens (id = byte, EOT 256)")
    ap.add_argument("--tokenizer_file", default=None, help="local `tokenizers` JSON file (overrides --tokenizer)")
    ap.add_argument("--eot_token", default="<|endoftext|>")
    ap.add_argument("--no_eot", action="store_true", help="do not start each prompt with the EOT token")
    ap.add_argument("--lengths", default="1024,2048,4096", help="comma-separated target lengths in tokens")
    ap.add_argument("--n", type=int, default=100, help="prompts per length")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--digits", type=int, default=None, help="K with exactly this many digits (default: K in [1, 50000])")
    ap.add_argument("--out", default="data/passkey_prompts.bin")
    args = ap.parse_args(argv)
    missing.check()
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    except ValueError:
        die("--lengths must be comma-separated integers, got %r" % args.lengths)
    if not lengths or min(lengths) <= 0:
        die("--lengths must be positive integers")
    if args.n <= 0:
        die("--n must be positive")
    enc = Encoder(args)
    if not args.no_eot and enc.eot is None:
        die("the tokenizer has no token %r (set --eot_token, or --no_eot)" % args.eot_token)
    if args.task == "ruler" and args.digits is not None:
        die("--digits is the passkey's; RULER's values have 7 digits")
    tensors = make_prompts(enc, lengths, args.n, args.seed, args.digits, not args.no_eot, args.task)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    tensorfile.write(args.out, KIND_PASSKEY, tensors)
    t = dict(tensors)
    plen = np.diff(t["offsets"])
    for L in lengths:
        m = t["lengths"] == L
        print("length %6d: %d prompts, tokens min %d max %d, keys %d..%d"
              % (L, m.sum(), plen[m].min(), plen[m].max(), t["keys"][m].min(), t["keys"][m].max()))
    print("wrote %s (%d prompts, %d tokens, tokenizer %s)" % (args.out, len(plen), len(t["tokens"]), enc.name))


if __name__ == "__main__":
    main()
