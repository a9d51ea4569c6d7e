// libFuzzer harness: tokenizer.bin in llm.c's format, tokenizer_load (llmc/tokenizer.h),
// then tokenizer_print of the first, the last, the end-of-text and out-of-range ids.
#include "fuzz.h"
#include "llmc/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *null_out;
    if (!null_out) null_out = (fopen)("/dev/null", "w");  // not tracked: kept for every input
    const char *path = fuzz_input_path(data, size);
    fail_quiet = 1;
    if (setjmp(fail_jump) == 0) {
        Tokenizer t;
        tokenizer_load(&t, path);
        int ids[] = {0, 1, t.eot, t.vocab_size - 1, t.vocab_size, -1};
        for (int i = 0; i < 6; i++) tokenizer_print(&t, ids[i], null_out);
        for (int i = t.vocab_size - 1; i >= 0; i--) free(t.pieces[i]);  // no tokenizer_free; newest first
        free(t.pieces);
        free(t.lens);
    }
    fuzz_release();
    return 0;
}

#ifdef SEED_MAIN
// A tokenizer.bin: the 256-uint32 header, then per id a length byte and the bytes
// (lens NULL: the pieces are C strings).
static void seed_tokenizer(const char *dir, const char *name, int n, const char *const *pieces,
                           const unsigned char *lens, int eot) {
    static unsigned char buf[1024 + 257 * 256];
    uint32_t h[256] = {20240328, 2, (uint32_t)n, (uint32_t)eot};
    memcpy(buf, h, sizeof(h));
    size_t off = sizeof(h);
    for (int i = 0; i < n; i++) {
        unsigned char len = lens ? lens[i] : (unsigned char)strlen(pieces[i]);
        buf[off++] = len;
        memcpy(buf + off, pieces[i], len);
        off += len;
    }
    seed_write(dir, name, buf, off);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    static char bytes[256];  // the byte tokenizer as a file: ids 0..255 are bytes, 256 end-of-text
    const char *byte_pieces[257];
    unsigned char byte_lens[257];
    for (int i = 0; i < 256; i++) bytes[i] = (char)i, byte_pieces[i] = bytes + i, byte_lens[i] = 1;
    byte_pieces[256] = "<|endoftext|>";
    byte_lens[256] = 13;
    seed_tokenizer(argv[1], "bytes.bin", 257, byte_pieces, byte_lens, 256);
    const char *bpe[] = {"<|endoftext|>", " the", " of", "ing", "\xc3\xa9", "", " pass key", "\n\n", " 1234", "."};
    seed_tokenizer(argv[1], "small_bpe.bin", 10, bpe, NULL, 0);
    seed_tokenizer(argv[1], "one.bin", 1, bpe, NULL, 0);
    return 0;
}
#endif
