// The parameter contract (names, shapes, which ones AdamW decays) and checkpoints,
// shared by both trainers so a checkpoint from either loads in the other.
// A checkpoint is a tensor file (llmc/tensorfile.h) of kind 2:
//   meta.config_i  int32 [V, Vp, C, L, NH, NKV, F, T, pos_scheme, pe, qk_norm, wpe_rows, arch]
//   meta.config_f  f32   [rope_base, rms_eps, alpha_min, alpha_max, alpha_fixed]
//   meta.state     u64   [step, seed, data_epoch, data_shard, data_sample]
//   meta.flags     int32 the run's flags as text, one byte per value (flags_to_ints): "name\tvalue\n"
//                        per flag the run was given or adopted (llmc/config.h, ArgSpec.run)
//   meta.embed_scale f32 [1] the token embedding's factor (embed_scale: sqrt(C) with the sinusoids;
//                        a checkpoint without it was trained with 1)
//   meta.pose_scaling int32 [1] the --scaling (SCALE_*) its --pose_scaling equals (SCALE_NONE without;
//                        a checkpoint without it has --pose_scaling yarn as YaRN's own: config.h)
//   param.<name>, adam_m.<name>, adam_v.<name>   f32, stacked shapes below (present tensors only)
// Written to a temporary file, flushed, then renamed.
#pragma once
#include "attn_bias.h"
#include "config.h"
#include "tensorfile.h"

// Parameters: one contiguous buffer per kind (weights, grads, moments), a named view per
// tensor, stacked over layers. Tensors a model does not have are numel 0: wpe exists with
// --pe learned and tupe (with tupe_uq, tupe_uk, tupe_ln_w, tupe_ln_b, tupe_bq), q_norm and
// k_norm with --qk_norm, rel_key or tpe_* with relative keys (PE_KEY_TABLE,
// llmc/attn_bias.h), a learned bias's tensors (BIAS_PARAM_TABLE there) with the encoding
// that reads them; --arch gru has wte, final_norm and the gru_* tensors (torch.nn.GRU's
// weight_ih_l*, weight_hh_l*, bias_ih_l*, bias_hh_l*, gates in the order r, z, n) instead of
// the blocks.
//
// The one table of them, in contract order (the checkpoint's and the init's): name (P_<name>
// is its index), its name in files, shape (ndim, then up to three sizes in terms of the config
// c, the transformer's layer count L, the GRU's Lg, the head size hd and qk = --qk_norm),
// init, AdamW weight decay, and its bounds [lo, hi] (the values the init and every AdamW path
// keep it in: a constraint; NO_LO, NO_HI: none). A new
// tensor is one row (appended: the init draws in this order, so an optional tensor never
// changes the others); the learned biases' rows come last, from llmc/attn_bias.h.
// The init: INIT_NORMAL, std (0.02 for matrices; 0.02 / sqrt(2L), proj, for the residual
// projections; 1 for T-PE's input weights and biases: hidden units that span the distances'
// range from the start; 0: zeros, drawing nothing); INIT_UNIFORM, lo, hi (the GRU's U(-1/sqrt(C), 1/sqrt(C)),
// torch.nn.GRU's default, k); INIT_CONST, value (norm gains 1).
#define CORE_PARAM_TABLE(X)                                                                                     \
    X(WTE, "wte", 2, c->Vp, c->C, 0, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                                       \
    X(ATTN_NORM, "attn_norm", 2, L, c->C, 0, INIT_CONST, 1.0f, 0, 0, NO_LO, NO_HI)                                 \
    X(WQ, "wq", 3, L, c->NH * hd, c->C, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                                    \
    X(WK, "wk", 3, L, c->NKV * hd, c->C, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                                   \
    X(WV, "wv", 3, L, c->NKV * hd, c->C, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                                   \
    X(WO, "wo", 3, L, c->C, c->NH * hd, INIT_NORMAL, proj, 0, 1, NO_LO, NO_HI)                                     \
    X(MLP_NORM, "mlp_norm", 2, L, c->C, 0, INIT_CONST, 1.0f, 0, 0, NO_LO, NO_HI)                                   \
    X(W_GATE, "w_gate", 3, L, c->F, c->C, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                                  \
    X(W_UP, "w_up", 3, L, c->F, c->C, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                                      \
    X(W_DOWN, "w_down", 3, L, c->C, c->F, INIT_NORMAL, proj, 0, 1, NO_LO, NO_HI)                                   \
    X(FINAL_NORM, "final_norm", 1, c->C, 0, 0, INIT_CONST, 1.0f, 0, 0, NO_LO, NO_HI)                               \
    X(WPE, "wpe", 2, wpe_rows(c), c->C, 0, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                                 \
    X(Q_NORM, "q_norm", 2, L, qk ? c->NH * hd : 0, 0, INIT_CONST, 1.0f, 0, 0, NO_LO, NO_HI)                        \
    X(K_NORM, "k_norm", 2, L, qk ? c->NKV * hd : 0, 0, INIT_CONST, 1.0f, 0, 0, NO_LO, NO_HI)                       \
    X(GRU_W_IH, "gru_w_ih", 3, Lg, 3 * c->C, c->C, INIT_UNIFORM, -k, k, 1, NO_LO, NO_HI)                          \
    X(GRU_W_HH, "gru_w_hh", 3, Lg, 3 * c->C, c->C, INIT_UNIFORM, -k, k, 1, NO_LO, NO_HI)                          \
    X(GRU_B_IH, "gru_b_ih", 2, Lg, 3 * c->C, 0, INIT_UNIFORM, -k, k, 0, NO_LO, NO_HI)                             \
    X(GRU_B_HH, "gru_b_hh", 2, Lg, 3 * c->C, 0, INIT_UNIFORM, -k, k, 0, NO_LO, NO_HI)                             \
    X(REL_KEY, "rel_key", 3, L, nk, hd, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                                    \
    X(TPE_W1, "tpe_w1", 2, L, fn ? TPE_HIDDEN : 0, 0, INIT_NORMAL, 1.0f, 0, 0, NO_LO, NO_HI)                       \
    X(TPE_B1, "tpe_b1", 2, L, fn ? TPE_HIDDEN : 0, 0, INIT_NORMAL, 1.0f, 0, 0, NO_LO, NO_HI)                       \
    X(TPE_W2, "tpe_w2", 3, L, fn ? hd : 0, TPE_HIDDEN, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                     \
    X(TUPE_UQ, "tupe_uq", 2, tu ? c->NH * hd : 0, c->C, 0, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                 \
    X(TUPE_UK, "tupe_uk", 2, tu ? c->NH * hd : 0, c->C, 0, INIT_NORMAL, 0.02f, 0, 1, NO_LO, NO_HI)                 \
    X(TUPE_LN_W, "tupe_ln_w", 1, tu ? c->C : 0, 0, 0, INIT_CONST, 1.0f, 0, 0, NO_LO, NO_HI)                        \
    X(TUPE_LN_B, "tupe_ln_b", 1, tu ? c->C : 0, 0, 0, INIT_CONST, 0.0f, 0, 0, NO_LO, NO_HI)                        \
    X(TUPE_BQ, "tupe_bq", 1, tu ? c->NH * hd : 0, 0, 0, INIT_CONST, 0.0f, 0, 0, NO_LO, NO_HI)
#define PARAM_TABLE(X) CORE_PARAM_TABLE(X) BIAS_PARAM_TABLE(X)

enum { INIT_NORMAL, INIT_UNIFORM, INIT_CONST };
#define PARAM_ENUM(e, ...) P_##e,
#define PARAM_NAME(e, name, ...) name,
#define PARAM_INIT_KIND(e, name, nd, d0, d1, d2, init, a, b, decay, lo, hi) init,
#define PARAM_DECAY_OF(e, name, nd, d0, d1, d2, init, a, b, decay, lo, hi) decay,
#define PARAM_LO_OF(e, name, nd, d0, d1, d2, init, a, b, decay, lo, hi) lo,
#define PARAM_HI_OF(e, name, nd, d0, d1, d2, init, a, b, decay, lo, hi) hi,
enum { PARAM_TABLE(PARAM_ENUM) NP };
#define P_BIAS0 ((int)NP - (int)BP_N)  // the learned biases' tensors: P_BIAS0 + BP_*
static const char *PARAM_NAMES[NP] = {PARAM_TABLE(PARAM_NAME)};
static const int PARAM_INITS[NP] = {PARAM_TABLE(PARAM_INIT_KIND)};
static const int PARAM_DECAY[NP] = {PARAM_TABLE(PARAM_DECAY_OF)};
static const float PARAM_LO[NP] = {PARAM_TABLE(PARAM_LO_OF)};  // each tensor's bounds
static const float PARAM_HI[NP] = {PARAM_TABLE(PARAM_HI_OF)};
// whether tensor i has a bound
static inline int param_bounded(int i) { return PARAM_LO[i] > -INFINITY || PARAM_HI[i] < INFINITY; }
// x held in tensor i's bounds (a NaN stays one, for the trainers to see)
static inline float param_clamp(int i, float x) { return x < PARAM_LO[i] ? PARAM_LO[i] : x > PARAM_HI[i] ? PARAM_HI[i] : x; }

typedef struct {
    int ndim, shape[3];
    size_t numel;  // 0: the tensor is not part of this model
} Shape;

// --describe: the trainer's tables as JSON, so that Python reads the schemes, encodings,
// scheme parameters and tensors from the trainer itself (dev/hf_llama.py), never from a copy.
static inline void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) printf(*s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
    putchar('"');
}

// [{"name": ..., "what": ...}, ...] of a name table and its descriptions
static inline void json_named(const char *const *names, const char *const *what, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) {
        printf("%s{\"name\": ", i ? ", " : "");
        json_str(names[i]);
        printf(", \"what\": ");
        json_str(what[i]);
        putchar('}');
    }
    putchar(']');
}

static inline void print_describe(void) {
    static const char *init_names[] = {"normal", "uniform", "constant"};
    printf("{\"pos\": ");
    json_named(POS_SCHEME_NAMES, POS_SCHEME_WHAT, POS_N_SCHEMES);
    printf(",\n \"pe\": ");
    json_named(PE_NAMES, PE_WHAT, PE_N);
    printf(",\n \"pos_params\": [");
    const char *sep = "";
#define POS_PARAM_JSON(field, ctype, argtype, flag, def, scheme, check, must, help) \
    printf("%s{\"flag\": \"%s\", \"scheme\": \"%s\", \"default\": %.9g, \"help\": ", sep, flag,           \
           POS_SCHEME_NAMES[scheme], (double)(def));                                                    \
    json_str(help);                                                                                     \
    printf("}");                                                                                        \
    sep = ", ";
    POS_PARAM_TABLE(POS_PARAM_JSON)
#undef POS_PARAM_JSON
    printf("],\n \"tensors\": [");
    for (int i = 0; i < NP; i++)
        printf("%s{\"name\": \"%s\", \"init\": \"%s\", \"decay\": %d}", i ? ", " : "", PARAM_NAMES[i],
               init_names[PARAM_INITS[i]], PARAM_DECAY[i]);
    printf("]}\n");
}

// Answers --describe (before any other flag is read) and exits.
static inline void describe_if_asked(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--describe") == 0) {
            print_describe();
            exit(0);
        }
}

static inline void param_shapes(const Config *c, Shape s[NP]) {
    int gru = c->arch == ARCH_GRU, hd = c->C / c->NH, L = gru ? 0 : c->L, Lg = gru ? c->L : 0, qk = c->qk_norm;
    RelShape rs = rel_shape_of(c);
    int kind = gru ? BIAS_NONE : pe_bias_kind(c->pe), nk = kind == BIAS_KEY ? pe_bias_buckets(c->pe, rs, c->T) : 0;
    int fn = kind == BIAS_KEY_FN, tu = !gru && pe_is(c->pe, PEF_UNTIED), nb = pe_bias_fn_buckets(c->pe, rs);
#define PARAM_SHAPE(e, name, nd, d0, d1, d2, ...) {nd, d0, d1, d2},
    int t[NP][4] = {PARAM_TABLE(PARAM_SHAPE)};  // ndim, shape
#undef PARAM_SHAPE
    unsigned bias = gru ? 0 : pe_bias_tensors(c->pe);
    for (int k = 0; k < BP_N; k++)  // a learned bias's tensors: those its encoding reads, one layer's when shared
        t[P_BIAS0 + k][1] = !(bias >> k & 1) ? 0 : pe_bias_shared(c->pe) ? 1 : t[P_BIAS0 + k][1];
    for (int i = 0; i < NP; i++) {
        s[i].ndim = t[i][0];
        s[i].numel = 1;
        for (int d = 0; d < 3; d++) s[i].shape[d] = t[i][d + 1];
        for (int d = 0; d < s[i].ndim; d++) s[i].numel *= (size_t)s[i].shape[d];
    }
}

// The learned bias's view of layer l (llmc/attn_bias.h) in the pass bp: its tensors' slices
// of the model's views w (NP of them, host or device pointers) and of the gradients' dw
// (NULL: none), and the layout of a gradient's partial row.
static inline BiasFn bias_fn_layer(const BiasPass *bp, int l, const Config *c, const Shape *shapes, const float *const *w,
                                   float *const *dw) {
    BiasFn f;
    memset(&f, 0, sizeof(f));
    f.pe = bp->pe;
    f.NH = c->NH;
    f.NB = pe_bias_fn_buckets(bp->pe, bp->rs);
    f.rs = bp->rs;
    f.alpha = bp->alpha[l];
    f.per_query = pe_bias_per_query(bp->pe);
    for (int k = 0; k < BP_N; k++) {
        int layers = shapes[P_BIAS0 + k].shape[0];  // L, or 1 when shared
        size_t n = layers ? shapes[P_BIAS0 + k].numel / layers : 0;  // one layer's floats
        size_t at = layers == 1 ? 0 : (size_t)l * n;
        if (!n) continue;
        f.w[k] = w[P_BIAS0 + k] + at;
        f.dw[k] = dw ? dw[P_BIAS0 + k] + at : NULL;
        f.off[k] = f.P;
        f.n_w[k] = (int)n;
        f.P += (int)n;
    }
    return f;
}

// Seeded init, identical in both trainers, each tensor by its PARAM_TABLE init (wte's
// padded rows V..Vp-1 zero), then held in its bounds. Tensors are drawn in table order.
static inline void param_init(const Config *c, float *const *views, uint64_t seed) {
    Shape shapes[NP];
    param_shapes(c, shapes);
    Rng r = rng_make(seed, RNG_INIT);
    float proj = 0.02f / sqrtf(2.0f * c->L), k = 1.0f / sqrtf((float)c->C);
#define PARAM_INIT_ARGS(e, name, nd, d0, d1, d2, init, a, b, decay, lo, hi) {(float)(a), (float)(b)},
    float args[NP][2] = {PARAM_TABLE(PARAM_INIT_ARGS)};
#undef PARAM_INIT_ARGS
    for (int i = 0; i < NP; i++) {
        float *p = views[i], a = args[i][0], b = args[i][1], mid = (a + b) / 2, half = (b - a) / 2;
        for (size_t j = 0; j < shapes[i].numel; j++) {
            switch (PARAM_INITS[i]) {
            case INIT_NORMAL: p[j] = a != 0.0f ? a * rng_normal(&r) : 0.0f; break;  // N(0, a^2); zeros, no draw, at a = 0
            case INIT_UNIFORM: p[j] = mid + half * (2.0f * rng_f32(&r) - 1.0f); break;  // U(a, b)
            default: p[j] = a; break;  // INIT_CONST
            }
            p[j] = param_clamp(i, p[j]);
        }
    }
    memset(views[P_WTE] + (size_t)c->V * c->C, 0, (size_t)(c->Vp - c->V) * c->C * sizeof(float));
}

typedef struct {
    long step;  // optimizer steps completed
    long data_epoch;
    int data_shard, data_sample;
    int pos_scheme, pe;  // the scheme, encoding and seed the checkpoint was trained with
    int qk_norm, wpe_rows;
    float alpha_min, alpha_max, alpha_fixed;
    long long seed;
} TrainState;

static const char *CK_GROUPS[3] = {"param", "adam_m", "adam_v"};

// The index of the first NaN or Inf in p (n floats), or -1.
static inline long first_nonfinite(const float *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(p[i])) return (long)i;
    return -1;
}

// params, m, v: host arrays of NP views each; m and v NULL to write weights only.
// Non-finite values are never written: the checkpoint on disk stays the last good one.
static inline void checkpoint_save(const Config *c, const TrainState *st, const char *path, float *const *params,
                                   float *const *m, float *const *v) {
    Shape shapes[NP];
    param_shapes(c, shapes);
    int32_t ci[CKI_N] = {c->V, c->Vp, c->C, c->L, c->NH, c->NKV, c->F, c->T, c->pos_scheme, pe_after_drop(c->pe, c->drope_step, st->step),
                         c->qk_norm, wpe_rows(c), c->arch};
    float cf[5] = {c->rope_base, c->rms_eps, c->alpha_min, c->alpha_max, c->alpha_fixed};
    uint64_t state[5] = {(uint64_t)st->step, (uint64_t)c->seed, (uint64_t)st->data_epoch, (uint64_t)st->data_shard,
                         (uint64_t)st->data_sample};
    int groups = m ? 3 : 1, present = 0;
    for (int i = 0; i < NP; i++) present += shapes[i].numel > 0;
    float *const *bufs[3] = {params, m, v};
    for (int gi = 0; gi < groups; gi++)
        for (int i = 0; i < NP; i++) {
            long bad = first_nonfinite(bufs[gi][i], shapes[i].numel);
            if (bad >= 0)
                fail("not saving '%s' at step %ld: %s.%s[%ld] is %g; the checkpoint on disk was left as it was", path,
                     st->step, CK_GROUPS[gi], PARAM_NAMES[i], bad, bufs[gi][i][bad]);
        }
    size_t nflags;
    int32_t *flags = flags_to_ints(c->run_flags, &nflags);
    TensorWriter w;
    tw_open(&w, path, TF_KIND_CHECKPOINT, 6 + groups * present);
    tw_add1(&w, "meta.config_i", TF_I32, CKI_N, ci);
    tw_add1(&w, "meta.config_f", TF_F32, 5, cf);
    tw_add1(&w, "meta.state", TF_U64, 5, state);
    tw_add1(&w, "meta.flags", TF_I32, (int)nflags, flags);
    free(flags);
    float es = embed_scale(c);
    tw_add1(&w, "meta.embed_scale", TF_F32, 1, &es);
    int32_t pose_method = POSE_SCALING_METHOD[c->pose_scaling];
    tw_add1(&w, "meta.pose_scaling", TF_I32, 1, &pose_method);
    char name[TF_MAX_NAME];
    for (int gi = 0; gi < groups; gi++)
        for (int i = 0; i < NP; i++) {
            if (!shapes[i].numel) continue;
            snprintf(name, sizeof(name), "%s.%s", CK_GROUPS[gi], PARAM_NAMES[i]);
            tw_add(&w, name, TF_F32, shapes[i].ndim, shapes[i].shape, bufs[gi][i]);
        }
    tw_close(&w);
}

// A learned bias's tensors in a checkpoint of encoding pe as this version has them: each one
// there, with one set for all layers where the encoding shares them. A checkpoint of an
// earlier form of the encoding (KERPLE's per-layer r1, r2; FIRE's threshold learned as L
// itself, before fire_l_mult) is refused for every use, naming the tensor.
static inline void checkpoint_bias_form(const TensorFile *tf, int pe) {
    char name[TF_MAX_NAME];
    for (int k = 0; k < BP_N; k++) {
        if (!(pe_bias_tensors(pe) >> k & 1)) continue;
        snprintf(name, sizeof(name), "param.%s", PARAM_NAMES[P_BIAS0 + k]);
        const TensorEntry *e = tf_find(tf, name);
        if (!e)
            fail("'%s' is a --pe %s model of an earlier form of the encoding: it has no %s (doc/schemes.md, --pe %s, "
                 "says what changed); it cannot be loaded: train it again with this version", tf->path, PE_NAMES[pe],
                 PARAM_NAMES[P_BIAS0 + k], PE_NAMES[pe]);
        if (pe_bias_shared(pe) && e->ndim > 0 && e->shape[0] != 1)
            fail("'%s' is a --pe %s model with one %s per layer (%d of them): this version shares one set across the "
                 "layers, as the encoding's released code does; it cannot be loaded: train it again with this version",
                 tf->path, PE_NAMES[pe], PARAM_NAMES[P_BIAS0 + k], e->shape[0]);
    }
}


// The model a checkpoint's header and kept flags describe: its shape, encoding and table from
// meta.config_i, the flags that size its relative encodings (--rel_clip, --t5_*) from
// meta.flags (both checked by checkpoint_header_check).
static inline void checkpoint_model(const TensorFile *tf, const CkptHeader *h, Config *m) {
    static char flags[sizeof(m->run_flags)];
    config_defaults(m);
    checkpoint_flags(tf, flags, sizeof(flags));
    for (char *line = flags, *next; *line; line = next) {
        next = strchr(line, '\n');
        *next++ = 0;
        char *value = strchr(line, '\t');
        *value++ = 0;
        set_arg(m, find_arg(line), value);
    }
    int *field[CKI_POS] = {&m->V, &m->Vp, &m->C, &m->L, &m->NH, &m->NKV, &m->F, &m->T};
    for (int i = 0; i < CKI_POS; i++) *field[i] = h->ci[i];
    m->pos_scheme = h->ci[CKI_POS];
    m->pe = h->ci[CKI_PE];
    m->qk_norm = h->ci[CKI_QK];
    m->learned_rows = h->ci[CKI_WPE];
    m->arch = h->ci[CKI_ARCH];
    RelShape rs = rel_shape_of(m);  // sizes whose shapes stay in range (the run's own limits: validate_config)
    if (rs.clip < 0 || rs.clip > MAX_POSITION || rs.t5_buckets < 0 || rs.t5_buckets > MAX_POSITION)
        fail("'%s' is corrupt: meta.flags sizes its relative encoding past %d (--rel_clip %d, --t5_buckets %d)", tf->path,
             MAX_POSITION, rs.clip, rs.t5_buckets);
}

// Every tensor of a checkpoint is one of its model's (checkpoint_model), f32 at that model's
// shape, none twice; the weights are all there, the AdamW moments all there or all absent.
// A tensor name this build does not know is a newer build's.
static inline void checkpoint_tensors_check(const TensorFile *tf, const CkptHeader *h) {
    Config m;
    checkpoint_model(tf, h, &m);
    Shape s[NP];
    param_shapes(&m, s);
    char model[160], what[200];
    snprintf(model, sizeof(model), "a %s with --pe %s%s, by meta.config_i and meta.flags", ARCH_NAMES[m.arch],
             PE_NAMES[m.pe], m.qk_norm ? " --qk_norm" : "");
    static unsigned char seen[3][NP];
    memset(seen, 0, sizeof(seen));
    for (int t = 0; t < tf->n; t++) {
        const TensorEntry *e = &tf->t[t];
        if (strncmp(e->name, "meta.", 5) == 0) continue;  // the header's (checkpoint_header_check)
        int g = 0, p = NP;
        for (; g < 3; g++) {
            size_t n = strlen(CK_GROUPS[g]);
            if (strncmp(e->name, CK_GROUPS[g], n) != 0 || e->name[n] != '.') continue;
            for (p = 0; p < NP && strcmp(e->name + n + 1, PARAM_NAMES[p]) != 0; p++) {}
            break;
        }
        snprintf(what, sizeof(what), "it holds the tensor %.100s", e->name);
        if (g == 3 || p == NP) ck_newer(tf->path, what);
        if (!s[p].numel) fail("'%s' is corrupt: it holds %s, which its model (%s) does not have", tf->path, e->name, model);
        if (seen[g][p]++) fail("'%s' is corrupt: it holds %s twice", tf->path, e->name);
        int same = e->dtype == TF_F32 && e->ndim == s[p].ndim;
        for (int d = 0; same && d < s[p].ndim; d++) same = e->shape[d] == s[p].shape[d];
        if (!same)
            fail("'%s' is corrupt: %s is %s [%d, %d, %d] (%d dims), its model's is f32 [%d, %d, %d] (%d dims; %s)", tf->path,
                 e->name, tf_dtype_name(e->dtype), e->ndim > 0 ? e->shape[0] : 0, e->ndim > 1 ? e->shape[1] : 0,
                 e->ndim > 2 ? e->shape[2] : 0, e->ndim, s[p].shape[0], s[p].ndim > 1 ? s[p].shape[1] : 0,
                 s[p].ndim > 2 ? s[p].shape[2] : 0, s[p].ndim, model);
    }
    int moments = seen[1][P_WTE] || seen[2][P_WTE];
    for (int g = 0; g < (moments ? 3 : 1); g++)
        for (int p = 0; p < NP; p++)
            if (s[p].numel && !seen[g][p])
                fail("'%s' is corrupt: it has no %s.%s, which its model (%s) has", tf->path, CK_GROUPS[g], PARAM_NAMES[p], model);
}

// The header of a checkpoint: model, scheme and training state, every field and tensor
// checked for what it can be.
static inline void checkpoint_meta(const TensorFile *tf, int32_t ci[CKI_N], TrainState *st) {
    CkptHeader h;
    checkpoint_header_check(tf, &h);
    memcpy(ci, h.ci, sizeof(h.ci));
    memset(st, 0, sizeof(*st));
    st->step = (long)h.state[0];
    st->seed = (long long)h.state[1];
    st->data_epoch = (long)h.state[2];
    st->data_shard = (int)h.state[3];
    st->data_sample = (int)h.state[4];
    st->pos_scheme = ci[CKI_POS];
    st->pe = ci[CKI_PE];
    st->qk_norm = ci[CKI_QK];
    st->wpe_rows = ci[CKI_WPE];
    st->alpha_min = h.cf[2];
    st->alpha_max = h.cf[3];
    st->alpha_fixed = h.cf[4];
    if (pe_is(st->pe, PEF_UNTIED) && !tf_find(tf, "param.tupe_ln_w"))
        fail("'%s' is a --pe tupe model made before TUPE followed its released code (a LayerNorm on the position "
             "table, a bias on its query projection, one relative bias for every layer): it cannot be loaded; train it "
             "again with this version", tf->path);
    checkpoint_bias_form(tf, st->pe);
    checkpoint_tensors_check(tf, &h);
}

static inline void checkpoint_peek(const char *path, TrainState *st) {
    TensorFile tf;
    tf_load(&tf, path, TF_KIND_CHECKPOINT);
    int32_t ci[CKI_N];
    checkpoint_meta(&tf, ci, st);
    tf_free(&tf);
}

// How a checkpoint is loaded:
enum {
    CK_RESUME,  // continue its training: weights, moments, state; the seed must match
    CK_WEIGHTS, // evaluate or sample it: weights and state
    CK_INIT,    // start a new run from its weights (--init_from): QK-norm gains it lacks stay 1
};

// Loads into the run's model (params, and m, v for CK_RESUME) and fills st. The
// checkpoint's model must match the command line; a mismatch names the flag. The position
// scheme and encoding may differ (PosAug fine-tuning, DroPE).
static inline void checkpoint_load(const Config *c, TrainState *st, const char *path, float **params, float **m,
                                   float **v, int mode) {
    Shape shapes[NP];
    param_shapes(c, shapes);
    TensorFile tf;
    tf_load(&tf, path, TF_KIND_CHECKPOINT);
    int32_t ci[CKI_N];
    checkpoint_meta(&tf, ci, st);
    if (ci[CKI_ARCH] != c->arch)
        fail("checkpoint '%s' is a %s, this run a %s (--arch)", path, ARCH_NAMES[ci[CKI_ARCH]], ARCH_NAMES[c->arch]);
    int32_t want[CKI_POS] = {c->V, c->Vp, c->C, c->L, c->NH, c->NKV, c->F, c->T};
    for (int i = 0; i < CKI_POS; i++)
        if (ci[i] != want[i])
            fail("checkpoint '%s' is of another config: it has %s %d, this run has %d", path, CKI_NAMES[i], ci[i], want[i]);
    const float *cf = (const float *)tf_get(&tf, "meta.config_f", TF_F32, 5);
    if (cf[0] != c->rope_base) fail("checkpoint '%s' was trained with --rope_base %g, this run has %g", path, cf[0], c->rope_base);
    if (st->qk_norm && !c->qk_norm) fail("checkpoint '%s' has QK-norm gains (trained with --qk_norm): pass --qk_norm", path);
    if (!st->qk_norm && c->qk_norm && mode != CK_INIT)
        fail("checkpoint '%s' has no QK-norm gains: add --qk_norm to its weights with --init_from (gains start at 1)", path);
    if (mode != CK_INIT && checkpoint_embed_scale(&tf) != embed_scale(c))  // parse_args adopts it
        fail("checkpoint '%s' was trained with the token embedding times %g, this run has %g", path,
             checkpoint_embed_scale(&tf), embed_scale(c));
    if (st->wpe_rows != wpe_rows(c))
        fail("checkpoint '%s' has a learned position table of %d rows (--pe learned), this run %d (--pe, --pos, --seq_len, --rpe_max)",
             path, st->wpe_rows, wpe_rows(c));
    int groups = mode == CK_RESUME ? 3 : 1;
    if (mode == CK_RESUME && !tf_find(&tf, "adam_m.wte"))
        fail("checkpoint '%s' holds weights only (no AdamW moments: an imported or exported model), so it cannot be "
             "resumed: start a run from it with --init_from, or evaluate it with --eval_only --resume", path);
    float **bufs[3] = {params, m, v};
    char name[TF_MAX_NAME];
    for (int gi = 0; gi < groups; gi++)
        for (int i = 0; i < NP; i++) {
            if (!shapes[i].numel || ((i == P_Q_NORM || i == P_K_NORM) && !st->qk_norm)) continue;
            snprintf(name, sizeof(name), "%s.%s", CK_GROUPS[gi], PARAM_NAMES[i]);
            memcpy(bufs[gi][i], tf_get(&tf, name, TF_F32, shapes[i].numel), shapes[i].numel * sizeof(float));
            long bad = first_nonfinite(bufs[gi][i], shapes[i].numel);
            if (bad >= 0)
                fail("checkpoint '%s': %s[%ld] is %g; a checkpoint with NaN or Inf cannot be used (the run had diverged?)",
                     path, name, bad, bufs[gi][i][bad]);
        }
    if (mode == CK_RESUME && st->seed != c->seed)
        fail("checkpoint '%s' was trained with --seed %lld; resume with the same seed", path, st->seed);
    tf_free(&tf);
}

// --init_from, before anything is written: the checkpoint holds every tensor this run's
// model has, at this run's size (QK-norm gains it lacks start at 1), else one message that
// names the flag to change.
static inline void init_from_check(const Config *c) {
    Shape shapes[NP];
    param_shapes(c, shapes);
    TensorFile tf;
    tf_load(&tf, c->init_from, TF_KIND_CHECKPOINT);
    int32_t ci[CKI_N];
    TrainState st;
    checkpoint_meta(&tf, ci, &st);
    char name[TF_MAX_NAME];
    for (int i = 0; i < NP; i++) {
        if (!shapes[i].numel || i == P_Q_NORM || i == P_K_NORM) continue;
        snprintf(name, sizeof(name), "param.%s", PARAM_NAMES[i]);
        const TensorEntry *e = tf_find(&tf, name);
        if (!e)
            fail("--init_from %s has no tensor %s: it was trained with --pe %s, and this run's --pe %s needs it (start "
                 "from a checkpoint trained with --pe %s, or train this encoding from scratch without --init_from)",
                 c->init_from, PARAM_NAMES[i], PE_NAMES[st.pe], PE_NAMES[c->pe], PE_NAMES[c->pe]);
        if (e->numel != shapes[i].numel)
            fail("--init_from %s: its %s has %zu values, this run's model %zu (--pe %s's shape flags, --rel_clip, "
                 "--t5_buckets or --wpe_rows, differ from the run that made it)", c->init_from, PARAM_NAMES[i], e->numel,
                 shapes[i].numel, PE_NAMES[c->pe]);
    }
    tf_free(&tf);
}

// Evaluating or sampling a checkpoint: the model, scheme and seed it was trained with
// (call before allocating the model: QK-norm and a learned table change its tensors).
static inline void adopt_checkpoint_scheme(Config *c, const TrainState *st) {
    c->seed = st->seed;
    c->pe = st->pe;
    c->qk_norm = st->qk_norm;
    c->drope_step = 0;
    c->pos_scheme = st->pos_scheme;
    c->learned_rows = st->wpe_rows;  // the table's rows are the checkpoint's
    c->alpha_min = st->alpha_min;
    c->alpha_max = st->alpha_max;
    c->alpha_fixed = st->alpha_fixed;
}

// Where a run's weights come from, in two calls around allocating the model (both
// trainers). Before: evaluating or sampling (!train) a --resume checkpoint takes its
// model and scheme (QK-norm and a learned table change the tensors). After: the weights
// (and training state) of --resume, or the seeded init, overwritten by --init_from's
// weights where it has them.
static inline void run_prepare(Config *c, TrainState *st, int train) {
    memset(st, 0, sizeof(*st));
    if (c->resume[0] && !train) {
        checkpoint_peek(c->resume, st);
        adopt_checkpoint_scheme(c, st);
    }
    if (!c->resume[0] && c->init_from[0]) init_from_check(c);
}

static inline void run_weights(const Config *c, TrainState *st, int train, void *model,
                               void (*init)(void *model, uint64_t seed),
                               void (*load)(void *model, TrainState *st, const char *path, int mode)) {
    if (c->resume[0]) {
        load(model, st, c->resume, train ? CK_RESUME : CK_WEIGHTS);
        printf("loaded %s (step %ld, trained with --pe %s --pos %s)\n", c->resume, st->step, PE_NAMES[st->pe],
               POS_SCHEME_NAMES[st->pos_scheme]);
        return;
    }
    init(model, (uint64_t)c->seed);
    if (!c->init_from[0]) return;
    TrainState from;
    load(model, &from, c->init_from, CK_INIT);
    printf("weights from %s (step %ld, trained with --pe %s --pos %s%s); training starts at step 0\n", c->init_from,
           from.step, PE_NAMES[from.pe], POS_SCHEME_NAMES[from.pos_scheme],
           c->qk_norm && !from.qk_norm ? ", QK-norm gains added at 1" : "");
}

// The run's log.jsonl: new, or on resume cut back to the steps the checkpoint holds
// (steps logged after it, before a crash, are run again and logged again).
static inline FILE *open_run_log(const char *path, long resume_step) {
    if (resume_step > 0) {
        FILE *f = fopen(path, "r");
        if (f) {
            long n = file_size(f);
            char *buf = (char *)xcalloc(n + 1, 1), *keep = (char *)xcalloc(n + 1, 1);
            xfread(buf, n, f, path, "the log");
            fclose(f);
            size_t used = 0;
            for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
                long step;
                if (sscanf(line, "{\"step\": %ld", &step) == 1 && step <= resume_step) {
                    size_t len = strlen(line);
                    memcpy(keep + used, line, len);
                    keep[used + len] = '\n';
                    used += len + 1;
                }
            }
            FILE *out = xfopen(path, "w");
            xfwrite(keep, used, out, path);
            if (fflush(out) != 0) fail("writing '%s' failed: %s (disk full?)", path, strerror(errno));
            free(buf);
            free(keep);
            return out;
        }
    }
    return xfopen(path, "w");
}

// A test case file (the input part of dev/reference_tiny.bin, kind 1): config_i
// [V, Vp, C, L, NH, NKV, F, T, B, micro, steps, warmup], config_f [rope_base, rms_eps, lr,
// min_lr, weight_decay, beta1, beta2, adam_eps, grad_clip, check_alpha], alphas, tokens,
// initial weights, and optionally pos_kind int32 [1] (the PE_* order of PE_TABLE: 0 RoPE, 1 NoPE,
// 2 ALiBi with the distances multiplied by the alphas, 3 sinusoidal at positions alpha * t,
// 4 learned, 5 eRPE, 6 T5, 7 tAPE, 8 Shaw, 9 T-PE, 10 TUPE)
// and qk_norm int32 [1], arch int32 [1] (ARCH_*), and pos_scheme int32 [2] = [--pos, --rpe_layers]: then the check pass
// and every step take their positions from the schedule (pos_schedule_step at the step, the
// config's seed) instead of the alphas. Both trainers' --dump_case read it; returns 1 for a
// scheduled case.
static inline int config_from_case(Config *c, const TensorFile *tf, int *micro) {
    const int32_t *ci = (const int32_t *)tf_get(tf, "config_i", TF_I32, 12);
    const float *cf = (const float *)tf_get(tf, "config_f", TF_F32, 10);
    config_defaults(c);
    for (int i = 0; i < 12; i++)
        if (ci[i] < 0 || ci[i] > MAX_SEQ) fail("'%s': config_i[%d] = %d is out of range", tf->path, i, ci[i]);
    if ((long)ci[8] * ci[9] > 2147483647L) fail("'%s': batch %d x %d micro-batches is too large", tf->path, ci[8], ci[9]);
    c->V = ci[0]; c->Vp = ci[1]; c->C = ci[2]; c->L = ci[3]; c->NH = ci[4]; c->NKV = ci[5]; c->F = ci[6]; c->T = ci[7];
    c->B = ci[8]; c->total_batch = ci[8] * ci[9]; c->steps = ci[10]; c->warmup = ci[11];
    validate_model(c);
    if (c->Vp != (c->V + 127) / 128 * 128) fail("'%s': padded vocab %d is not %d rounded up to 128", tf->path, c->Vp, c->V);
    c->rope_base = cf[0]; c->rms_eps = cf[1]; c->lr = cf[2]; c->min_lr = cf[3]; c->weight_decay = cf[4];
    c->beta1 = cf[5]; c->beta2 = cf[6]; c->adam_eps = cf[7]; c->grad_clip = cf[8];
    *micro = ci[9];
    if (tf_find(tf, "pos_kind")) {
        c->pe = *(const int32_t *)tf_get(tf, "pos_kind", TF_I32, 1);
        if (c->pe < 0 || c->pe >= PE_N) fail("'%s': unknown pos_kind %d", tf->path, c->pe);
    }
    if (tf_find(tf, "qk_norm")) c->qk_norm = *(const int32_t *)tf_get(tf, "qk_norm", TF_I32, 1) != 0;
    if (tf_find(tf, "arch")) {
        c->arch = *(const int32_t *)tf_get(tf, "arch", TF_I32, 1);
        if (c->arch < 0 || c->arch >= ARCH_N) fail("'%s': unknown arch %d", tf->path, c->arch);
    }
    c->rpe_max = 8 * c->T;
    c->pose_target = 8 * c->T;
    if (!tf_find(tf, "pos_scheme")) return 0;
    const int32_t *ps = (const int32_t *)tf_get(tf, "pos_scheme", TF_I32, 2);
    if (ps[0] < 0 || ps[0] >= POS_N_SCHEMES) fail("'%s': unknown pos_scheme %d", tf->path, ps[0]);
    c->pos_scheme = ps[0];
    c->rpe_layers = ps[1] != 0;
    return 1;
}

// The positions of a case's pass at `step`: the schedule's, or alpha on every layer (a
// learned table takes integer positions: its cases ignore the alphas, as TUPE's do).
static inline PosStep case_pos_step(const PosConfig *pc, int scheduled, float alpha, long step) {
    if (scheduled) return pos_schedule_step(pc, step);
    PosStep ps = pos_standard(pc);
    for (int l = 0; l < pc->n_layer; l++) ps.alpha[l] = pe_has_wpe(pc->pe) ? 1.0f : alpha;
    return ps;
}

