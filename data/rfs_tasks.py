"""Synthetic length-generalization tasks of the RFS paper (its Section 4.1, appendix B.4,
after Kazemnejad et al. 2023), in byte tokens (vocab 257, end-of-text 256).

    python data/rfs_tasks.py --task copy --train_len 16 --out_dir data/tasks/copy
    python data/rfs_tasks.py --task addition --train_len 6 --test_len 18 --seq_len 128 --out_dir data/tasks/add

Formats (the paper's Table 4 with single letters as words):
    copy       "Copy: k h a\\n"                        -> "k h a"
    reverse    "Reverse: k h a\\n"                     -> "a h k"
    addition   "Compute 3 5 + 6 2 7 ?\\n"              -> "The answer is 6 6 2."
    sort       "Sort the following list [ 9 8, 5 ].\\n" -> "The sorted list is [ 5, 9 8 ]."   (numbers of 1-2 digits)
    summation  "Compute: 3 + 9 + 2 .\\n"               -> "The answer is 4 ."                (the one's place)
The length of an example is its number of words (copy, reverse), digits of each operand
(addition) or items (sort, summation). Training uses lengths 1..--train_len, the test file
1..--test_len (default 3x) with --n_test examples each.

Output in --out_dir:
    train.bin  a token shard with a loss mask (doc/formats.md §1): every example starts a
               window of --seq_len tokens: end-of-text, the prompt, the answer, then
               end-of-text padding; the mask marks the answer tokens only, so the trainers'
               windows (T+1 tokens at stride T, --seq_len T) each hold one example and train
               on its answer;
    val.bin    the same layout and mask (the validation loss is the answers' loss);
    test.bin   a named-tensor file (kind 3; doc/formats.md §11) for --task_eval: prompts
               (end-of-text, then the prompt), answers, and each example's length.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "dev"))
import needs  # noqa: E402
import shards  # noqa: E402
from builtin_corpus import Rng  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import tensorfile  # noqa: E402

EOT, VOCAB, KIND = 256, 257, 3
TASKS = ("copy", "reverse", "addition", "sort", "summation")
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def die(msg):
    sys.exit("rfs_tasks.py: error: " + msg)


def spaced(n):
    return " ".join(str(n))


def example(task, k, rng):
    """(prompt, answer) of length k."""
    if task in ("copy", "reverse"):
        words = [LETTERS[rng.below(26)] for _ in range(k)]
        out = words if task == "copy" else words[::-1]
        return "%s: %s\n" % ("Copy" if task == "copy" else "Reverse", " ".join(words)), " ".join(out)
    if task == "addition":
        lo = 10 ** (k - 1) if k > 1 else 0
        a, b = lo + rng.below(10 ** k - lo), lo + rng.below(10 ** k - lo)
        return "Compute %s + %s ?\n" % (spaced(a), spaced(b)), "The answer is %s." % spaced(a + b)
    if task == "sort":
        items = [rng.below(100) for _ in range(k)]
        return ("Sort the following list [ %s ].\n" % ", ".join(spaced(x) for x in items),
                "The sorted list is [ %s ]." % ", ".join(spaced(x) for x in sorted(items)))
    if task == "summation":
        terms = [rng.below(10) for _ in range(k)]
        return "Compute: %s .\n" % " + ".join(str(x) for x in terms), "The answer is %d ." % (sum(terms) % 10)
    die("unknown task %r" % task)


def encode(text):
    return list(text.encode("ascii"))


def training_stream(task, n, train_len, T, rng, with_mask):
    """n examples, each padded to T tokens (the window stride), then one extra EOT so the
    last window is whole. Returns (tokens, mask or None)."""
    toks, mask = [], []
    for _ in range(n):
        k = 1 + rng.below(train_len)
        p, a = example(task, k, rng)
        ids, ans = [EOT] + encode(p), encode(a)
        if len(ids) + len(ans) > T:
            die("a %s example of length %d takes %d tokens, more than --seq_len %d: lower --train_len or raise "
                "--seq_len" % (task, k, len(ids) + len(ans), T))
        pad = T - len(ids) - len(ans)
        toks += ids + ans + [EOT] * pad
        mask += [0] * len(ids) + [1] * len(ans) + [0] * pad
    toks.append(EOT)
    mask.append(0)
    return toks, (mask if with_mask else None)


def test_file(task, test_len, n, rng):
    p_tok, p_off, a_tok, a_off, lens = [], [0], [], [0], []
    for k in range(1, test_len + 1):
        for _ in range(n):
            p, a = example(task, k, rng)
            p_tok += [EOT] + encode(p)
            a_tok += encode(a)
            p_off.append(len(p_tok))
            a_off.append(len(a_tok))
            lens.append(k)
    i32 = lambda x: np.array(x, dtype=np.int32)  # noqa: E731
    return [("prompt_tokens", i32(p_tok)), ("prompt_offsets", i32(p_off)), ("answer_tokens", i32(a_tok)),
            ("answer_offsets", i32(a_off)), ("lengths", i32(lens))]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write an RFS-paper length-generalization task (train/val shards, test file).")
    ap.add_argument("--task", required=True, choices=TASKS)
    ap.add_argument("--train_len", type=int, default=16, help="training lengths 1..N")
    ap.add_argument("--test_len", type=int, default=0, help="test lengths 1..N (default 3 x --train_len)")
    ap.add_argument("--seq_len", type=int, default=128, help="the trainer's --seq_len: one example per window")
    ap.add_argument("--n_train", type=int, default=20000, help="training examples")
    ap.add_argument("--n_val", type=int, default=500)
    ap.add_argument("--n_test", type=int, default=50, help="test examples per length")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out_dir", required=True)
    args = ap.parse_args(argv)
    missing.check()
    test_len = args.test_len or 3 * args.train_len
    for name in ("train_len", "seq_len", "n_train", "n_val", "n_test"):
        if getattr(args, name) < 1:
            die("--%s must be positive" % name)
    if test_len < args.train_len:
        die("--test_len %d is below --train_len %d" % (test_len, args.train_len))
    if args.task == "addition" and test_len > 18:
        die("addition operands stay below 10^18: --test_len at most 18")
    os.makedirs(args.out_dir, exist_ok=True)
    rng = Rng(args.seed * 0x9E3779B97F4A7C15 + TASKS.index(args.task))
    toks, mask = training_stream(args.task, args.n_train, args.train_len, args.seq_len, rng, True)
    shards.write_shard(os.path.join(args.out_dir, "train.bin"), toks, VOCAB, mask)
    vtoks, vmask = training_stream(args.task, args.n_val, args.train_len, args.seq_len, rng, True)
    shards.write_shard(os.path.join(args.out_dir, "val.bin"), vtoks, VOCAB, vmask)
    tensors = test_file(args.task, test_len, args.n_test, rng)
    tensorfile.write(os.path.join(args.out_dir, "test.bin"), KIND, tensors)
    print("wrote %s: %s, %d training examples (lengths 1..%d, %.1f%% of tokens counted), %d validation, "
          "test lengths 1..%d x %d" % (args.out_dir, args.task, args.n_train, args.train_len,
                                       100.0 * sum(mask) / len(mask), args.n_val, test_len, args.n_test))


if __name__ == "__main__":
    main()
