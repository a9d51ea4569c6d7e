"""Write HellaSwag (Zellers et al., 2019; the PosAug paper's Table 14) as a tokenized file.

    python data/hellaswag.py --tokenizer neox                  # validation set -> data/hellaswag/hellaswag_val_neox.bin
    python data/hellaswag.py --tokenizer byte --n 500          # the first 500 examples, byte tokens
    python data/hellaswag.py --input my.jsonl --tokenizer_file tokenizer.json --out hs.bin

The validation set (10,042 examples) is downloaded once from the HellaSwag repository
into data/hellaswag/ (--input reads a local jsonl of the same fields instead). Each
example is scored as lm-evaluation-harness's `hellaswag` task does: the context is
preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize()), each of the four
endings is preprocess(ending) continued after a space; the trainers sum the ending's
token losses given the context (`--hellaswag FILE`): acc picks the ending with the
lowest sum, acc_norm the lowest sum per character of the ending. preprocess strips,
turns " [title]" into ". ", removes other [bracketed] tags and doubled spaces. The
context starts with the end-of-text token, as every training document does
(data/prepare.py); --no_eot leaves it out.

Output: a named-tensor file (dev/tensorfile.py, kind 3; doc/formats.md §10):
    ctx_tokens   int32 (sum of context lengths)   contexts, concatenated
    ctx_offsets  int32 (n+1)                      context i is ctx_tokens[ctx_offsets[i]:ctx_offsets[i+1]]
    end_tokens   int32 (sum of ending lengths)    endings (each with its leading space), 4 per example
    end_offsets  int32 (4n+1)                     ending j of example i is end_tokens[end_offsets[4i+j]:end_offsets[4i+j+1]]
    end_chars    int32 (4n)                       characters of each ending's text (acc_norm's divisor)
    labels       int32 (n)                        the correct ending, 0..3
"""
import argparse
import json
import os
import re
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "dev"))
import needs  # noqa: E402

with needs.deferred(__name__) as missing:
    import numpy as np
    import tensorfile  # noqa: E402
    from passkey_prompts import Encoder  # noqa: E402

URL = "https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl"
KIND = 3


def die(msg):
    sys.exit("hellaswag.py: error: " + msg)


def preprocess(text):
    """lm-evaluation-harness's HellaSwag preprocessing."""
    text = text.strip()
    text = text.replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def example_texts(ex):
    """(context, [4 endings with their leading space], label) of one jsonl record."""
    try:
        ctx = ex["ctx_a"] + " " + ex["ctx_b"].capitalize()
        context = preprocess(ex["activity_label"] + ": " + ctx)
        endings = [" " + preprocess(e) for e in ex["endings"]]
        label = int(ex["label"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError("missing or bad field (%s)" % e)
    if len(endings) != 4 or not 0 <= label < 4:
        raise ValueError("needs 4 endings and a label in 0..3, got %d endings, label %d" % (len(endings), label))
    return context, endings, label


def read_jsonl(path, n):
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(example_texts(json.loads(line)))
            except ValueError as e:
                die("%s line %d: %s" % (path, lineno, e))
            if n and len(out) == n:
                break
    if not out:
        die("%s holds no examples" % path)
    return out


def build(enc, examples, use_eot=True):
    ctx_tok, ctx_off, end_tok, end_off, end_chars, labels = [], [0], [], [0], [], []
    for context, endings, label in examples:
        ids = ([enc.eot] if use_eot else []) + enc.encode(context)
        ctx_tok.extend(ids)
        ctx_off.append(len(ctx_tok))
        for e in endings:
            e_ids = enc.encode(e)
            if not e_ids:
                die("an ending encodes to no tokens: %r" % e)
            end_tok.extend(e_ids)
            end_off.append(len(end_tok))
            end_chars.append(len(e) - 1)  # the ending's characters, without the joining space
        labels.append(label)
    i32 = lambda a: np.array(a, dtype=np.int32)  # noqa: E731
    return [("ctx_tokens", i32(ctx_tok)), ("ctx_offsets", i32(ctx_off)), ("end_tokens", i32(end_tok)),
            ("end_offsets", i32(end_off)), ("end_chars", i32(end_chars)), ("labels", i32(labels))]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Tokenize HellaSwag's validation set (tensor file, kind 3).")
    ap.add_argument("--tokenizer", default="neox", choices=["neox", "gpt2", "byte"],
                    help="hub tokenizer (needs internet) or byte tokens (id = byte, EOT 256)")
    ap.add_argument("--tokenizer_file", default=None, help="local `tokenizers` JSON file (overrides --tokenizer)")
    ap.add_argument("--eot_token", default="<|endoftext|>")
    ap.add_argument("--no_eot", action="store_true", help="do not start each context with the EOT token")
    ap.add_argument("--input", default=None, help="a local HellaSwag jsonl (default: download the validation set)")
    ap.add_argument("--n", type=int, default=0, help="the first N examples (default: all)")
    ap.add_argument("--out", default=None, help="default data/hellaswag/hellaswag_val_<tokenizer>.bin")
    args = ap.parse_args(argv)
    missing.check()
    if args.n < 0:
        die("--n must be >= 0")
    src = args.input
    if src is None:
        src = os.path.join(HERE, "hellaswag", "hellaswag_val.jsonl")
        if not os.path.exists(src):
            os.makedirs(os.path.dirname(src), exist_ok=True)
            print("downloading %s" % URL)
            try:
                urllib.request.urlretrieve(URL, src + ".tmp")
            except OSError as e:
                die("cannot download %s (%s); pass --input FILE" % (URL, e))
            os.replace(src + ".tmp", src)
    elif not os.path.exists(src):
        die("--input %s does not exist" % src)
    enc = Encoder(args)
    if not args.no_eot and enc.eot is None:
        die("the tokenizer has no token %r (set --eot_token, or --no_eot)" % args.eot_token)
    examples = read_jsonl(src, args.n)
    tensors = build(enc, examples, not args.no_eot)
    name = "byte" if args.tokenizer_file is None and args.tokenizer == "byte" else \
        os.path.splitext(os.path.basename(args.tokenizer_file))[0] if args.tokenizer_file else args.tokenizer
    out = args.out or os.path.join(HERE, "hellaswag", "hellaswag_val_%s.bin" % name)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tensorfile.write(out, KIND, tensors)
    t = dict(tensors)
    print("wrote %s: %d examples, %d context and %d ending tokens (tokenizer %s), labels %s"
          % (out, len(examples), len(t["ctx_tokens"]), len(t["end_tokens"]), enc.name,
             np.bincount(t["labels"], minlength=4).tolist()))


if __name__ == "__main__":
    main()
