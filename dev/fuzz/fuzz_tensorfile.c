// libFuzzer harness: named-tensor files and checkpoints (llmc/tensorfile.h, llmc/checkpoint.h).
// tf_load any kind; read every element it vouches for; tf_find/tf_get on a few names; for a
// test case (kind 1) config_from_case; for a checkpoint (kind 2) its kept flags (meta.flags),
// checkpoint_meta and, when the model it declares is small, checkpoint_load(CK_RESUME) into
// buffers of that model.
#include "fuzz.h"
#include "llmc/checkpoint.h"
#include "fuzz_tensor.h"

enum { MAX_DIM = 1 << 12, MAX_FLOATS = 1 << 18 };  // per group: at most 3 MB for params, m, v

// The run config that resumes the checkpoint: its model and scheme, as the flags would
// give them, and its tensor shapes. 0 when a size is out of [1, MAX_DIM] or the model
// exceeds MAX_FLOATS.
static int small_config(Config *c, const int32_t *ci, const TrainState *st, float rope_base, Shape *s, size_t *total) {
    const int32_t *dims = ci + CKI_C;  // C, L, NH, NKV, F, T
    for (int i = 0; i < 6; i++)
        if (dims[i] < 1 || dims[i] > MAX_DIM) return 0;
    if (ci[CKI_V] < 1 || ci[CKI_V] > MAX_DIM) return 0;
    if (st->wpe_rows > MAX_DIM) return 0;
    config_defaults(c);
    c->V = ci[CKI_V];
    round_vocab(c);
    c->C = ci[CKI_C]; c->L = ci[CKI_L]; c->NH = ci[CKI_NH]; c->NKV = ci[CKI_NKV]; c->F = ci[CKI_F]; c->T = ci[CKI_T];
    adopt_checkpoint_scheme(c, st);  // as evaluating it does: the scheme, QK-norm, the table's rows
    c->rope_base = rope_base;
    param_shapes(c, s);
    *total = 0;
    for (int i = 0; i < NP; i++) *total += s[i].numel;
    return *total <= MAX_FLOATS;
}

static void load_checkpoint(const TensorFile *tf, const char *path) {
    int32_t ci[CKI_N];
    TrainState st;
    checkpoint_meta(tf, ci, &st);
    const float *cf = (const float *)tf_get(tf, "meta.config_f", TF_F32, 5);
    Config c;
    Shape s[NP];
    size_t total;
    if (!small_config(&c, ci, &st, cf[0], s, &total)) return;
    float *buf = (float *)xmalloc(3 * total * sizeof(float)), *views[3][NP], *p = buf;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < NP; i++) {
            views[g][i] = p;
            p += s[i].numel;
        }
    checkpoint_load(&c, &st, path, views[0], views[1], views[2], CK_RESUME);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = tensor_input_path(data, size);
    fail_quiet = 1;
    if (setjmp(fail_jump) == 0) {
        TensorFile tf;
        tf_load(&tf, path, 0);
        for (int i = 0; i < tf.n; i++) {  // the first byte of every element
            const TensorEntry *e = &tf.t[i];
            for (size_t j = 0; j < e->numel; j++) fuzz_sink += ((const unsigned char *)e->data)[j * tf_dtype_size(e->dtype)];
        }
        static const char *names[] = {"meta.config_i", "param.wte", "tokens", "config_i"};
        for (int i = 0; i < 4; i++) {
            const TensorEntry *e = tf_find(&tf, names[i]);
            if (e && e->numel) fuzz_sink += *(const unsigned char *)tf_get(&tf, names[i], e->dtype, e->numel);
        }
        if (tf.kind == TF_KIND_REFERENCE) {
            Config c;
            int micro;
            config_from_case(&c, &tf, &micro);
        }
        if (tf.kind == TF_KIND_CHECKPOINT) {
            static char flags[sizeof(((Config *)0)->run_flags)];
            checkpoint_flags(&tf, flags, sizeof(flags));  // the run's kept flags, as --resume reads them
            fuzz_sink += flags[0];
            load_checkpoint(&tf, path);
        }
        tf_free(&tf);
    }
    fuzz_release();
    return 0;
}

#ifdef SEED_MAIN
// A real checkpoint of a tiny model (V 2, C 4, L 1, NH 2, NKV 1, F 8, T 4: about 8 KB),
// written by checkpoint_save; m and v NULL: weights only.
static void seed_checkpoint(const char *dir, const char *name, int pos, int pe, int qk_norm, int with_moments) {
    Config c;
    config_defaults(&c);
    c.V = 2; round_vocab(&c);
    c.C = 4; c.L = 1; c.NH = 2; c.NKV = 1; c.F = 8; c.T = 4;
    c.pos_scheme = pos; c.pe = pe; c.qk_norm = qk_norm; c.rpe_max = 8 * c.T;
    Shape s[NP];
    param_shapes(&c, s);
    size_t total = 0;
    for (int i = 0; i < NP; i++) total += s[i].numel;
    float *buf = (float *)xcalloc(3 * total, sizeof(float)), *views[3][NP], *p = buf;
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < NP; i++) {
            views[g][i] = p;
            p += s[i].numel;
        }
    param_init(&c, views[0], (uint64_t)c.seed);
    for (size_t i = 0; i < total; i++) buf[total + i] = 1e-3f, buf[2 * total + i] = 1e-6f;
    TrainState st = {.step = 7, .data_epoch = 1, .data_shard = 0, .data_sample = 3};
    char path[1024];
    checkpoint_save(&c, &st, seed_path(path, sizeof(path), dir, name), views[0], with_moments ? views[1] : NULL,
                    with_moments ? views[2] : NULL);
    free(buf);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    if (setjmp(fail_jump)) return 1;  // a writer failed (it printed why)
    const char *dir = argv[1];
    seed_checkpoint(dir, "ck_rope.bin", POS_ROPE, PE_ROPE, 0, 1);
    seed_checkpoint(dir, "ck_posaug_qknorm.bin", POS_POSAUG, PE_ROPE, 1, 1);
    seed_checkpoint(dir, "ck_learned.bin", POS_ROPE, PE_LEARNED, 0, 1);
    seed_checkpoint(dir, "ck_rpe_learned_qknorm.bin", POS_RPE, PE_LEARNED, 1, 1);
    seed_checkpoint(dir, "ck_weights_only.bin", POS_ROPE, PE_ALIBI, 0, 0);
    char path[1024];
    TensorWriter w;  // a test case (kind 1), as config_from_case reads it
    int32_t ci[12] = {2, 128, 4, 1, 2, 1, 8, 4, 1, 1, 2, 0}, pos_kind = PE_SINUSOIDAL, qk = 1, ps[2] = {POS_RPE, 1};
    float cf[10] = {10000, 1e-5f, 3e-3f, 3e-4f, 0.1f, 0.9f, 0.95f, 1e-8f, 1, 8};
    tw_open(&w, seed_path(path, sizeof(path), dir, "case.bin"), TF_KIND_REFERENCE, 5);
    tw_add1(&w, "config_i", TF_I32, 12, ci);
    tw_add1(&w, "config_f", TF_F32, 10, cf);
    tw_add1(&w, "pos_kind", TF_I32, 1, &pos_kind);
    tw_add1(&w, "qk_norm", TF_I32, 1, &qk);
    tw_add1(&w, "pos_scheme", TF_I32, 2, ps);
    tw_close(&w);
    int shape[3] = {2, 3, 2}, tokens[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // a dump (kind 3): every dtype, 0 to 3 dims
    uint64_t big[2] = {1, 1ull << 40};
    float x = 0.5f;
    tw_open(&w, seed_path(path, sizeof(path), dir, "dump.bin"), TF_KIND_DUMP, 4);
    tw_add(&w, "tokens", TF_I32, 3, shape, tokens);
    tw_add(&w, "x", TF_F32, 0, NULL, &x);
    tw_add1(&w, "u", TF_U64, 2, big);
    tw_add1(&w, "empty", TF_F32, 0, NULL);
    tw_close(&w);
    tw_open(&w, seed_path(path, sizeof(path), dir, "no_tensors.bin"), TF_KIND_DUMP, 0);
    tw_close(&w);
    return 0;
}
#endif
