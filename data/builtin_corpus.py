"""The built-in corpus: English-like stories made from templates (stdlib only).

Every document (about 1500-4000 bytes) invents its own people, a place and a few
items (an object with a colour, a container and a 4-digit code). The opening
paragraph introduces them; the rest of the story keeps referring back to them
("Tovrin Quell keeps the key 4821 in the blue box." ... much later ... "Tovrin
Quell opened the blue box and took out the key 4821."). The names and codes are
fresh in every document, so predicting them later needs the earlier context
(copying over hundreds of bytes), while the sentence templates and the common
words are predictable from the last few bytes.

Output: <out_dir>/train.bin and <out_dir>/val.bin (llm.c uint16 shards, byte
tokens: id = byte value, EOT = 256, V = 257, every document preceded by EOT)
and <out_dir>/tokenizer.bin. Train and val come from different random streams.

Deterministic across Python versions and platforms: the only randomness is the
splitmix64 generator below, driven by integer arithmetic.

    python data/builtin_corpus.py [--seed 1337] [--out_dir data/builtin]
                                  [--train_tokens 4000000] [--val_tokens 400000]
"""
import argparse
import math
import os
import sys
import time
from array import array

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shards  # noqa: E402

MASK64 = (1 << 64) - 1


class Rng:
    """splitmix64 (Steele, Lea, Flood 2014): a 64-bit state and an output mix."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        """An integer in [0, n)."""
        return (self.next() * n) >> 64

    def pick(self, seq):
        return seq[self.below(len(seq))]

    def sample(self, seq, k):
        """k distinct elements of seq (partial Fisher-Yates)."""
        pool = list(seq)
        for i in range(k):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]


# ---- vocabulary -------------------------------------------------------------
ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v",
          "z", "br", "dr", "gr", "kr", "tr", "st", "th", "sh", "qu"]
VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou"]
CODAS = ["", "", "", "n", "r", "l", "s", "m", "th", "nd"]
PLACE_ENDS = ["", "", "ford", "dale", "mere", "wick", "holm", "stead"]
JOBS = ["baker", "miller", "sailor", "weaver", "farmer", "smith", "teacher",
        "doctor", "painter", "fisher", "guard", "merchant", "potter", "clerk"]
KINDS = ["village", "town", "harbor", "valley", "city", "island"]
WHERE = ["near the sea", "by a wide river", "between two hills",
         "at the edge of a dark forest", "on an old trade road", "under a tall mountain"]
COLORS = ["red", "blue", "green", "yellow", "black", "white", "brown", "gray"]
CONTAINERS = ["box", "bag", "chest", "jar", "basket", "drawer", "sack", "trunk"]
OBJECTS = ["key", "map", "coin", "ring", "letter", "book", "lamp", "knife",
           "stone", "ticket", "watch", "bell"]
TIMES = ["In the morning", "At noon", "In the evening", "That night",
         "The next day", "After a while", "Later that week", "Before dawn"]
WEATHER = ["the sky was clear", "the wind was cold", "rain fell on the roofs",
           "the sun was warm", "a thin fog covered the fields", "the air was still"]
ANIMALS = ["dog", "cat", "horse", "goat", "old crow", "small bird"]
ANIMAL_DOES = ["slept", "waited", "played", "sat", "ran around", "watched the road"]
SPOTS = ["yard", "garden", "street", "barn", "square", "doorway"]
ADJS = ["quiet", "busy", "long", "cold", "bright", "strange", "slow", "happy"]

# ---- templates --------------------------------------------------------------
# Slots: {A}/{B} full names, {a}/{b} first names, {job}/{jobb} their jobs,
# {P} place name, {kind} its kind, {O} an item's owner (full name), {o} owner's
# first name, {obj} {color} {cont} {code} the item.
FILLER = [
    "{time}, {weather}.",
    "It was a {adj} day in the {kind}.",
    "The {animal} {does} in the {spot}.",
    "People in the {kind} went about their work.",
    "{time}, the {spot} was {adj}.",
    "Nobody said a word for a long time.",
    "The bells rang twice and then stopped.",
]
STORY = [
    "{a} walked to the market in {P}.",
    "{a} met {b} near the old bridge.",
    "{O} opened the {color} {cont} and took out the {obj} {code}.",
    "{o} put the {obj} {code} back in the {color} {cont}.",
    "\"Where is the {obj}?\" asked {b}. \"It is in the {color} {cont},\" said {o}.",
    "{o} told {b} that the number on the {obj} was {code}.",
    "Everyone in {P} knew {A}, the {job}.",
    "{b} asked {o} for the {obj}, but {o} said no.",
    "{o} remembered the number {code} and smiled.",
    "The {obj} in the {color} {cont} belonged to {O}.",
    "{A} the {job} worked all day in {P}.",
    "{a} and {b} had dinner together in {P}.",
    "{B} the {jobb} came to visit {a}.",
    "{a} looked for the {color} {cont}, but it was not there.",
    "The {color} {cont} of {o} was under the bed, with the {obj} {code} inside.",
    "{b} wrote the number {code} on a piece of paper.",
    "{a} said, \"I will go back to {P} tomorrow.\"",
]


def make_word(rng, syllables):
    return "".join(rng.pick(ONSETS) + rng.pick(VOWELS) + rng.pick(CODAS)
                   for _ in range(syllables))


def make_entities(rng):
    """Fresh people, a place and items for one document."""
    names = set()
    people = []
    while len(people) < 2 + rng.below(2):
        first = make_word(rng, 2).capitalize()
        last = make_word(rng, 1 + rng.below(2)).capitalize()
        if first in names or last in names:
            continue
        names.update((first, last))
        people.append({"a": first, "A": first + " " + last, "job": rng.pick(JOBS)})
    place = {"P": (make_word(rng, 2) + rng.pick(PLACE_ENDS)).capitalize(),
             "kind": rng.pick(KINDS)}
    n_items = 2 + rng.below(2)
    objs, colors, conts = (rng.sample(OBJECTS, n_items), rng.sample(COLORS, n_items),
                           rng.sample(CONTAINERS, n_items))
    items = []
    for i in range(n_items):
        k = i % len(people)   # the owner
        items.append({"obj": objs[i], "color": colors[i], "cont": conts[i], "owner": k,
                      "code": str(1000 + rng.below(9000)), "O": people[k]["A"], "o": people[k]["a"]})
    return people, place, items


def fill(rng, template, people, place, items):
    item = rng.pick(items)
    i = rng.below(len(people))
    # {b} is someone other than {a}, or other than the item's owner if it appears
    other_than = item["owner"] if ("{o}" in template or "{O}" in template) else i
    j = (other_than + 1 + rng.below(len(people) - 1)) % len(people)
    a, b = people[i], people[j]
    slots = dict(place)
    slots.update(item)
    slots.update(A=a["A"], a=a["a"], job=a["job"], B=b["A"], b=b["a"], jobb=b["job"],
                 time=rng.pick(TIMES), weather=rng.pick(WEATHER), adj=rng.pick(ADJS),
                 animal=rng.pick(ANIMALS), does=rng.pick(ANIMAL_DOES), spot=rng.pick(SPOTS))
    s = template.format(**slots)
    return s[0].upper() + s[1:]


def make_document(rng):
    people, place, items = make_entities(rng)
    a = people[0]
    intro = ["The story of %s and the %s." % (a["A"], items[0]["obj"]), ""]
    first = ["The %s of %s lies %s." % (place["kind"], place["P"], rng.pick(WHERE))]
    for p in people:
        first.append("%s is a %s who lives in %s." % (p["A"], p["job"], place["P"]))
    for it in items:
        first.append("%s keeps the %s %s in the %s %s."
                     % (it["O"], it["obj"], it["code"], it["color"], it["cont"]))
    paragraphs = [" ".join(first)]
    target = 1500 + rng.below(2300)
    size = len(intro[0]) + len(paragraphs[0])
    while size < target:
        para = []
        for _ in range(3 + rng.below(4)):
            pool = FILLER if rng.below(5) < 2 else STORY
            para.append(fill(rng, rng.pick(pool), people, place, items))
        paragraphs.append(" ".join(para))
        size += len(paragraphs[-1]) + 2
    it = items[-1]
    paragraphs.append("In the end, %s went home to %s, and the %s %s stayed in the %s %s. "
                      "The end." % (a["A"], place["P"], it["obj"], it["code"],
                                    it["color"], it["cont"]))
    return "\n".join(intro) + "\n" + "\n\n".join(paragraphs) + "\n"


def generate(seed, n_tokens):
    """Documents from stream `seed` until at least n_tokens byte tokens
    (counting one EOT per document). Returns (list of str)."""
    rng = Rng(seed)
    docs, total = [], 0
    while total < n_tokens:
        doc = make_document(rng)
        docs.append(doc)
        total += len(doc) + 1
    return docs


def to_tokens(docs):
    toks = array(shards.U16)
    for d in docs:
        toks.append(shards.BYTE_EOT)
        toks.extend(d.encode("ascii"))
    return toks


def unigram_entropy(docs):
    """Entropy (nats/token) of the token frequencies of the shard made from docs
    (bytes, plus one EOT per document)."""
    text = "".join(docs).encode("ascii")
    counts = [text.count(bytes([v])) for v in range(256)] + [len(docs)]
    n = sum(counts)
    return -sum(c / n * math.log(c / n) for c in counts if c)


def build(seed=1337, out_dir=None, train_tokens=4_000_000, val_tokens=400_000, quiet=False):
    t0 = time.time()
    out_dir = out_dir or os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin")
    master = Rng(seed)
    train_seed, val_seed = master.next(), master.next()   # two independent streams
    result = {}
    for split, stream, n in (("train", train_seed, train_tokens), ("val", val_seed, val_tokens)):
        docs = generate(stream, n)
        toks = to_tokens(docs)
        shards.write_shard(os.path.join(out_dir, split + ".bin"), toks, shards.BYTE_VOCAB)
        result[split] = (len(docs), len(toks), docs)
    shards.write_tokenizer(os.path.join(out_dir, "tokenizer.bin"),
                           shards.byte_tokenizer_bytes(), shards.BYTE_EOT)
    h = unigram_entropy(result["train"][2])
    dt = time.time() - t0
    if not quiet:
        print("builtin corpus (seed %d) in %s: train %d docs %d tokens, val %d docs %d tokens, "
              "V=%d, train unigram entropy %.4f nats/token, %.1f s"
              % (seed, out_dir, result["train"][0], result["train"][1], result["val"][0],
                 result["val"][1], shards.BYTE_VOCAB, h, dt))
    return {"train_docs": result["train"][0], "train_tokens": result["train"][1],
            "val_docs": result["val"][0], "val_tokens": result["val"][1],
            "entropy": h, "seconds": dt}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--out_dir", default=None, help="default: data/builtin next to this script")
    ap.add_argument("--train_tokens", type=int, default=4_000_000)
    ap.add_argument("--val_tokens", type=int, default=400_000)
    args = ap.parse_args()
    build(args.seed, args.out_dir, args.train_tokens, args.val_tokens)


if __name__ == "__main__":
    main()
