// libFuzzer harness: token shards in llm.c's format and with a loss mask, shard_load
// (llmc/dataloader.h).
#include "fuzz.h"
#include "llmc/dataloader.h"

enum { VOCAB = 50257 };  // GPT-2's: uint16 shards hold ids past it, uint32 shards far past

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_input_path(data, size);
    fail_quiet = 1;
    if (setjmp(fail_jump) == 0) {
        long n;
        unsigned char *mask;
        int *tok = shard_load(path, VOCAB, &n, &mask);
        for (long i = 0; i < n; i++) fuzz_sink += tok[i] + (mask ? mask[i] : 0);  // everything the loader vouched for
        free(tok);
        free(mask);
    }
    fuzz_release();
    return 0;
}

#ifdef SEED_MAIN
// A shard: the 256-int32 header of llmc/dataloader.h, then n tokens of `width` bytes.
static void seed_shard(const char *dir, const char *name, int width, long n, unsigned step) {
    static unsigned char buf[1024 + 4 * 1024];
    int32_t h[256] = {width == 2 ? SHARD_MAGIC_U16 : SHARD_MAGIC_U32, width == 2 ? 1 : 7, (int32_t)n};
    memcpy(buf, h, sizeof(h));
    for (long i = 0; i < n; i++) {
        uint32_t t = (uint32_t)((i * step) % VOCAB);
        if (i % 17 == 16) t = 256;  // an end-of-text between documents
        memcpy(buf + 1024 + i * width, &t, width);  // little-endian: the low bytes
    }
    seed_write(dir, name, buf, 1024 + n * width);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    seed_shard(argv[1], "u16_small.bin", 2, 8, 31);
    seed_shard(argv[1], "u16_bytes.bin", 2, 300, 7);
    seed_shard(argv[1], "u32_small.bin", 4, 5, 12345);
    seed_shard(argv[1], "u32_large_ids.bin", 4, 200, 50000);
    seed_shard(argv[1], "u16_one.bin", 2, 1, 1);
    return 0;
}
#endif
