// Decoding tokens to text: bytes by default (id = byte, end-of-text = 256), or a
// tokenizer.bin in llm.c's format written by data/prepare.py:
//   256 uint32 header: [0] 20240328, [1] 2, [2] vocab size, [3] end-of-text id;
//   then per token id: uint8 length, that many bytes.
#pragma once
#include "utils.h"

typedef struct {
    int vocab_size, eot;
    char **pieces;  // NULL: the byte tokenizer
    unsigned char *lens;
} Tokenizer;

static inline void tokenizer_init_bytes(Tokenizer *t) {
    t->vocab_size = 257;
    t->eot = 256;
    t->pieces = NULL;
    t->lens = NULL;
}

static inline void tokenizer_load(Tokenizer *t, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail("--tokenizer: cannot open '%s'", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) fail("--tokenizer: '%s' is not a regular file", path);
    uint32_t h[256];
    xfread(h, sizeof(h), f, path, "the tokenizer header");
    if (h[0] != 20240328) fail("--tokenizer: '%s' has wrong magic %u (expected 20240328)", path, h[0]);
    if (h[1] != 2) fail("--tokenizer: '%s' has version %u (expected 2)", path, h[1]);
    if (h[2] == 0 || h[2] > (uint32_t)sb.st_size - sizeof(h))  // every token takes at least its length byte
        fail("--tokenizer: '%s' is corrupt: it declares %u tokens in %lld bytes", path, h[2], (long long)sb.st_size);
    t->vocab_size = (int)h[2];
    t->eot = (int)h[3];
    if (h[3] >= h[2]) fail("--tokenizer: '%s' is corrupt: end-of-text id %u, vocab size %u", path, h[3], h[2]);
    t->pieces = (char **)xmalloc(t->vocab_size * sizeof(char *));
    t->lens = (unsigned char *)xmalloc(t->vocab_size);
    for (int i = 0; i < t->vocab_size; i++) {
        xfread(&t->lens[i], 1, f, path, "a token length");
        t->pieces[i] = (char *)xmalloc(t->lens[i] + 1);
        xfread(t->pieces[i], t->lens[i], f, path, "a token");
        t->pieces[i][t->lens[i]] = 0;
    }
    fclose(f);
}

// Write the text of one token to `out`.
static inline void tokenizer_print(const Tokenizer *t, int id, FILE *out) {
    if (id == t->eot) { fputs("<|endoftext|>", out); return; }
    if (!t->pieces) { fputc(id & 0xff, out); return; }
    if (id >= 0 && id < t->vocab_size) fwrite(t->pieces[id], 1, t->lens[id], out);
}
