// libFuzzer harness: pre-tokenized passkey prompts (a kind-3 tensor file). run_retrieval
// (llmc/evaluate.h) itself, with --passkey_prompts and a stand-in model: it loads the file
// with passkey_prompts_load (llmc/passkey.h) and walks the prompts by their lengths and
// offsets as an evaluation does; the stand-in reads every prompt token it is given.
#include "fuzz.h"
#include "llmc/evaluate.h"
#include "fuzz_tensor.h"

enum { VOCAB = 50257 };

// The model's greedy decoding: reads the prompt, answers digits.
static void greedy_stub(void *ctx, const int *prompt, int n, int n_new, const PosStep *ps, int *out) {
    (void)ctx, (void)ps;
    for (int i = 0; i < n; i++) fuzz_sink += prompt[i];
    for (int j = 0; j < n_new; j++) out[j] = '0' + j % 10;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *null_out;
    if (!null_out) null_out = (fopen)("/dev/null", "w");  // not tracked: kept for every input
    const char *path = tensor_input_path(data, size);
    fail_quiet = 1;
    if (setjmp(fail_jump) == 0) {
        Config c;  // the flags of an evaluation with --passkey_prompts
        config_defaults(&c);
        c.V = VOCAB;
        snprintf(c.passkey_prompts, sizeof(c.passkey_prompts), "%s", path);
        EvalModel m = {NULL, NULL, NULL, greedy_stub};
        Tokenizer tok;
        tokenizer_init_bytes(&tok);
        PosConfig pc = pos_config_of(&c);
        EvalScaling es = eval_scaling_of(&c);
        Retrieval t = retrieval_of(&c, TASK_PASSKEY);
        run_retrieval(&t, &c, &m, &tok, &pc, &es, null_out);
    }
    fuzz_release();
    return 0;
}

#ifdef SEED_MAIN
// Prompts as data/passkey_prompts.py writes them: the end-of-text token, then the prompt
// (here the byte tokenizer's text from passkey_build_text, one token per byte).
static void seed_prompts(const char *dir, const char *name, int n, const int *lengths) {
    static int tokens[1 << 14];
    int offsets[16] = {0}, keys[16];
    float depths[16];
    char text[4096];
    Rng r = rng_make(1, 2);
    for (int i = 0; i < n; i++) {
        keys[i] = passkey_draw_key(&r, 0);
        double depth;
        int nb = lengths[i] > 1 ? passkey_build_text(text, lengths[i] - 1, keys[i], rng_f32(&r), &depth) : -1;
        if (nb < 0) nb = 0, depth = 0;  // too short for the text: the end-of-text token alone
        depths[i] = (float)depth;
        tokens[offsets[i]] = 256;
        for (int j = 0; j < nb; j++) tokens[offsets[i] + 1 + j] = (unsigned char)text[j];
        offsets[i + 1] = offsets[i] + 1 + nb;
    }
    TensorWriter w;
    char path[1024];
    tw_open(&w, seed_path(path, sizeof(path), dir, name), TF_KIND_DUMP, 5);
    tw_add1(&w, "tokens", TF_I32, offsets[n], tokens);
    tw_add1(&w, "offsets", TF_I32, n + 1, offsets);
    tw_add1(&w, "keys", TF_I32, n, keys);
    tw_add1(&w, "lengths", TF_I32, n, lengths);
    tw_add1(&w, "depths", TF_F32, n, depths);
    tw_close(&w);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    if (setjmp(fail_jump)) return 1;  // a writer failed (it printed why)
    int two_lengths[4] = {256, 256, 320, 320}, tiny[3] = {4, 1, 4}, none[1] = {0};
    seed_prompts(argv[1], "two_lengths.bin", 4, two_lengths);
    seed_prompts(argv[1], "tiny.bin", 3, tiny);
    seed_prompts(argv[1], "no_prompts.bin", 0, none);
    return 0;
}
#endif
