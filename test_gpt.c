// test_gpt.c: checks the CPU reference against an independent PyTorch reference
// (dev/reference_tiny.bin), finite differences, resume exactness, the position hook,
// the data and checkpoint formats, and bad inputs. The GPU part runs train_gpt.cu's
// dump mode when a GPU is present and reports skipped otherwise.
// Output: one line per check, then "N passed, N failed, N skipped".
//   ./test_gpt [REFERENCE]   every check
//   ./test_gpt --only NAME   the checks that concern NAME: a --pos scheme, a --pe encoding, or
//                            a group of the other checks (./test_gpt --list names them all)
// THREADS in the environment: the trainer's threads in the runs, 1 to 1024 (default: the CPUs online);
// TRAINER: the trainer under test (default ./train_gpt_cpu). A bad value, or an argument that is
// neither a flag nor a readable reference file, is refused with one line.
#define TESTING
#include "train_gpt_cpu.c"
#include <sys/resource.h>
#include <sys/wait.h>

static int n_pass, n_fail, n_skip;
static const char *TMP = "test_tmp";

// --only NAME: the checks whose names (a space-separated list: the schemes, encodings and
// groups they concern) hold NAME; every check without it
static const char *ONLY;
static int wants(const char *names) {
    if (!ONLY) return 1;
    size_t n = strlen(ONLY);
    for (const char *p = names; (p = strstr(p, ONLY)) != NULL; p += n)
        if ((p == names || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ')) return 1;
    return 0;
}
// ... of a run's flags: the --pe and --pos it names (their defaults unnamed)
static int wants_flags(const char *flags) {
    char names[128] = "", v[2][40] = {"", ""};
    const char *opt[2] = {"--pe ", "--pos "};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(flags, opt[i]);
        if (p) sscanf(p + strlen(opt[i]), "%39s", v[i]);
    }
    snprintf(names, sizeof(names), "%s %s%s%s", v[0], v[1], strstr(flags, "--qk_norm") ? " qk-norm" : "",
             strstr(flags, "--drope_step") ? " drope" : "");
    return wants(names);
}

static void check(int ok, const char *name, const char *fmt, ...) {
    char msg[512] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("%s: %s%s%s\n", ok ? "PASS" : "FAIL", name, msg[0] ? ": " : "", msg);
    if (ok) n_pass++; else n_fail++;
}

static void skip(const char *name, const char *why) {
    printf("SKIP: %s: %s\n", name, why);
    n_skip++;
}

// ||a - b|| / ||b||
static double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num) / (sqrt(den) + 1e-30);
}

// max |a - b|; NaN when any difference is (fmax would skip it)
static double max_abs_diff(const float *a, const float *b, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (isnan(d)) return d;
        if (d > e) e = d;
    }
    return e;
}

// ----------------------------------------------------------------------------
// 1. dumps compared by tensor name: CPU vs the PyTorch reference, and GPU vs CPU

typedef struct {
    double logits, loss, grads, steps, weights;  // relative-error tolerances
} Tolerances;

// fp32 against fp32 (or the float64 reference): rounding differences only. Weights after
// 10 AdamW steps get 1e-4: Adam divides by sqrt(v), which amplifies fp32 rounding in
// near-zero gradients (PyTorch's own float32 run of the NoPE case is 2.9e-5 from its
// float64 run); a missing weight decay moves them by about 2e-3, a missing bias correction by more.
static const Tolerances TOL_FP32 = {1e-5, 1e-5, 1e-5, 1e-5, 1e-4};
// bf16 activations and matmul inputs (unit roundoff 2^-9 = 2e-3, compounded over about
// ten roundings per layer): a wrong index or a missing term gives errors of order 1. The
// basis is PyTorch's own bf16 autocast replay of the reference files (dev/bf16_drift.py):
// logits <= 3.7e-3, loss 2.3e-5, grads 1.05e-2, losses 3.6e-5, grad norms 9.4e-4, and weights
// after 10 AdamW steps 1.0-1.2e-2, 3.4e-2 for the sinusoidal case's wk: Adam divides by
// sqrt(v), so rounding in near-zero gradients moves whole updates, which are 30-60% of the
// weights' norm here. The optimizer itself is the fp32 build's, checked at 1e-4 above.
static const Tolerances TOL_BF16 = {2e-2, 1e-3, 5e-2, 1e-2, 1e-1};

static double rel_err_named(const TensorFile *got, const TensorFile *want, const char *name) {
    const TensorEntry *w = tf_find(want, name);
    if (!w) fail("'%s' has no tensor '%s'", want->path, name);
    const float *g = (const float *)tf_get(got, name, TF_F32, w->numel);
    return rel_err(g, (const float *)w->data, w->numel);
}

// Whether both dumps hold `name` (a tensor not every model has: the blocks', the GRU's,
// wpe, q_norm, k_norm); a tensor in one of them only is a failure.
static int both_have(const TensorFile *got, const TensorFile *want, const char *name, const char *label) {
    int g = tf_find(got, name) != NULL, w = tf_find(want, name) != NULL;
    if (g != w) {
        char l[256];
        snprintf(l, sizeof(l), "%s: %s", label, name);
        check(0, l, "present in %s only", g ? got->path : want->path);
    }
    return g && w;
}

static void compare_dumps(const char *label, const char *got_path, const char *want_path, Tolerances tol) {
    TensorFile got, want;
    tf_load(&got, got_path, 0);
    tf_load(&want, want_path, 0);
    char name[TF_MAX_NAME], l[256];
    double e = rel_err_named(&got, &want, "logits");
    snprintf(l, sizeof(l), "%s: logits", label);
    check(e < tol.logits, l, "rel err %.2e (tol %.0e)", e, tol.logits);
    e = rel_err_named(&got, &want, "loss");
    snprintf(l, sizeof(l), "%s: loss", label);
    check(e < tol.loss, l, "rel err %.2e (tol %.0e)", e, tol.loss);
    for (int i = 0; i < NP; i++) {
        snprintf(name, sizeof(name), "grad.%s", PARAM_NAMES[i]);
        if (i != P_WTE && i != P_FINAL_NORM && !both_have(&got, &want, name, label)) continue;
        e = rel_err_named(&got, &want, name);
        snprintf(l, sizeof(l), "%s: %s", label, name);
        check(e < tol.grads, l, "rel err %.2e (tol %.0e)", e, tol.grads);
    }
    const TensorEntry *ls = tf_find(&want, "losses");
    e = rel_err_named(&got, &want, "losses");
    snprintf(l, sizeof(l), "%s: losses of %d AdamW steps", label, ls ? ls->shape[0] : 0);
    check(e < tol.steps, l, "rel err %.2e (tol %.0e)", e, tol.steps);
    e = rel_err_named(&got, &want, "grad_norms");
    snprintf(l, sizeof(l), "%s: grad norms of those steps", label);
    check(e < tol.steps, l, "rel err %.2e (tol %.0e)", e, tol.steps);
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < NP; i++) {
        snprintf(name, sizeof(name), "final.%s", PARAM_NAMES[i]);
        if (i != P_WTE && i != P_FINAL_NORM && !both_have(&got, &want, name, label)) continue;
        double ei = rel_err_named(&got, &want, name);
        if (ei > worst) { worst = ei; worst_name = PARAM_NAMES[i]; }
    }
    snprintf(l, sizeof(l), "%s: weights after the steps", label);
    check(worst < tol.weights, l, "worst rel err %.2e (%s, tol %.0e)", worst, worst_name, tol.weights);
    tf_free(&got);
    tf_free(&want);
}

// Another reference file of the same format (NoPE, ALiBi): the CPU dump against it.
static void test_reference_named(const char *path, const char *label) {
    FILE *f = fopen(path, "rb");
    if (!f) { check(0, label, "%s missing (python dev/pytorch_reference.py --pos_kind ...)", path); return; }
    fclose(f);
    char out[256];
    snprintf(out, sizeof(out), "%s/cpu_dump_%s", TMP, strrchr(path, '/') + 1);
    dump_case(path, out);
    compare_dumps(label, out, path, TOL_FP32);
}

static void test_reference(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { check(0, "reference file present", "%s missing (python dev/pytorch_reference.py)", path); return; }
    fclose(f);
    TensorFile tf;
    tf_load(&tf, path, TF_KIND_REFERENCE);
    Config c;
    int micro;
    config_from_case(&c, &tf, &micro);
    check(c.NKV < c.NH, "reference uses GQA", "NH %d NKV %d", c.NH, c.NKV);
    float check_alpha = ((const float *)tf_get(&tf, "config_f", TF_F32, 10))[9];
    const float *alphas = (const float *)tf_get(&tf, "alphas", TF_F32, c.steps);
    int has8 = check_alpha == 8.0f;
    for (int s = 0; s < c.steps; s++) has8 |= alphas[s] == 8.0f;
    check(has8 && micro > 1, "reference has alpha 8 and gradient accumulation", "check alpha %g, %d micro-batches",
          check_alpha, micro);
    tf_free(&tf);
    char out[256];
    snprintf(out, sizeof(out), "%s/cpu_reference_dump.bin", TMP);
    dump_case(path, out);
    compare_dumps("CPU vs PyTorch", out, path, TOL_FP32);
}

// ----------------------------------------------------------------------------
// 2. finite differences on a tiny model (central differences of the fp32 loss,
// on the coordinates with the largest gradients, where the fp32 signal is clear)

// FIRE's loss is piecewise smooth: its ReLU units bend where w1 x + b1 = 0. For central
// differences that do not straddle a bend (and a b1 whose gradient is not 0: a unit active
// at every input adds a constant to each query's logits), each layer's units bend between
// its MLP inputs x of the pass (ps at T positions), in the widest gaps between them, and L
// lies between query positions.
static void fire_kinks_between(GPT *g, const PosStep *ps) {
    int T = g->cfg.T, n = 0;
    float *x = (float *)xmalloc((size_t)T * T * sizeof(float)), D;
    BiasPass bp = attn_bias_pass(ps, g->cfg.L, g->cfg.NH, T);
    for (int l = 0; l < g->cfg.L; l++) {
        g->params[P_FIRE_L_MULT][l] = ps->alpha[l] * (T / 2 + 0.5f) / FIRE_LENGTH;  // L = m L0
        BiasFn f = bias_fn_layer(&bp, l, &g->cfg, g->shapes, (const float *const *)g->params, NULL);
        n = 0;
        for (int t = 0; t < T; t++)
            for (int d = 0; d <= t; d++) x[n++] = fire_input(&f, f.alpha * (float)t, f.alpha * (float)d, &D);
        qsort(x, n, sizeof(float), cmp_float);
        int widest[4] = {0, 0, 0, 0};  // the 4 widest gaps between neighbours x[k - 1], x[k], by k
        for (int w = 0; w < 4; w++)
            for (int k = 1; k < n; k++) {
                int taken = 0;
                for (int v = 0; v < w; v++) taken |= widest[v] == k;
                if (!taken && (!widest[w] || x[k] - x[k - 1] > x[widest[w]] - x[widest[w] - 1])) widest[w] = k;
            }
        for (int j = 0; j < FIRE_HIDDEN; j++) {  // unit j bends mid-gap, cycling over the 4 widest
            int k = widest[j % 4];
            g->params[P_FIRE_B1][l * FIRE_HIDDEN + j] = -g->params[P_FIRE_W1][l * FIRE_HIDDEN + j] * 0.5f * (x[k] + x[k - 1]);
        }
    }
    free(x);
}

// The positions of the pass: alpha 3.7, offset 5 (FD_ALPHA); an RPE step with a draw per
// layer (FD_RPE, explicit positions); a PoSE step with --pose_scaling yarn (FD_POSE_YARN:
// skipped positions, ramped frequencies and YaRN's factor on cos and sin, s = 8).
enum { FD_ALPHA, FD_RPE, FD_POSE_YARN };
static void test_finite_differences(int arch, int pe, int qk_norm, int positions, const char *what) {
    Config c;
    config_defaults(&c);
    c.V = 50; c.C = 16; c.L = 2; c.NH = 4; c.NKV = 2; c.F = 24; c.T = 8; c.B = 2;
    c.arch = arch;
    c.pe = pe;
    c.qk_norm = qk_norm;
    if (positions == FD_RPE) { c.pos_scheme = POS_RPE; c.rpe_max = 64; }  // a learned table then has 64 rows
    if (positions == FD_POSE_YARN) { c.pos_scheme = POS_POSE; c.pose_target = 64; c.pose_scaling = 3; c.total_batch = c.B; }
    round_vocab(&c);
    GPT g;
    gpt_alloc(&g, &c, 1);
    gpt_init(&g, 7);
    Rng r = rng_make(11, 99);
    // break the symmetry of unit norm gains so their gradients are generic (T-PE's N(0,1)
    // input weights keep theirs: hidden units at 1 +- 0.3 would all saturate)
    for (int i = 0; i < NP; i++)
        if (!PARAM_DECAY[i] && PARAM_INITS[i] != INIT_NORMAL)
            for (size_t j = 0; j < g.shapes[i].numel; j++) g.params[i][j] = 1.0f + 0.3f * rng_normal(&r);
    for (int i = 0; i < NP; i++)
        if (PARAM_DECAY[i])
            for (size_t j = 0; j < g.shapes[i].numel; j++) g.params[i][j] *= 10.0f;  // larger signal
    for (size_t j = 0; j < g.shapes[P_ATTN_BIAS].numel; j++)  // a table away from zero (eRPE's and T5's start there)
        g.params[P_ATTN_BIAS][j] = 1.0f + 0.3f * rng_normal(&r);
    if (pe == PE_TUPE) {  // an untied term of order 1 (about 0.05 after the line above), as in the PyTorch file
        int boost[3] = {P_WPE, P_TUPE_UQ, P_TUPE_UK};
        for (int k = 0; k < 3; k++)
            for (size_t j = 0; j < g.shapes[boost[k]].numel; j++) g.params[boost[k]][j] *= 3.0f;
    }
    acts_alloc(&g.acts, &c, c.B, c.T, 1);
    int inp[16], tgt[16];
    for (int i = 0; i < 16; i++) { inp[i] = (int)rng_below(&r, c.V); tgt[i] = (int)rng_below(&r, c.V); }
    PosConfig pc = pos_config_of(&c);
    PosStep ps = pos_standard(&pc);
    pos_set_pe(&ps, pe, c.NH);
    if (positions == FD_RPE) {
        pc.rpe_per_layer = 1;
        ps = pos_schedule_step(&pc, 3);
        pos_set_pe(&ps, pe, c.NH);
    } else if (positions == FD_POSE_YARN) {
        ps = pos_schedule_step(&pc, 3);
        if (!(ps.mscale > 1.2f && ps.positions)) fail("internal: the PoSE + YaRN step has no factor or positions");
    } else if (!pe_has_wpe(pe)) {  // a learned table takes integer positions 0..T-1
        for (int l = 0; l < c.L; l++) ps.alpha[l] = 3.7f;
        ps.offset = 5.0f;
    }
    if (pe == PE_FIRE) fire_kinks_between(&g, &ps);
    for (int i = 0; i < NP; i++)  // a tensor with a ceiling: its first entry there (the forward takes it as any value)
        if (PARAM_HI[i] < INFINITY && g.shapes[i].numel) g.params[i][0] = PARAM_HI[i];
    if (pe == PE_KERPLE_POWER)  // head 0 at power 2 (its ceiling) with a small coefficient: a bias of order 1, not a
        g.params[P_KERPLE_POW_R1][0] = 0.02f;  // head that sees only its own token (-r1 (3.7 d)^2 at r1 ~ 1)
    memset(g.grads_mem, 0, g.n_params * sizeof(float));
    gpt_forward(&g, &g.acts, inp, tgt, &ps);
    gpt_backward(&g, &g.acts, inp, tgt, NULL, &ps, 1.0f);
    for (int i = 0; i < NP; i++) {
        if (!g.shapes[i].numel) continue;
        double worst = 0;
        int at_bound = PARAM_HI[i] < INFINITY;  // first its entry at the ceiling, then the 3 largest |grad| entries
        for (size_t pick = 0; pick < 3 + (size_t)at_bound && pick < g.shapes[i].numel; pick++) {
            size_t best = 0;
            float bestv = -1;
            for (size_t j = 0; j < g.shapes[i].numel && !(at_bound && pick == 0); j++)
                if (fabsf(g.grads[i][j]) > bestv) { bestv = fabsf(g.grads[i][j]); best = j; }
            float *p = &g.params[i][best];
            float orig = *p, h = 1e-2f * (fabsf(orig) > 0.1f ? fabsf(orig) : 0.1f);
            *p = orig + h;
            double lp = gpt_forward(&g, &g.acts, inp, tgt, &ps);
            *p = orig - h;
            double lm = gpt_forward(&g, &g.acts, inp, tgt, &ps);
            *p = orig;
            double fd = (lp - lm) / (2.0 * h), an = g.grads[i][best];
            double e = fabs(fd - an) / (fabs(an) + 1e-12);
            if (e > worst) worst = e;
            g.grads[i][best] = 0.0f;  // the next pick takes the next largest
        }
        char label[96];
        snprintf(label, sizeof(label), "finite differences (%s) %s", what, PARAM_NAMES[i]);
        check(worst < 2e-2, label, "worst rel err %.2e over the 3 largest gradients%s", worst,
              at_bound ? " and the entry at its ceiling" : "");
    }
    gpt_free(&g);
}

// A small model of encoding pe at window T (C 16, 2 layers, 4 heads, 2 KV heads), allocated
// for training and not initialized
static void small_gpt(GPT *g, int pe, int T) {
    Config c;
    config_defaults(&c);
    c.V = 50; c.C = 16; c.L = 2; c.NH = 4; c.NKV = 2; c.F = 24; c.T = T; c.B = 2; c.pe = pe;
    round_vocab(&c);
    gpt_alloc(g, &c, 1);
}

// The bounds of a tensor (PARAM_TABLE's [lo, hi] columns) on every encoding with a bounded
// tensor: the init leaves no entry outside them, and one AdamW step moves every entry below
// lo (set there by hand, no gradient) to lo and every entry above hi to hi, and leaves the
// other tensors and entries as they were. Each bound is checked where a tensor has one (a
// path that ignores a ceiling leaves its entries above it).
static void test_bounds(void) {
    for (int pe = 0; pe < PE_N; pe++) {
        int bounded = 0, n_lo = 0, n_hi = 0;
        for (int k = 0; k < BP_N; k++) bounded |= (pe_bias_tensors(pe) >> k & 1) && param_bounded(P_BIAS0 + k);
        if (!bounded || !wants(PE_NAMES[pe])) continue;
        GPT g;
        small_gpt(&g, pe, 8);
        int init_ok = 1, moved_ok = 1, kept_ok = 1;
        for (uint64_t seed = 1; seed <= 50; seed++) {  // U(0, 2)-like draws reach below a floor of 0.01
            gpt_init(&g, seed);
            for (int i = 0; i < NP; i++)
                for (size_t j = 0; j < g.shapes[i].numel; j++)
                    init_ok &= g.params[i][j] >= PARAM_LO[i] && g.params[i][j] <= PARAM_HI[i];
        }
        float *before = (float *)xmalloc(g.n_params * sizeof(float));
        for (int i = 0; i < NP; i++)  // a quarter of each bounded tensor below lo, a quarter above hi
            for (size_t j = 0; j < g.shapes[i].numel; j++) {
                if (j % 4 == 0 && PARAM_LO[i] > -INFINITY) g.params[i][j] = PARAM_LO[i] - 0.5f, n_lo++;
                if (j % 4 == 2 && PARAM_HI[i] < INFINITY) g.params[i][j] = PARAM_HI[i] + 0.5f, n_hi++;
            }
        memcpy(before, g.params_mem, g.n_params * sizeof(float));
        memset(g.grads_mem, 0, g.n_params * sizeof(float));
        adamw_update(&g, 1e-3f, 1, 1.0f);
        for (int i = 0; i < NP; i++)
            for (size_t j = 0; j < g.shapes[i].numel; j++) {
                float b = before[g.params[i] - g.params_mem + j], a = g.params[i][j];
                if (b < PARAM_LO[i]) moved_ok &= a == PARAM_LO[i];
                else if (b > PARAM_HI[i]) moved_ok &= a == PARAM_HI[i];
                else if (!PARAM_DECAY[i]) kept_ok &= a == b;  // no gradient, no decay: AdamW moves nothing
            }
        char label[160];
        snprintf(label, sizeof(label), "--pe %s: its tensors' bounds: the init (50 seeds) inside them, AdamW holds them there",
                 PE_NAMES[pe]);
        check(init_ok && moved_ok && kept_ok && n_lo > 0, label, "init %d, held %d (%d entries below a floor, %d above a "
              "ceiling), others kept %d", init_ok, moved_ok, n_lo, n_hi, kept_ok);
        free(before);
        gpt_free(&g);
    }
}

// ----------------------------------------------------------------------------
// 3. the position hook

// xPos (Sun et al. 2023; torchscale's XPOS) through the CPU's rotary loop: a query at
// position n and a key at m, each pair rotated as RoPE's and scaled by zeta_j^(n/512) and
// zeta_j^(-m/512), zeta_j = (2j + 0.4 hd) / (1.4 hd), the formula written out here in double
// (the angle the fp32 product the loop forms), at 12000 and 11000 (scales of 1e-13 and 1e12)
// and at 1000 and 0; the backward is the forward's transpose (<R x, y> = <x, R^T y>).
static void xpos_rotate(float *x, int hd, float p, int side, float sign) {
    PosStep ps;
    memset(&ps, 0, sizeof(ps));
    ps.pe = PE_XPOS;
    ps.mscale = 1.0f;
    pos_inv_freq(ps.inv_freq, hd, 10000.0);
    rope_rotate(x, 1, 1, 1, hd, &p, 0, &ps, side, sign);
}
static double dot_hd(const float *a, const float *b, int hd) {
    double d = 0;
    for (int c = 0; c < hd; c++) d += (double)a[c] * b[c];
    return d;
}
static void test_xpos_rotation(void) {
    enum { HD = 64, HALF = HD / 2 };
    float q0[HD], k0[HD], q[HD], k[HD], y[HD], inv[HALF];
    Rng r = rng_make(3, 9);
    for (int c = 0; c < HD; c++) q0[c] = rng_normal(&r), k0[c] = rng_normal(&r), y[c] = rng_normal(&r);
    pos_inv_freq(inv, HD, 10000.0);
    double err = 0;
    float n[2] = {12000.0f, 1000.0f}, m[2] = {11000.0f, 0.0f};
    for (int shift = 0; shift < 2; shift++) {
        memcpy(q, q0, sizeof(q));
        memcpy(k, k0, sizeof(k));
        xpos_rotate(q, HD, n[shift], ROT_QUERY, 1.0f);
        xpos_rotate(k, HD, m[shift], ROT_KEY, 1.0f);
        for (int j = 0; j < HALF; j++) {  // the paper's formula, pair by pair
            double zeta = (2.0 * j + 0.4 * HD) / (1.4 * HD), sq = pow(zeta, n[shift] / 512.0), sk = pow(zeta, -m[shift] / 512.0);
            double aq = (double)(n[shift] * inv[j]), ak = (double)(m[shift] * inv[j]);
            double wq[2] = {sq * (q0[j] * cos(aq) - q0[j + HALF] * sin(aq)), sq * (q0[j + HALF] * cos(aq) + q0[j] * sin(aq))};
            double wk[2] = {sk * (k0[j] * cos(ak) - k0[j + HALF] * sin(ak)), sk * (k0[j + HALF] * cos(ak) + k0[j] * sin(ak))};
            err = fmax(err, fmax(fabs(q[j] - wq[0]) / fabs(wq[0]), fabs(q[j + HALF] - wq[1]) / fabs(wq[1])));
            err = fmax(err, fmax(fabs(k[j] - wk[0]) / fabs(wk[0]), fabs(k[j + HALF] - wk[1]) / fabs(wk[1])));
        }
    }
    check(err < 2e-5, "xPos: each pair of a query and a key rotated and scaled by zeta_j^(+-p/512), scales 1e-13 to 1e12",
          "max rel err %.2e", err);
    memcpy(q, q0, sizeof(q));
    xpos_rotate(q, HD, 5000.0f, ROT_KEY, 1.0f);
    double fwd = dot_hd(q, y, HD);  // <R x, y>
    memcpy(q, y, sizeof(q));
    xpos_rotate(q, HD, 5000.0f, ROT_KEY, -1.0f);
    double bwd = dot_hd(q0, q, HD);  // <x, R^T y>
    check(fabs(fwd - bwd) / fabs(fwd) < 1e-5, "xPos: its backward is the forward's transpose", "%.6g vs %.6g", fwd, bwd);
}

// A position config for hook tests (RoPE base 1e4, 4 heads, alpha set {1,2,4,8}).
static PosConfig test_pc(int scheme, float a, float b, float fixed, int hd, int L, uint64_t seed) {
    PosConfig p;
    memset(&p, 0, sizeof(p));
    p.scheme = scheme;
    p.alpha_min = a;
    p.alpha_max = b;
    p.alpha_fixed = fixed;
    p.rope_base = 10000.0f;
    p.head_dim = hd;
    p.n_layer = L;
    p.n_head = 4;
    p.seed = seed;
    float set[4] = {1, 2, 4, 8};
    memcpy(p.alpha_set, set, sizeof(set));
    p.n_alpha_set = 4;
    p.curriculum_frac = 0.5f;
    p.total_steps = 100;
    return p;
}

static void test_position_hook(void) {
    PosConfig pc = test_pc(POS_POSAUG, 0.125f, 8.0f, 4.0f, 32, 4, 42);
    float a1[1000], a2[1000];
    int in_range = 1;
    double mean = 0;
    for (int s = 0; s < 1000; s++) {
        a1[s] = pos_draw_alpha(&pc, s);
        in_range &= a1[s] >= 0.125f && a1[s] <= 8.0f;
        mean += a1[s] / 1000.0;
    }
    for (int s = 999; s >= 0; s--) a2[s] = pos_draw_alpha(&pc, s);  // order-independent
    check(memcmp(a1, a2, sizeof(a1)) == 0, "alpha sequence is a function of (seed, step)", "");
    check(in_range, "uniform alphas lie in [a,b]", "");
    // mean of U[1/8, 8] is 4.0625, std 2.27: 1000 draws give a standard error of 0.072
    check(fabs(mean - 4.0625) < 4 * 0.072, "uniform alpha mean", "%.4f vs 4.0625", mean);
    PosConfig pc2 = pc;
    pc2.seed = 43;
    int differ = 0;
    for (int s = 0; s < 10; s++) differ += pos_draw_alpha(&pc2, s) != a1[s];
    check(differ == 10, "another seed gives other alphas", "%d of 10 differ", differ);
    PosStep ps = pos_schedule_step(&pc, 17);
    int shared = 1;
    for (int l = 0; l < pc.n_layer; l++) shared &= ps.alpha[l] == a1[17];
    check(shared, "one alpha per step, shared by every layer", "");
    pc.scheme = POS_POSAUG_LOG;
    double lmean = 0;
    for (int s = 0; s < 1000; s++) lmean += log(pos_draw_alpha(&pc, s)) / 1000.0;
    // ln alpha ~ U[-ln 8, ln 8]: mean 0, std 1.2: standard error 0.038
    check(fabs(lmean) < 4 * 0.038, "log-uniform alpha: mean of ln alpha", "%.4f vs 0", lmean);
    pc.scheme = POS_ROPE;
    check(pos_draw_alpha(&pc, 5) == 1.0f, "plain RoPE has alpha 1", "");

    // angles at large positions: alpha 8, positions to 16384, angle = fp32(p * theta_j)
    int T = 16384, hd = 64, half = 32;
    float *x = (float *)xmalloc((size_t)T * hd * sizeof(float)), *x0 = (float *)xmalloc((size_t)T * hd * sizeof(float));
    Rng r = rng_make(5, 5);
    for (int i = 0; i < T * hd; i++) x0[i] = x[i] = rng_normal(&r);
    PosConfig pc3 = test_pc(POS_FIXED, 1, 1, 8.0f, hd, 1, 1);
    PosStep p3 = pos_schedule_step(&pc3, 0);
    PassPositions pp3 = pos_pass(&p3, 1, 1, 0, T);
    rope_forward(x, 1, T, 1, hd, &p3, &pp3, 0, ROT_QUERY);
    double max_err = 0, max_angle = 0;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < half; j++) {
            float angle = (8.0f * (float)t) * p3.inv_freq[j];  // the fp32 angle the kernel uses
            double ca = cos((double)angle), sa = sin((double)angle);
            double e0 = x0[t * hd + j] * ca - x0[t * hd + j + half] * sa;
            double e1 = x0[t * hd + j + half] * ca + x0[t * hd + j] * sa;
            double err = fmax(fabs(x[t * hd + j] - e0), fabs(x[t * hd + j + half] - e1));
            if (err > max_err) max_err = err;
            if (angle > max_angle) max_angle = angle;
        }
    check(max_err < 2e-6 && max_angle > 1e5, "RoPE sin/cos accurate at large angles",
          "max abs err %.2e at angles up to %.0f rad", max_err, max_angle);
    rope_backward(x, 1, T, 1, hd, &p3, &pp3, 0, ROT_QUERY);
    check(rel_err(x, x0, (size_t)T * hd) < 1e-6, "RoPE backward is the inverse rotation", "rel err %.2e",
          rel_err(x, x0, (size_t)T * hd));
    free(x); free(x0);
    // lr schedule: warmup is linear, the cosine ends at min_lr
    check(lr_at_step(0, 10, 100, 1.0f, 0.1f) == 0.1f && fabsf(lr_at_step(99, 10, 100, 1.0f, 0.1f) - 0.1f) < 1e-3f &&
              lr_at_step(9, 10, 100, 1.0f, 0.1f) == 1.0f, "lr warmup and cosine", "");
}


// every training scheme of the hook, for fixed seeds
// PoSE (Zhu et al. 2023, its released code's two chunks): per sequence, p_t = t for
// t < n1, n1 ~ U{1..(T+1)/2}, and p_t = t + u after, u ~ U{0..L_t - T}; p_t = t at evaluation.
static void test_pose(const PosConfig *base) {
    PosConfig pc = *base;
    pc.scheme = POS_POSE;
    pc.seq_len = 64;
    pc.step_seqs = 8;
    pc.pose_target = 512;
    int ok = 1, n1_max = 0, n1_min = 64, u_max = 0, distinct = 0;
    double u_sum = 0;
    for (int step = 0; step < 200; step++) {
        PosStep ps = pos_schedule_step(&pc, step);
        ok &= ps.positions != NULL && ps.seq_stride == 64 && ps.positions_stride == 0 && ps.n_positions == 64;
        for (int s = 0; s < 8 && ok; s++) {
            const float *p = ps.positions + s * 64;
            int n1 = 1;
            while (n1 < 64 && p[n1] == (float)n1) n1++;  // the first chunk: p_t = t
            int u = (int)p[63] - 63;                     // the second: p_t = t + u (u = 0: one chunk)
            for (int t = n1; t < 64; t++) ok &= p[t] == (float)(t + u);
            if (u > 0) {
                ok &= n1 <= 32;
                n1_max = n1 > n1_max ? n1 : n1_max;
                n1_min = n1 < n1_min ? n1 : n1_min;
            }
            ok &= u >= 0 && u <= 512 - 64;
            u_max = u > u_max ? u : u_max;
            u_sum += u;
            distinct += s > 0 && p[63] != ps.positions[63];
        }
    }
    // 1600 draws of u ~ U{0..448}: mean 224, sd of the mean 3.2
    check(ok && n1_min == 1 && n1_max == 32 && u_max > 440 && fabs(u_sum / 1600 - 224) < 16 && distinct > 1300,
          "PoSE: per sequence, chunk 1 at p_t = t (1..32 tokens), chunk 2 skipped by u in [0, L_t - T]",
          "chunk 1 %d..%d, max skip %d, mean skip %.1f, sequences differing %d", n1_min, n1_max, u_max, u_sum / 1600, distinct);
    EvalScaling none = {SCALE_NONE, 1, 32, 1, 0, 64};
    PosStep ev = pos_eval_step(&pc, &none, 300);
    check(ev.positions == NULL && ev.alpha[0] == 1.0f, "PoSE evaluates at standard positions", "");
}

// --pose_scaling: PoSE's skips paired with an interpolation of factor s = L_t / T, the same in
// training and at evaluation, each equal to the evaluation-time --scaling of that factor:
// linear divides the skipped positions by s (the positions carry it; alpha stays 1), ntk and
// yarn change the frequencies (yarn also the factor on cos and sin).
static void test_pose_scaling(const PosConfig *base) {
    PosConfig pc = *base;
    pc.scheme = POS_POSE;
    pc.seq_len = 64;
    pc.step_seqs = 8;
    pc.pose_target = 512;  // s = 8
    pc.rpe_eval_random = 0;
    pc.pose_scaling = 0;
    PosStep plain = pos_schedule_step(&pc, 7);
    static float raw[8 * 64];
    memcpy(raw, plain.positions, sizeof(raw));
    for (int m = 1; m < POSE_SCALING_N; m++) {
        pc.pose_scaling = m;
        PosStep st = pos_schedule_step(&pc, 7), ev = pos_standard(&pc);
        PosConfig rope = pc;
        rope.scheme = POS_ROPE;
        rope.pose_scaling = 0;
        EvalScaling es = {POSE_SCALING_METHOD[m], 8.0f, 32.0f, 1.0f, YARN_TEMP_HF, 64};
        PosStep want = pos_eval_step(&rope, &es, 512);
        int ok = st.positions && !ev.positions && st.mscale == want.mscale && ev.mscale == want.mscale &&
                 memcmp(st.inv_freq, want.inv_freq, sizeof(want.inv_freq)) == 0 &&
                 memcmp(ev.inv_freq, want.inv_freq, sizeof(want.inv_freq)) == 0 && ev.alpha[0] == want.alpha[0];
        for (int l = 0; l < MAX_LAYERS; l++) ok &= st.alpha[l] == 1.0f;
        for (int i = 0; i < 8 * 64 && ok; i++) ok &= st.positions[i] == (m == 1 ? 0.125f * raw[i] : raw[i]);
        int scaled = m == 1 ? want.alpha[0] == 0.125f : memcmp(want.inv_freq, plain.inv_freq, sizeof(want.inv_freq)) != 0;
        if (m == 3) scaled &= want.mscale == (float)(0.1 * log(8.0) + 1.0);
        char label[160];
        snprintf(label, sizeof(label), "PoSE --pose_scaling %s: training steps and evaluation scaled as --scaling %s "
                 "--scale_factor L_t / T", POSE_SCALING_NAMES[m], SCALE_NAMES[POSE_SCALING_METHOD[m]]);
        check(ok && scaled, label, "mscale %g / %g", st.mscale, want.mscale);
    }
    // --pose_scaling yarn is PoSE's revised YaRN (its modeling file's revised_yarn): at the tiny
    // model (hd 32, B 1e4, w 128) and s = 8 the ramp is j / 6 (low 0, high 6), theta'_j = theta_j /
    // (8 r_j + 1 - r_j) = theta_j / (1 + 7 j / 6): pair 3 at theta_3 / 4.5 (YaRN's own blend: 0.5625
    // theta_3), pairs from 6 on at theta_j / 8, pair 0 at theta_0; YaRN's factor 0.1 ln 8 + 1
    pc.head_dim = 32;
    pc.rope_base = 10000.0f;
    pc.seq_len = 128;
    pc.pose_target = 1024;
    pc.pose_scaling = 3;
    PosStep ry = pos_standard(&pc);
    double worst = 0;
    for (int j = 0; j < 16; j++) {
        double theta = pow(10000.0, -2.0 * j / 32), r = j < 6 ? j / 6.0 : 1.0;
        worst = fmax(worst, fabs(ry.inv_freq[j] - theta / (8 * r + 1 - r)) / (theta / (8 * r + 1 - r)));
    }
    double pair3 = ry.inv_freq[3] / pow(10000.0, -6.0 / 32);
    check(worst < 1e-6 && fabs(pair3 - 1 / 4.5) < 1e-6 && ry.mscale == (float)(0.1 * log(8.0) + 1.0),
          "--pose_scaling yarn is PoSE's revised YaRN: theta_j / (r_j s + 1 - r_j), pair 3 at theta / 4.5 (hd 32, w 128, s 8)",
          "worst rel err %.2e, pair 3 at %.4f theta", worst, pair3);
}

// T5's buckets, worked by hand from its formula (16 exact, then 16 + floor(ln(n/16) / ln 8 * 16)):
// n = 20: ln 1.25 / ln 8 * 16 = 1.72 -> 17; 64: 10.67 -> 26; 127: 15.94 -> 31; 128 and past: 31.
static void test_bias_buckets(void) {
    int n[9] = {0, 15, 16, 20, 31, 64, 127, 128, 5000}, want[9] = {0, 15, 16, 17, 21, 26, 31, 31, 31}, ok = 1;
    for (int i = 0; i < 9; i++) ok &= t5_bucket((float)n[i], 32, 128.0f) == want[i];
    ok &= t5_bucket(20.9f, 32, 128.0f) == 17 && t5_bucket(15.99f, 32, 128.0f) == 15;  // alpha * d rounded down
    check(ok, "T5's buckets: 16 exact distances, then log-spaced to 128", "");
    PosStep ps;
    memset(&ps, 0, sizeof(ps));
    for (int l = 0; l < 2; l++) ps.alpha[l] = l ? 2.5f : 1.0f;
    ps.pe = PE_SHAW;  // relative keys: the pass's buckets per layer
    ps.rel.clip = 10;
    BiasPass bp = attn_bias_pass(&ps, 2, 4, 40);
    BiasFn f;  // eRPE's function buckets the same distances the same way
    memset(&f, 0, sizeof(f));
    f.rs = ps.rel;
    int e_ok = bp.NB == 11 && bp.bucket_stride == 40 && pe_bias_fn_buckets(PE_ERPE, ps.rel) == 11;
    for (int d = 0; d < 40; d++) {
        int want0 = d < 10 ? d : 10, want1 = (int)(2.5f * d < 10 ? 2.5f * d : 10);
        e_ok &= bp.bucket[d] == want0 && bp.bucket[40 + d] == want1;
        e_ok &= erpe_bucket_of(&f, (float)d) == want0 && erpe_bucket_of(&f, 2.5f * d) == want1;
    }
    check(e_ok, "eRPE's and Shaw's buckets: min(floor(alpha * d), --rel_clip), per layer", "");
    // --t5_buckets 16 --t5_max_distance 64: 8 exact, then 8 + floor(ln(n/8) / ln 8 * 8), by hand
    f.rs.t5_buckets = 16;
    f.rs.t5_max = 64;
    int dn[8] = {0, 7, 8, 11, 16, 32, 63, 100}, dw[8] = {0, 7, 8, 9, 10, 13, 15, 15};
    int t_ok = pe_bias_fn_buckets(PE_T5, f.rs) == 16;
    for (int i = 0; i < 8; i++) t_ok &= t5_bucket_of(&f, (float)dn[i]) == dw[i];
    check(t_ok, "T5's buckets at --t5_buckets 16 --t5_max_distance 64: 8 exact, then log-spaced to 64", "");
}

// each check by the scheme or encoding it concerns (--only)
static void test_schemes(void) {
    if (wants("erpe shaw t5 tupe")) test_bias_buckets();
    PosConfig pc = test_pc(POS_DISCRETE, 0.125f, 8.0f, 4.0f, 32, 4, 42);
    int counts[4] = {0}, in_set = 1;
    for (int s = 0; s < 4000; s++) {
        float a = pos_draw_alpha(&pc, s);
        int k = a == 1 ? 0 : a == 2 ? 1 : a == 4 ? 2 : a == 8 ? 3 : -1;
        if (k < 0) in_set = 0; else counts[k]++;
    }
    // 1000 expected per value, sd 27: 5 sd
    if (wants("discrete"))
        check(in_set && abs(counts[0] - 1000) < 140 && abs(counts[3] - 1000) < 140, "discrete: alphas from the set, uniformly",
              "%d %d %d %d", counts[0], counts[1], counts[2], counts[3]);
    pc.scheme = POS_CYCLE;
    if (wants("cycle"))
        check(pos_draw_alpha(&pc, 0) == 1 && pos_draw_alpha(&pc, 1) == 2 && pos_draw_alpha(&pc, 2) == 4 &&
                  pos_draw_alpha(&pc, 3) == 8 && pos_draw_alpha(&pc, 4) == 1 && pos_draw_alpha(&pc, 401) == 2,
              "cycle: 1, 2, 4, 8, 1, ...", "");
    pc.scheme = POS_CURR_STEP;  // 100 steps, half at alpha 1
    int ok = 1;
    for (int s = 0; s < 100; s++) {
        float a = pos_draw_alpha(&pc, s);
        ok &= s < 50 ? a == 1.0f : (a >= 0.125f && a <= 8.0f && a != 1.0f);
    }
    if (wants("curriculum-step"))
        check(ok, "curriculum-step: alpha 1 for the first half, then U[a,b]", "");
    pc.scheme = POS_CURR_LINEAR;
    float lo0 = 1e9f, hi0 = 0, lo1 = 1e9f, hi1 = 0;
    for (int rep = 0; rep < 400; rep++) {
        PosConfig p = pc;
        p.seed = rep;
        float a0 = pos_draw_alpha(&p, 0), a1 = pos_draw_alpha(&p, 99);
        lo0 = fminf(lo0, a0); hi0 = fmaxf(hi0, a0); lo1 = fminf(lo1, a1); hi1 = fmaxf(hi1, a1);
    }
    if (wants("curriculum-linear"))
        check(lo0 >= 0.5f && hi0 <= 2.0f && lo1 < 0.5f && hi1 > 6.0f && lo1 >= 0.125f && hi1 <= 8.0f,
              "curriculum-linear: from [1/2, 2] at the start to [a,b] at the end", "start [%.2f, %.2f], end [%.2f, %.2f]", lo0, hi0, lo1, hi1);
    pc.scheme = POS_POSAUG;
    pc.layers = LAYERS_BOTTOM;
    PosStep ps = pos_schedule_step(&pc, 7);
    float a7 = pos_draw_alpha(&pc, 7);
    if (wants("posaug"))
        check(ps.alpha[0] == a7 && ps.alpha[1] == a7 && ps.alpha[2] == 1 && ps.alpha[3] == 1, "per-layer bottom: the lower half only", "");
    pc.layers = LAYERS_TOP;
    ps = pos_schedule_step(&pc, 7);
    if (wants("posaug"))
        check(ps.alpha[0] == 1 && ps.alpha[1] == 1 && ps.alpha[2] == a7 && ps.alpha[3] == a7, "per-layer top: the upper half only", "");
    pc.layers = LAYERS_INDEPENDENT;
    ps = pos_schedule_step(&pc, 7);
    PosStep ps2 = pos_schedule_step(&pc, 7);
    int distinct = ps.alpha[0] != ps.alpha[1] && ps.alpha[1] != ps.alpha[2] && ps.alpha[2] != ps.alpha[3];
    if (wants("posaug"))
        check(distinct && memcmp(&ps, &ps2, sizeof(ps)) == 0, "per-layer independent: one alpha per layer, reproducible", "");
    pc.layers = LAYERS_ALL;
    pc.scheme = POS_RANDOM_BASE;
    double bmin = 1e30, bmax = 0;
    for (int s = 0; s < 500; s++) {
        ps = pos_schedule_step(&pc, s);
        double base = pow(ps.inv_freq[1], -32.0 / 2.0);  // theta_1 = B^(-2/hd)
        bmin = fmin(bmin, base);
        bmax = fmax(bmax, base);
        if (ps.alpha[0] != 1.0f) bmax = 1e30;
    }
    if (wants("random-base"))
        check(bmin >= 1250 * 0.999 && bmax <= 80000 * 1.001 && bmin < 5000 && bmax > 70000,
              "random base: B in [B0/8, 8 B0], positions unchanged", "[%.0f, %.0f]", bmin, bmax);
    pc.scheme = POS_ROPE;
    pc.pe = PE_NOPE;
    ps = pos_schedule_step(&pc, 3);
    if (wants("nope"))
        check(!(ps.pe == PE_ROPE) && ps.alibi_slope[0] == 0, "NoPE: no rotation, no bias", "");
    pc.pe = PE_ROPE;
    pc.drope_step = 40;
    PosStep before = pos_schedule_step(&pc, 39), after = pos_schedule_step(&pc, 40), infer = pos_standard(&pc);
    if (wants("drope"))
        check((before.pe == PE_ROPE) && after.pe != PE_ROPE && infer.pe != PE_ROPE, "DroPE: RoPE until the step, then none (evaluation too)", "");
    pc.drope_step = 0;
    float m[8];
    alibi_slopes(m, 8);
    int pow2 = 1;
    for (int h = 0; h < 8; h++) pow2 &= m[h] == ldexpf(1.0f, -(h + 1));
    alibi_slopes(m, 6);  // c = 4: 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3
    float want6[6] = {0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f};
    if (wants("alibi"))
        check(pow2 && memcmp(m, want6, sizeof(want6)) == 0, "ALiBi slopes for 8 and 6 heads", "");
    pc.scheme = POS_RPE;
    pc.seq_len = 64;
    pc.rpe_max = 512;
    ps = pos_schedule_step(&pc, 4);
    int rpe_ok = ps.positions && ps.n_positions == 64 && (ps.pe == PE_ROPE);
    for (int t = 0; t < 64 && rpe_ok; t++)
        rpe_ok = ps.positions[t] >= 0 && ps.positions[t] < 512 && ps.positions[t] == floorf(ps.positions[t]) &&
                 (t == 0 || ps.positions[t] > ps.positions[t - 1]);
    float step4[64];
    memcpy(step4, ps.positions, sizeof(step4));
    ps = pos_schedule_step(&pc, 5);
    int differ = memcmp(step4, ps.positions, sizeof(step4)) != 0;
    ps = pos_schedule_step(&pc, 4);
    if (wants("rpe"))
        check(rpe_ok && differ && memcmp(step4, ps.positions, sizeof(step4)) == 0,
              "RPE: T distinct sorted integers in [0, rpe_max), new each step, fixed by (seed, step)", "");
    EvalScaling none = {SCALE_NONE, 1, 32, 1, 0, 64};
    ps = pos_eval_step(&pc, &none, 200);
    if (wants("rpe"))
        check(ps.positions == NULL, "RPE evaluates at standard positions", "");
    pc.rpe_per_layer = 1;  // --rpe_layers independent: layer 0 keeps the shared draw, the others differ
    ps = pos_schedule_step(&pc, 4);
    int layers_ok = ps.positions_stride == 64 && memcmp(step4, pos_layer(&ps, 0), sizeof(step4)) == 0;
    for (int l = 1; l < pc.n_layer; l++) {
        const float *p = pos_layer(&ps, l);
        layers_ok &= memcmp(p, pos_layer(&ps, l - 1), sizeof(step4)) != 0;
        for (int t = 1; t < 64; t++) layers_ok &= p[t] > p[t - 1] && p[t] < 512;
    }
    if (wants("rpe"))
        check(layers_ok, "RPE --rpe_layers independent: a sorted draw per layer", "");
    pc.rpe_per_layer = 0;
    pc.rpe_eval_random = 1;
    ps = pos_eval_step(&pc, &none, 200);
    int eval_ok = ps.positions && ps.n_positions == 200 && ps.positions_stride == 0;
    for (int t = 1; t < 200 && eval_ok; t++) eval_ok = ps.positions[t] > ps.positions[t - 1] && ps.positions[t] < 512;
    float first = ps.positions[0], last = ps.positions[199];
    ps = pos_eval_step(&pc, &none, 200);
    if (wants("rpe"))
        check(eval_ok && ps.positions[0] == first && ps.positions[199] == last && last > 199,
              "RPE --rpe_eval random: 200 sorted distinct positions in [0, rpe_max), fixed per length", "last %g", last);
    if (wants("pose")) {
        test_pose(&pc);
        test_pose_scaling(&pc);
    }
    pc.rpe_eval_random = 0;
    pc.scheme = POS_RFS;
    pc.rfs_scale = 1000.0f;
    ps = pos_schedule_step(&pc, 4);
    int rfs_ok = ps.positions && ps.n_positions == 64;
    for (int t = 0; t < 64 && rfs_ok; t++) rfs_ok = ps.positions[t] >= 0 && ps.positions[t] < 1000 && (t == 0 || ps.positions[t] >= ps.positions[t - 1]);
    if (wants("rfs"))
        check(rfs_ok, "RFS: T sorted floats in [0, L)", "");
    ps = pos_eval_step(&pc, &none, 200);  // n = 200 > T: p_t = (2t+1) / 400 * 1000
    float p0 = ps.positions[0], p199 = ps.positions[199];
    ps = pos_eval_step(&pc, &none, 32);   // n = 32 < T: (2t+1) / 128 * 1000
    if (wants("rfs"))
        check(fabsf(p0 - 2.5f) < 1e-4f && fabsf(p199 - 997.5f) < 1e-3f && fabsf(ps.positions[0] - 7.8125f) < 1e-4f,
              "RFS inference positions (2t+1) / (2 max(T,n)) * L", "%.4f %.4f %.4f", p0, p199, ps.positions[0]);
    pc.scheme = POS_POSAUG;
    pc.pe = PE_ALIBI;
    ps = pos_schedule_step(&pc, 9);
    if (wants("alibi posaug"))
        check(!(ps.pe == PE_ROPE) && ps.alibi_slope[0] == 0.25f && ps.alpha[0] == pos_draw_alpha(&pc, 9) && ps.alpha[0] != 1.0f,
              "ALiBi+PosAug: slopes for 4 heads, distances times alpha", "");
    pc.pe = PE_SINUSOIDAL;
    ps = pos_schedule_step(&pc, 9);
    if (wants("sinusoidal"))
        check(!(ps.pe == PE_ROPE) && ps.alibi_slope[0] == 0 && ps.pe == PE_SINUSOIDAL, "sinusoidal APE: no rotation, positions from the hook", "");
    pc.scheme = POS_ROPE;
    pc.pe = PE_LEARNED;
    ps = pos_schedule_step(&pc, 9);
    PassPositions pp = pos_pass(&ps, pc.n_layer, 2, 0, 64);
    learned_rows_check(&pp, 2, 64);  // rows 0..63: passes (a failure would exit)
    if (wants("learned"))
        check(ps.pe == PE_LEARNED && pass_pos(&pp, 0, 1, 63) == 63.0f, "learned APE: integer positions p_t = t, one row each", "");
}

// Positions are data: pos_pass fills p[l][b][t] from a step's recipe, with a stride of 0
// where layers or sequences share them, and the rounding every kernel used to apply itself.
static void test_pass_positions(void) {
    PosStep ps;
    memset(&ps, 0, sizeof(ps));
    for (int l = 0; l < 3; l++) ps.alpha[l] = 0.3f;
    ps.offset = 0.7f;
    PassPositions pp = pos_pass(&ps, 3, 4, 0, 50);
    int ok = pp.layer_stride == 0 && pp.seq_stride == 0 && pp.n == 50;
    for (int t = 0; t < 50; t++) ok &= pp.p[t] == 0.3f * (float)t + 0.7f;
    check(ok, "pass positions: one shared row alpha * t + offset (fp32, unfused) for every layer and sequence",
          "strides %d %d, n %zu", pp.layer_stride, pp.seq_stride, pp.n);
    ps.alpha[2] = 2.5f;
    pp = pos_pass(&ps, 3, 4, 10, 20);  // a pass continuing a KV cache at position 10
    ok = pp.layer_stride == 20 && pp.seq_stride == 0 && pp.n == 60;
    for (int t = 0; t < 20; t++) ok &= pass_pos(&pp, 1, 3, t) == 0.3f * (float)(10 + t) + 0.7f &&
                                       pass_pos(&pp, 2, 0, t) == 2.5f * (float)(10 + t) + 0.7f;
    check(ok, "pass positions: a row per layer when the layers' alphas differ, tokens pos0 + t of a KV cache",
          "strides %d %d, n %zu", pp.layer_stride, pp.seq_stride, pp.n);
    float expl[2][6][8];  // [layer][sequence of the step][position]
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < 6; s++)
            for (int t = 0; t < 8; t++) expl[l][s][t] = 100.0f * l + 10.0f * s + t;
    ps.positions = &expl[0][0][0];
    ps.n_positions = 8;
    ps.positions_stride = 6 * 8;
    ps.seq_stride = 8;
    PosStep pm = pos_micro(&ps, 2, 2);  // micro-batch 2 of 2 sequences: the step's sequences 4 and 5
    pp = pos_pass(&pm, 2, 2, 3, 5);
    ok = pp.layer_stride == 10 && pp.seq_stride == 5 && pp.n == 20;
    for (int l = 0; l < 2; l++)
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < 5; t++) ok &= pass_pos(&pp, l, b, t) == expl[l][4 + b][3 + t];
    check(ok, "pass positions: explicit positions per layer and per sequence, sliced for a micro-batch and pos0",
          "strides %d %d, n %zu", pp.layer_stride, pp.seq_stride, pp.n);
}

// ----------------------------------------------------------------------------
// 4. metrics on hand-made per-position losses

static void test_metrics(void) {
    double loss[512];
    for (int i = 0; i < 512; i++) loss[i] = i < 128 ? 2.0 : 3.5;
    for (int i = 0; i < 64; i++) loss[i] = 9.0;  // excluded from the in-distribution mean
    CliffSummary s = cliff_summary(loss, 512, 128, 64);
    check(fabs(s.in_dist - 2.0) < 1e-12 && fabs(s.ood - 3.5) < 1e-12 && fabs(s.cliff - 1.5) < 1e-12,
          "cliff on hand-made losses", "in %.3f ood %.3f cliff %.3f", s.in_dist, s.ood, s.cliff);
    for (int i = 0; i < 512; i++) loss[i] = i;
    s = cliff_summary(loss, 512, 128, 64);
    // mean of 64..127 = 95.5, of 128..511 = 319.5
    check(fabs(s.in_dist - 95.5) < 1e-9 && fabs(s.ood - 319.5) < 1e-9, "cliff ranges are [64,w) and [w,L)", "");
}

// ----------------------------------------------------------------------------
// 4b. the paper's evaluation: G(C), entropy ratio, penalty, scaling, the window
// variants, the KV cache, passkey

static void test_eval_metrics(void) {
    double full[600], win[600], ent[600];
    for (int i = 0; i < 600; i++) {
        full[i] = 1.0 + 0.001 * i;
        win[i] = full[i] + (i < 512 ? 5.0 : 0.25);  // below W the difference must not count
        ent[i] = i < 128 ? 2.0 : 3.0;
    }
    check(fabs(context_gain(win, full, 512, 600) - 0.25) < 1e-12, "G(C) averages W <= i < C", "%.6f", context_gain(win, full, 512, 600));
    check(isnan(context_gain(win, full, 512, 512)), "G(C) is undefined for C <= W", "");
    check(fabs(entropy_ratio(ent, 600, 128, 64) - 1.5) < 1e-12, "entropy ratio OOD / in-dist", "%.6f", entropy_ratio(ent, 600, 128, 64));
    char p[256];
    snprintf(p, sizeof(p), "%s/base.json", TMP);
    FILE *f = xfopen(p, "w");
    fprintf(f, "{\"tag\": \"x\", \"in_dist\": 4.040000, \"ood\": 6.3}\n");
    fclose(f);
    double pen = 4.10 / read_json_number(p, "in_dist") - 1.0;
    check(fabs(pen - 0.0148515) < 1e-6, "penalty against a baseline summary", "%.5f", pen);
}

static void test_scaling(const char *ref_path) {
    int low, high;
    yarn_low_high(64, 10000.0, 2048, 32.0, 1.0, &low, &high);
    check(low == 8 && high == 21, "YaRN ramp for hd 64, B 1e4, w 2048 (low 8, high 21, as Hugging Face computes)", "low %d high %d", low, high);
    PosConfig pc = test_pc(POS_ROPE, 1, 1, 1, 64, 4, 1);
    EvalScaling es = {SCALE_PI, 4.0f, 32.0f, 1.0f, YARN_TEMP_HF, 2048};
    PosStep ps = pos_eval_step(&pc, &es, 8192);
    check(ps.alpha[0] == 0.25f && ps.alpha[3] == 0.25f && ps.mscale == 1.0f, "PI divides positions by s", "alpha %g", ps.alpha[0]);
    es.method = SCALE_YARN;
    ps = pos_eval_step(&pc, &es, 8192);
    float m_hf = ps.mscale;
    es.temperature = YARN_TEMP_PAPER;
    ps = pos_eval_step(&pc, &es, 8192);
    check(fabsf(m_hf - (0.1f * logf(4.0f) + 1.0f)) < 1e-6f && fabsf(ps.mscale - sqrtf(m_hf)) < 1e-6f,
          "YaRN attention factor, both conventions", "hf %.6f paper %.6f", m_hf, ps.mscale);
    FILE *f = fopen(ref_path, "rb");
    if (!f) { check(0, "scaling reference present", "%s missing (python dev/scaling_reference.py)", ref_path); return; }
    fclose(f);
    TensorFile tf;
    tf_load(&tf, ref_path, TF_KIND_REFERENCE);
    // every tensor of the file: <prefix><method>_s<s>[_len<n>].inv_freq or .attention_factor,
    // the set's head dim, base and w in <prefix>config (prefix "", "small." or "long.")
    int checked = 0;
    for (int i = 0; i < tf.n; i++) {
        const TensorEntry *e = &tf.t[i];
        char name[128], method[128] = "", prefix[128] = "", cfg_name[160];
        snprintf(name, sizeof(name), "%s", e->name);
        char *first = strchr(name, '.');
        if (first && strchr(first + 1, '.')) snprintf(prefix, sizeof(prefix), "%.*s", (int)(first - name + 1), name);
        snprintf(cfg_name, sizeof(cfg_name), "%sconfig", prefix);
        const float *set = (const float *)tf_get(&tf, cfg_name, TF_F32, 3);
        int hd = (int)set[0], w = (int)set[2];
        char *base = name + strlen(prefix), *dot = strrchr(base, '.');
        if (!dot || (strcmp(dot, ".inv_freq") != 0 && strcmp(dot, ".attention_factor") != 0)) continue;
        int is_freq = strcmp(dot, ".inv_freq") == 0;
        *dot = 0;
        float sf = 1.0f;
        int len = 0;
        char *us = strstr(base, "_s");
        if (us) {
            snprintf(method, sizeof(method), "%.*s", (int)(us - base), base);
            sf = strtof(us + 2, NULL);
            char *ln = strstr(us, "_len");
            if (ln) len = atoi(ln + 4);
        } else {
            snprintf(method, sizeof(method), "%s", base);
        }
        int m = -1;
        const char *names[][2] = {{"plain", "none"}, {"pi", "pi"}, {"ntk", "ntk"}, {"dynamic", "dynamic-ntk"}, {"yarn", "yarn"}};
        for (int k = 0; k < 5; k++)
            if (strcmp(method, names[k][0]) == 0)
                for (int q = 0; q < SCALE_N; q++)
                    if (strcmp(SCALE_NAMES[q], names[k][1]) == 0) m = q;
        char label[200];
        snprintf(label, sizeof(label), "scaling vs Hugging Face: %s", e->name);
        if (m < 0) { check(0, label, "unknown reference tensor"); continue; }
        PosConfig p = test_pc(POS_ROPE, 1, 1, 1, hd, 1, 1);
        p.rope_base = set[1];
        EvalScaling s = {m, sf, 32.0f, 1.0f, YARN_TEMP_HF, w};
        PosStep st = pos_eval_step(&p, &s, len ? len : (int)(sf * w));
        if (is_freq) {
            float freq[MAX_HALF_HD];  // PI scales positions, not frequencies: compare theta * alpha
            for (int j = 0; j < hd / 2; j++) freq[j] = st.inv_freq[j] * st.alpha[0];
            double err = rel_err(freq, (const float *)tf_get(&tf, e->name, TF_F32, hd / 2), hd / 2);
            check(err < 1e-6, label, "rel err %.2e", err);
        } else {
            float want = *(const float *)tf_get(&tf, e->name, TF_F32, 1);
            check(fabsf(st.mscale - want) < 1e-6f, label, "%.6f vs %.6f", st.mscale, want);
        }
        checked++;
    }
    check(checked >= 20, "scaling reference: every tensor compared", "%d tensors", checked);
    tf_free(&tf);
}

// A small model with random weights on random tokens: the evaluation passes agree where
// they must.
static void test_eval_passes(void) {
    Config c;
    config_defaults(&c);
    c.V = 60; c.C = 32; c.L = 2; c.NH = 4; c.NKV = 2; c.F = 48; c.T = 16;
    round_vocab(&c);
    GPT g;
    gpt_alloc(&g, &c, 0);
    gpt_init(&g, 5);
    for (size_t i = 0; i < g.shapes[P_WQ].numel; i++) g.params[P_WQ][i] *= 5.0f;  // sharper attention
    for (size_t i = 0; i < g.shapes[P_WK].numel; i++) g.params[P_WK][i] *= 5.0f;
    int L = 96, tok[97];
    Rng r = rng_make(8, 8);
    for (int i = 0; i <= L; i++) tok[i] = (int)rng_below(&r, (uint32_t)c.V);
    EvalCtx e;
    memset(&e, 0, sizeof(e));
    e.g = &g;
    PosConfig pc = pos_config_of(&c);
    PosStep ps = pos_standard(&pc);
    float full[96], other[96], ent[96] = {0};
    cpu_losses(&e, tok, L, &ps, 0, full, ent);
    cpu_losses(&e, tok, L, &ps, L, other, NULL);
    check(rel_err(other, full, L) < 1e-6, "banded window >= L equals the full pass", "rel err %.2e", rel_err(other, full, L));
    cpu_losses_chunked(&e, tok, L, &ps, L, L, other);
    check(rel_err(other, full, L) < 1e-6, "chunked, one chunk, equals the full pass", "rel err %.2e", rel_err(other, full, L));
    cpu_losses_chunked(&e, tok, L, &ps, L, 10, other);  // several chunks, the cache never cut
    check(rel_err(other, full, L) < 1e-5, "chunked with C <= W equals the full pass (KV cache)", "rel err %.2e",
          rel_err(other, full, L));
    // with one layer, banded at position i = the full pass over the W tokens ending at i
    // (RoPE is relative; with more layers the receptive field grows to L x W, as with a KV cache)
    int W = 24;
    Config c1 = c;
    c1.L = 1;
    GPT g1;
    gpt_alloc(&g1, &c1, 0);
    gpt_init(&g1, 6);
    for (size_t i = 0; i < g1.shapes[P_WQ].numel; i++) g1.params[P_WQ][i] *= 5.0f;
    EvalCtx e1;
    memset(&e1, 0, sizeof(e1));
    e1.g = &g1;
    cpu_losses(&e1, tok, L, &ps, W, other, NULL);
    double worst = 0;
    for (int i = W; i < L; i += 7) {
        float sub[24];
        cpu_losses(&e1, tok + i - W + 1, W, &ps, 0, sub, NULL);
        worst = fmax(worst, fabs(sub[W - 1] - other[i]) / fabs(other[i]));
    }
    check(worst < 1e-5, "banded loss at i = full pass over the last W tokens (one layer)", "worst rel err %.2e", worst);
    eval_ctx_free(&e1);
    gpt_free(&g1);
    cpu_losses_chunked(&e, tok, L, &ps, W, W, other);
    double diff = 0;
    for (int i = 2 * W; i < L; i++) diff += fabs(other[i] - full[i]);
    check(diff > 1e-2, "chunked approximation differs from the full pass past W", "sum |diff| %.3f", diff);
    int outside = 0;  // entropies outside [0, ln L] (a NaN too)
    double emax = 0;
    for (int i = 0; i < L; i++) {
        outside += !(ent[i] >= 0 && ent[i] <= log(L) + 1e-4);
        if (ent[i] > emax) emax = ent[i];
    }
    check(fabs(ent[0]) < 1e-6 && outside == 0, "attention entropy: 0 at position 0, within [0, ln L]",
          "max %.3f, %d outside", emax, outside);
    // KV-cache decoding picks the argmax of a full pass at every step
    int prompt[40], out[12], seq[52];
    memcpy(prompt, tok, sizeof(prompt));
    cpu_greedy(&e, prompt, 40, 12, &ps, out);
    memcpy(seq, prompt, sizeof(prompt));
    int same = 1;
    for (int i = 0; i < 12; i++) {
        Acts *a = eval_acts(&e, &e.a, 40 + i);
        gpt_forward(&g, a, seq, NULL, &ps);
        seq[40 + i] = pick_token(a->logits + (size_t)(40 + i - 1) * c.Vp, c.V, 0.0f, NULL);
        same &= seq[40 + i] == out[i];
    }
    check(same, "KV-cache greedy decoding equals full-pass decoding", "");
    eval_ctx_free(&e);
    gpt_free(&g);
}

static void test_passkey(void) {
    char buf[2048];
    double depth;
    int n = passkey_build_text(buf, 1000, 31415, 0.5, &depth);
    check(n > 0 && n <= 1000 && strstr(buf, "The pass key is 31415. Remember it. 31415 is the pass key.") &&
              strstr(buf, PASSKEY_INTRO) == buf && strcmp(buf + n - strlen(PASSKEY_QUESTION), PASSKEY_QUESTION) == 0,
          "passkey prompt: intro, needle, question, within length", "%d bytes", n);
    int fillers = 0;
    for (char *p = buf; (p = strstr(p, PASSKEY_FILLER)); p++) fillers++;
    char more[2048];
    double d2;
    int n_more = passkey_build_text(more, n + (int)strlen(PASSKEY_FILLER), 31415, 0.5, &d2);
    int fillers_more = 0;
    for (char *p = more; (p = strstr(p, PASSKEY_FILLER)); p++) fillers_more++;
    check(fillers >= 1 && fillers_more == fillers && n_more == n && fabs(depth - 0.5) <= 0.5 / fillers + 1e-9,
          "passkey prompt: as many fillers as fit, needle at the depth", "%d fillers, depth %.3f", fillers, depth);
    n_more = passkey_build_text(more, n + (int)strlen(PASSKEY_FILLER) + 2, 31415, 0.5, &d2);
    fillers_more = 0;
    for (char *p = more; (p = strstr(p, PASSKEY_FILLER)); p++) fillers_more++;
    check(fillers_more == fillers + 1 && n_more <= n + (int)strlen(PASSKEY_FILLER) + 2, "passkey prompt: one filler more fits one more", "");
    check(strstr(buf, "\nThe pass key is 31415.") && strstr(buf, "pass key.\nThe grass") && strstr(buf, "again.\nWhat is"),
          "passkey prompt: Landmark layout (parts on their own lines)", "");
    passkey_build_text(buf, 1000, 7, 0.0, &depth);
    char *needle = strstr(buf, "The pass key is 7.");
    check(needle && needle < strstr(buf, PASSKEY_FILLER) && depth == 0.0, "passkey depth 0 puts the needle first", "");
    check(passkey_build_text(buf, 100, 7, 0.5, &depth) < 0, "passkey prompt that cannot fit is refused", "");
    check(passkey_first_integer(" 31415. Remember") == 31415 && passkey_first_integer(" is 0042") == 42 &&
              passkey_first_integer(" none") == -1 && passkey_first_integer("key 12 and 34") == 12,
          "passkey scorer reads the first integer", "");
    Rng r = rng_make(1, 1);
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < 2000; i++) {
        int k = passkey_draw_key(&r, 5);
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    check(lo >= 10000 && hi <= 99999, "five-digit passkeys", "[%d, %d]", lo, hi);
}

// A stand-in model for the retrieval loop: its greedy answer is the number after the
// needle's "is: " in the prompt bytes (an oracle), or junk.
static int oracle_right;
static void oracle_greedy(void *ctx, const int *prompt, int n, int n_new, const PosStep *ps, int *out) {
    (void)ctx, (void)ps;
    static char text[1 << 16];
    int m = n < (int)sizeof(text) - 1 ? n : (int)sizeof(text) - 1;
    for (int i = 0; i < m; i++) text[i] = prompt[i] < 256 ? (char)prompt[i] : ' ';
    text[m] = 0;
    const char *v = strstr(text, " is: ");
    char answer[32];
    snprintf(answer, sizeof(answer), " %ld.", v && oracle_right ? strtol(v + 5, NULL, 10) : 42L);
    for (int j = 0; j < n_new; j++) out[j] = answer[j] ? (unsigned char)answer[j] : 256;
    for (int j = (int)strlen(answer); j < n_new; j++) out[j] = 256;
}

// RULER's single needle: the byte prompt's layout and length, the string-match scorer,
// and the evaluation loop scored through an oracle and a wrong model.
static void test_ruler(void) {
    char buf[4096], key[32];
    double depth;
    Rng r = rng_make(3, 4);
    long value = ruler_draw(&r, key);
    int n = ruler_build_text(buf, 2000, key, value, 0.5, &depth);
    char needle[128], question[256];
    snprintf(needle, sizeof(needle), "One of the special magic numbers for %s is: %ld.", key, value);
    snprintf(question, sizeof(question), "\nWhat is the special magic number for %s mentioned in the provided text? "
             "The special magic number for %s mentioned in the provided text is", key, key);
    int needles = 0, fillers = 0;
    for (char *p = buf; (p = strstr(p, needle)); p++) needles++;
    for (char *p = buf; (p = strstr(p, PASSKEY_FILLER)); p++) fillers++;
    check(n > 0 && n <= 2000 && (int)strlen(buf) == n && strstr(buf, RULER_INTRO) == buf && needles == 1 &&
              strcmp(buf + n - strlen(question), question) == 0 && value >= 1000000 && value <= 9999999 && strchr(key, '-'),
          "RULER prompt: intro, one needle, the question last, within the length", "%d bytes, %d needles, key %s", n, needles, key);
    int F = (int)strlen(PASSKEY_FILLER), n_same = ruler_build_text(buf, n + F, key, value, 0.5, &depth);
    int n_more = ruler_build_text(buf, n + F + 1, key, value, 0.5, &depth);
    check(fillers >= 2 && 2000 - n < F + 1 && n_same == n && n_more == n + F + 1,
          "RULER prompt: as many fillers as fit (one more needs its bytes and a space)", "%d fillers, %d bytes left", fillers, 2000 - n);
    ruler_build_text(buf, 2000, key, value, 0.0, &depth);
    check(strstr(buf, needle) == buf + strlen(RULER_INTRO) + 1 && depth == 0.0, "RULER depth 0 puts the needle first", "");
    check(ruler_build_text(buf, 300, key, value, 0.5, &depth) < 0, "RULER prompt that cannot fit is refused", "");
    check(ruler_found(" 1234567.", 1234567) && ruler_found("x91234567", 1234567) && !ruler_found(" 123456", 1234567),
          "RULER scorer: the value appears in the output (string match)", "");
    Config c;
    config_defaults(&c);
    snprintf(c.ruler_lengths, sizeof(c.ruler_lengths), "512,1024");
    c.ruler_n = 7;
    Tokenizer tok;
    tokenizer_init_bytes(&tok);
    PosConfig pc = pos_config_of(&c);
    EvalScaling es = eval_scaling_of(&c);
    EvalModel m = {NULL, NULL, NULL, oracle_greedy};
    Retrieval t = retrieval_of(&c, TASK_RULER);
    FILE *devnull = xfopen("/dev/null", "w");
    oracle_right = 1;
    PasskeyResult good = run_retrieval(&t, &c, &m, &tok, &pc, &es, devnull);
    oracle_right = 0;
    PasskeyResult bad = run_retrieval(&t, &c, &m, &tok, &pc, &es, devnull);
    fclose(devnull);
    check(good.n == 2 && good.lengths[1] == 1024 && good.total[0] == 7 && good.correct[0] == 7 && good.correct[1] == 7 &&
              bad.correct[0] + bad.correct[1] == 0 && bad.total[1] == 7,
          "RULER evaluation: an oracle scores 7/7 per length, a wrong answer 0/7", "%d %d / %d %d", good.correct[0],
          good.correct[1], bad.correct[0], bad.correct[1]);
}

// A HellaSwag file of two examples (contexts of 3 tokens, endings as given), label
// `bad_label` for the second one and token `bad_token` at the start of its context.
static void write_hellaswag(const char *path, int bad_label, int bad_token) {
    int ctx[6] = {256, 100, 100, bad_token, 100, 100}, ctx_off[3] = {0, 3, 6};
    // example 0: sums 8, 3, 18, 8 over 16, 1, 2, 8 characters: acc picks 1, acc_norm 0 (label 0)
    // example 1: sums 4, 4, 6, 5: a tie, the first wins; per character 2 wins (label 2)
    int end[] = {2, 2, 2, 2, 3, 9, 9, 4, 4, /* */ 4, 1, 3, 6, 5};
    int end_off[9] = {0, 4, 5, 7, 9, 10, 12, 13, 14}, chars[8] = {16, 1, 2, 8, 4, 4, 12, 5}, labels[2] = {0, bad_label};
    TensorWriter w;
    tw_open(&w, path, TF_KIND_DUMP, 6);
    tw_add1(&w, "ctx_tokens", TF_I32, 6, ctx);
    tw_add1(&w, "ctx_offsets", TF_I32, 3, ctx_off);
    tw_add1(&w, "end_tokens", TF_I32, 14, end);
    tw_add1(&w, "end_offsets", TF_I32, 9, end_off);
    tw_add1(&w, "end_chars", TF_I32, 8, chars);
    tw_add1(&w, "labels", TF_I32, 2, labels);
    tw_close(&w);
}

// a stand-in model: the loss at position i is the value of the token it predicts
static void token_value_losses(void *ctx, const int *tokens, int L, const PosStep *ps, int window, float *losses,
                               float *entropy) {
    (void)ctx, (void)ps, (void)window, (void)entropy;
    for (int i = 0; i < L; i++) losses[i] = (float)tokens[i + 1];
}

// ----------------------------------------------------------------------------
// 5. files: shards, data order, tensor files

static void write_shard(const char *path, int magic, int version, long n_header, const void *tok, size_t tok_bytes) {
    int32_t h[256] = {0};
    h[0] = magic; h[1] = version; h[2] = (int32_t)n_header;
    FILE *f = xfopen(path, "wb");
    fwrite(h, 4, 256, f);
    fwrite(tok, 1, tok_bytes, f);
    fclose(f);
}

// A uint16 shard with header[3] = flag and `mask_bytes` of mask after the tokens.
static void write_masked_shard(const char *path, int flag, const uint16_t *tok, long n, const unsigned char *mask,
                               long mask_bytes) {
    int32_t h[256] = {0};
    h[0] = SHARD_MAGIC_U16; h[1] = 1; h[2] = (int32_t)n; h[3] = flag;
    FILE *f = xfopen(path, "wb");
    fwrite(h, 4, 256, f);
    fwrite(tok, 2, n, f);
    fwrite(mask, 1, mask_bytes, f);
    fclose(f);
}

// The same tensors in the version-1 layout (no padding, no checksum): an old file.
static void write_v1_copy(const char *src, const char *dst) {
    TensorFile tf;
    tf_load(&tf, src, 0);
    FILE *f = xfopen(dst, "wb");
    int32_t h[4] = {TF_MAGIC, 1, tf.kind, tf.n};
    fwrite(h, 4, 4, f);
    for (int i = 0; i < tf.n; i++) {
        const TensorEntry *e = &tf.t[i];
        int32_t len = (int32_t)strlen(e->name), hd[2] = {e->dtype, e->ndim};
        fwrite(&len, 4, 1, f);
        fwrite(e->name, 1, len, f);
        fwrite(hd, 4, 2, f);
        fwrite(e->shape, 4, e->ndim, f);
        fwrite(e->data, tf_dtype_size(e->dtype), e->numel, f);
    }
    int32_t end = TF_END;
    fwrite(&end, 4, 1, f);
    fclose(f);
    tf_free(&tf);
}

// One change to one tensor of a file: its element `index` set (set: f32 to f, u64 to u,
// int32 to (int32_t)u), or its name (new_name, NULL: kept) or shape (ndim, shape; 0: kept;
// the data padded with zeros to a larger one) changed.
typedef struct {
    const char *name, *new_name;
    int set, ndim;
    const int *shape;
    size_t index;
    float f;
    uint64_t u;
} TensorEdit;

// A copy of src with one tensor changed, written with a valid checksum: damage the checksum
// cannot see.
static void rewrite_with(const char *src, const char *dst, TensorEdit ed) {
    TensorFile tf;
    tf_load(&tf, src, 0);
    TensorWriter w;
    tw_open(&w, dst, tf.kind, tf.n);
    for (int i = 0; i < tf.n; i++) {
        const TensorEntry *e = &tf.t[i];
        int hit = strcmp(e->name, ed.name) == 0, nd = hit && ed.ndim ? ed.ndim : e->ndim;
        const int *sh = hit && ed.ndim ? ed.shape : e->shape;
        size_t n = 1, es = tf_dtype_size(e->dtype);
        for (int d = 0; d < nd; d++) n *= (size_t)sh[d];
        unsigned char *d = (unsigned char *)xcalloc(n > e->numel ? n : e->numel, es);
        memcpy(d, e->data, e->numel * es);
        if (hit && ed.set && e->dtype == TF_F32) ((float *)d)[ed.index] = ed.f;
        if (hit && ed.set && e->dtype == TF_U64) ((uint64_t *)d)[ed.index] = ed.u;
        if (hit && ed.set && e->dtype == TF_I32) ((int32_t *)d)[ed.index] = (int32_t)ed.u;
        tw_add(&w, hit && ed.new_name ? ed.new_name : e->name, e->dtype, nd, sh, d);
        free(d);
    }
    tw_close(&w);
    tf_free(&tf);
}

// A copy with element `index` of tensor `name` set to fvalue (f32) or uvalue (u64, int32)
static void rewrite_tensor(const char *src, const char *dst, const char *name, size_t index, float fvalue, uint64_t uvalue) {
    TensorEdit ed = {name, NULL, 1, 0, NULL, index, fvalue, uvalue};
    rewrite_with(src, dst, ed);
}

// A copy with tensor `name` renamed to new_name (NULL: the same) and given the shape (ndim,
// shape; ndim 0: the same)
static void rewrite_entry(const char *src, const char *dst, const char *name, const char *new_name, int ndim, const int *shape) {
    TensorEdit ed = {name, new_name, 0, ndim, shape, 0, 0.0f, 0};
    rewrite_with(src, dst, ed);
}

// A copy of a checkpoint whose meta.flags text has `from` replaced by `to` (valid checksum).
static void rewrite_flags(const char *src, const char *dst, const char *from, const char *to) {
    TensorFile tf;
    tf_load(&tf, src, TF_KIND_CHECKPOINT);
    static char text[8192], out[8192];
    const TensorEntry *f = tf_find(&tf, "meta.flags");
    size_t n = f ? f->numel : 0;
    for (size_t i = 0; i < n && i + 1 < sizeof(text); i++) text[i] = (char)((const int32_t *)f->data)[i];
    text[n] = 0;
    char *at = strstr(text, from);
    if (at) snprintf(out, sizeof(out), "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    else snprintf(out, sizeof(out), "%s", text);
    size_t nf;
    int32_t *ints = flags_to_ints(out, &nf);
    TensorWriter w;
    tw_open(&w, dst, tf.kind, tf.n);
    for (int i = 0; i < tf.n; i++) {
        const TensorEntry *e = &tf.t[i];
        if (strcmp(e->name, "meta.flags") == 0) tw_add1(&w, e->name, TF_I32, (int)nf, ints);
        else tw_add(&w, e->name, e->dtype, e->ndim, e->shape, e->data);
    }
    tw_close(&w);
    free(ints);
    tf_free(&tf);
}

// A copy of src without the tensors whose names begin with `prefix`.
static void copy_without(const char *src, const char *dst, const char *prefix) {
    TensorFile tf;
    tf_load(&tf, src, 0);
    int keep = 0;
    for (int i = 0; i < tf.n; i++) keep += strncmp(tf.t[i].name, prefix, strlen(prefix)) != 0;
    TensorWriter w;
    tw_open(&w, dst, tf.kind, keep);
    for (int i = 0; i < tf.n; i++)
        if (strncmp(tf.t[i].name, prefix, strlen(prefix)) != 0)
            tw_add(&w, tf.t[i].name, tf.t[i].dtype, tf.t[i].ndim, tf.t[i].shape, tf.t[i].data);
    tw_close(&w);
    tf_free(&tf);
}

// src without its AdamW moments: a weights-only checkpoint (what dev/import_hf.py writes).
static void write_weights_only(const char *src, const char *dst) { copy_without(src, dst, "adam_"); }

static void test_files(void) {
    char p[256];
    uint16_t t16[1000];
    uint32_t t32[1000];
    for (int i = 0; i < 1000; i++) { t16[i] = (uint16_t)(i % 257); t32[i] = (uint32_t)(i * 37 % 70000); }
    snprintf(p, sizeof(p), "%s/s16.bin", TMP);
    write_shard(p, SHARD_MAGIC_U16, 1, 1000, t16, sizeof(t16));
    long n;
    int *tok = shard_load(p, 257, &n, NULL);
    int ok = n == 1000;
    for (int i = 0; i < 1000 && ok; i++) ok = tok[i] == t16[i];
    check(ok, "uint16 shard round trip", "");
    free(tok);
    snprintf(p, sizeof(p), "%s/s32.bin", TMP);
    write_shard(p, SHARD_MAGIC_U32, 7, 1000, t32, sizeof(t32));
    tok = shard_load(p, 70000, &n, NULL);
    ok = n == 1000;
    for (int i = 0; i < 1000 && ok; i++) ok = tok[i] == (int)t32[i];
    check(ok, "uint32 shard round trip", "");
    free(tok);

    // data order: a permutation of every window per epoch, fixed by the seed
    snprintf(p, sizeof(p), "%s/order_*.bin", TMP);
    char q[256];
    for (int s = 0; s < 2; s++) {
        uint16_t tk[801];
        for (int i = 0; i < 801; i++) tk[i] = (uint16_t)((s * 801 + i) % 250);
        snprintf(q, sizeof(q), "%s/order_%d.bin", TMP, s);
        write_shard(q, SHARD_MAGIC_U16, 1, 801, tk, sizeof(tk));
    }
    DataLoader a, b, c;
    loader_init(&a, p, 257, 16, 1);
    loader_init(&b, p, 257, 16, 1);
    loader_init(&c, p, 257, 16, 2);
    int ra[17 * 100], rb[17 * 100], rc[17 * 100];
    loader_next_batch(&a, 100, ra, NULL);
    loader_next_batch(&b, 100, rb, NULL);
    loader_next_batch(&c, 100, rc, NULL);
    check(memcmp(ra, rb, sizeof(ra)) == 0, "data order is fixed by the seed", "");
    check(memcmp(ra, rc, sizeof(ra)) != 0, "another seed gives another data order", "");
    // an epoch is 2 shards x 50 windows: every window exactly once
    int seen[2][50] = {{0}};
    for (int i = 0; i < 100; i++) {
        int first = ra[i * 17];  // token value identifies shard and offset
        int sh = -1, w = -1;
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < 50; k++)
                if (((s * 801 + k * 16) % 250) == first && ((s * 801 + k * 16 + 1) % 250) == ra[i * 17 + 1] &&
                    ((s * 801 + k * 16 + 16) % 250) == ra[i * 17 + 16])
                    { sh = s; w = k; }
        if (sh >= 0) seen[sh][w]++;
    }
    int once = 1;
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 50; k++) once &= seen[s][k] == 1;
    check(once, "an epoch visits every window once", "");
    loader_free(&a); loader_free(&b); loader_free(&c);

    // tensor file round trip, written atomically
    snprintf(p, sizeof(p), "%s/t.bin", TMP);
    float data[6] = {1, 2, 3, 4, 5, 6};
    int shape[2] = {2, 3};
    uint64_t u = 0xFFFFFFFFFFFFull;
    TensorWriter w;
    tw_open(&w, p, TF_KIND_DUMP, 2);
    tw_add(&w, "x", TF_F32, 2, shape, data);
    tw_add1(&w, "u", TF_U64, 1, &u);
    tw_close(&w);
    TensorFile tf;
    tf_load(&tf, p, TF_KIND_DUMP);
    const float *x = (const float *)tf_get(&tf, "x", TF_F32, 6);
    check(memcmp(x, data, sizeof(data)) == 0 && *(const uint64_t *)tf_get(&tf, "u", TF_U64, 1) == u,
          "tensor file round trip", "");
    tf_free(&tf);
    snprintf(q, sizeof(q), "%s/t.bin.tmp", TMP);
    FILE *f = fopen(q, "rb");
    check(!f, "tensor file leaves no temporary file", "");
    if (f) fclose(f);

    // the checksum is zlib's CRC-32: "123456789" -> 0xCBF43926, the check value in the
    // catalogue of parametrised CRC algorithms (CRC-32/ISO-HDLC)
    check(crc32_update(0, "123456789", 9) == 0xCBF43926u && crc32_update(crc32_update(0, "1234", 4), "56789", 5) == 0xCBF43926u,
          "CRC-32 check value, in one call and in two", "%08x", crc32_update(0, "123456789", 9));
    // tensor data is 64-byte aligned whatever the name lengths, in version 2 and version 1 files
    const char *names[3] = {"a", "abcde", "x.y.zz"};
    float vals[3][5];
    tw_open(&w, p, TF_KIND_DUMP, 3);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 5; j++) vals[i][j] = (float)(10 * i + j);
        tw_add1(&w, names[i], TF_F32, 5, vals[i]);
    }
    tw_close(&w);
    snprintf(q, sizeof(q), "%s/t_v1.bin", TMP);
    write_v1_copy(p, q);
    for (int v = 0; v < 2; v++) {
        tf_load(&tf, v ? q : p, TF_KIND_DUMP);
        ok = 1;
        for (int i = 0; i < 3; i++) {
            const float *d = (const float *)tf_get(&tf, names[i], TF_F32, 5);
            ok &= (uintptr_t)d % 64 == 0 && memcmp(d, vals[i], sizeof(vals[i])) == 0;
        }
        check(ok, v ? "version-1 tensor file still reads, data aligned" : "tensor data is 64-byte aligned", "");
        tf_free(&tf);
    }
    // JSON cannot hold NaN or Inf: they are written as null
    f = tmpfile();
    json_number(f, "%.3f", NAN);
    fputc(' ', f);
    json_number(f, "%.3f", -INFINITY);
    fputc(' ', f);
    json_number(f, "%.3f", 1.5);
    rewind(f);
    char jb[64] = "";
    size_t jn = fread(jb, 1, sizeof(jb) - 1, f);
    jb[jn] = 0;
    fclose(f);
    check(strcmp(jb, "null null 1.500") == 0, "JSON numbers: null for NaN and Inf", "'%s'", jb);
}

// ----------------------------------------------------------------------------
// 5b. the CPU kernels (llmc/gemm.h, llmc/vecmath.h) against their definitions

static float *test_matrix(size_t n, unsigned seed) {  // uniform in [-0.5, 0.5)
    float *m = (float *)xmalloc(n * sizeof(float));
    Rng r = rng_make(seed, 0);
    for (size_t i = 0; i < n; i++) m[i] = rng_f32(&r) - 0.5f;
    return m;
}

// The attention-score hook (llmc/attn_bias.h) with a learned bias (eRPE's table, through its
// function), relative-key scores and slopes together: the training path's gradients of the
// table (through the diagonal sums and the function's backward) and of q against central
// differences in double, and the rows path (evaluation, KV cache) equal to the training
// path's forward. fn, when given, refills ab's term from its table first.
static double attn_bias_loss(const float *q, const float *k, const float *v, const float *w, const AttnBias *ab, int B,
                             int T, int NH, int NKV, int hd, const BiasFn *fn) {
    if (fn) bias_fn_fill((float *)ab->term, fn, 1, T, 0);
    float *y = (float *)xmalloc((size_t)B * T * NH * hd * 4), *att = (float *)xmalloc((size_t)B * NH * T * T * 4);
    attention_forward_train(y, att, q, k, v, B, T, NH, NKV, hd, ab);
    double s = 0;
    for (size_t i = 0; i < (size_t)B * T * NH * hd; i++) s += (double)y[i] * w[i];
    free(y);
    free(att);
    return s;
}

// The worst relative error of grad against central differences of attn_bias_loss over
// x[0], x[step], ... below n (x is one of the loss's inputs, moved in place and restored).
static double attn_bias_fd(float *x, size_t n, size_t step, const float *grad, const float *q, const float *k,
                           const float *v, const float *w, const AttnBias *ab, int B, int T, int NH, int NKV, int hd,
                           const BiasFn *fn) {
    double worst = 0;
    for (size_t i = 0; i < n; i += step) {
        float orig = x[i], h = 1e-2f;
        x[i] = orig + h;
        double lp = attn_bias_loss(q, k, v, w, ab, B, T, NH, NKV, hd, fn);
        x[i] = orig - h;
        double lm = attn_bias_loss(q, k, v, w, ab, B, T, NH, NKV, hd, fn);
        x[i] = orig;
        if (fn) bias_fn_fill((float *)ab->term, fn, 1, T, 0);  // the term of the weights as they were
        double fd = (lp - lm) / (2.0 * h), e = fabs(fd - grad[i]) / (fabs(fd) + 1e-3);
        if (e > worst) worst = e;
    }
    return worst;
}

static void test_attn_bias(void) {
    enum { B = 2, T = 11, NH = 4, NKV = 2, hd = 8, NB = 5 };
    size_t nq = (size_t)B * T * NH * hd, nk = (size_t)B * T * NKV * hd;
    float *q = test_matrix(nq, 31), *k = test_matrix(nk, 32), *v = test_matrix(nk, 33), *w = test_matrix(nq, 34);
    float *table = test_matrix(NH * NB, 35), dtable[NH * NB] = {0}, term[NH * T];
    for (int i = 0; i < NH * NB; i++) table[i] *= 4.0f;  // a bias that moves the softmax
    PosStep ps;
    memset(&ps, 0, sizeof(ps));
    ps.alpha[0] = 1.5f;
    pos_set_pe(&ps, PE_ALIBI, NH);
    BiasPass bp = attn_bias_pass(&ps, 1, NH, T);
    // eRPE's function, --rel_clip 4 at alpha 1.5: buckets 0 1 3 4 4 ..., several distances in the last
    BiasFn f;
    memset(&f, 0, sizeof(f));
    f.pe = PE_ERPE, f.NH = NH, f.NB = NB, f.rs.clip = NB - 1, f.alpha = 1.5f, f.P = f.n_w[BP_ATTN_BIAS] = NH * NB;
    f.w[BP_ATTN_BIAS] = table;
    f.dw[BP_ATTN_BIAS] = dtable;
    bias_fn_fill(term, &f, 1, T, 0);
    size_t nr = (size_t)B * T * NH * NB;
    float *qrel = test_matrix(nr, 36);  // a query's scores against relative keys, set by hand
    for (size_t i = 0; i < nr; i++) qrel[i] *= 3.0f;
    int bucket[T];
    for (int d = 0; d < T; d++) bucket[d] = d < 3 ? d : d < 6 ? 3 : 4;  // the keys': clipped, several distances per bucket
    AttnBias ab = attn_bias_layer(&bp, 0, NH, term, NULL, NULL, T, hd);
    ab.qrel = qrel;  // the relative-key scores and their buckets set by hand
    ab.bucket = bucket;
    ab.NB = NB;
    float *y = (float *)xmalloc(nq * 4), *att = (float *)xmalloc((size_t)B * NH * T * T * 4);
    float *dq = (float *)xmalloc(nq * 4), *dk = (float *)xmalloc(nk * 4), *dv = (float *)xmalloc(nk * 4);
    float *diag = (float *)xmalloc((size_t)B * NH * T * 4), *rowg = (float *)xmalloc(nr * 4);
    attention_forward_train(y, att, q, k, v, B, T, NH, NKV, hd, &ab);
    attention_backward(dq, dk, dv, diag, rowg, NULL, &ab, w, att, q, k, v, B, T, NH, NKV, hd);
    bias_fn_backward(&f, diag, B, 1, T);
    double worst = attn_bias_fd(table, NH * NB, 1, dtable, q, k, v, w, &ab, B, T, NH, NKV, hd, &f);
    double worst_q = attn_bias_fd(q, nq, 7, dq, q, k, v, w, &ab, B, T, NH, NKV, hd, NULL);
    double worst_r = attn_bias_fd(qrel, nr, 3, rowg, q, k, v, w, &ab, B, T, NH, NKV, hd, NULL);
    check(worst < 2e-2, "attention-score hook: a learned table's gradient (diagonal sums, then its function's backward) "
          "against central differences", "worst rel err %.2e over %d entries", worst, NH * NB);
    check(worst_q < 2e-2, "attention-score hook: dq with a table, relative keys and slopes against central differences",
          "worst rel err %.2e", worst_q);
    check(worst_r < 2e-2, "attention-score hook: the relative-key scores' gradient (row and bucket sums) against central "
          "differences", "worst rel err %.2e over %zu entries", worst_r, (nr + 2) / 3);
    // the rows path: all at once, then the last 4 queries continuing a cache of the first 7
    float *yr = (float *)xmalloc(nq * 4);
    attention_forward_rows(yr, q, k, v, B, T, T, 0, NH, NKV, hd, 0, NULL, 1, &ab);
    double e_rows = max_abs_diff(yr, y, nq), e_kv = 0;
    for (int b = 0; b < B; b++) {  // B = 1 passes, as a KV cache has
        float *y1 = (float *)xmalloc((size_t)4 * NH * hd * 4);
        AttnBias ab1 = ab;  // the 4 queries' own relative-key scores
        ab1.qrel = qrel + ((size_t)b * T + 7) * NH * NB;
        ab1.Tq = 4;
        attention_forward_rows(y1, q + ((size_t)b * T + 7) * NH * hd, k + (size_t)b * T * NKV * hd,
                               v + (size_t)b * T * NKV * hd, 1, 4, T, 7, NH, NKV, hd, 0, NULL, 1, &ab1);
        double e = max_abs_diff(y1, y + ((size_t)b * T + 7) * NH * hd, (size_t)4 * NH * hd);
        if (isnan(e) || e > e_kv) e_kv = e;  // a NaN stays
        free(y1);
    }
    check(e_rows < 1e-6 && e_kv < 1e-6, "attention-score hook: the evaluation's rows path, whole and continuing a cache, "
          "equals the training path", "max abs diff %.2e, %.2e", e_rows, e_kv);
    // relative keys given as vectors: training scores every query first (rel_key_scores),
    // the rows path forms each query's own scores from the keys, continuing a cache too
    float *rk = test_matrix((size_t)NB * hd, 37);
    for (int i = 0; i < NB * hd; i++) rk[i] *= 20.0f;  // scores of order 1
    rel_key_scores(qrel, q, rk, (size_t)B * T * NH, hd, NB);
    attention_forward_train(y, att, q, k, v, B, T, NH, NKV, hd, &ab);
    AttnBias abk = ab;
    abk.qrel = NULL;
    abk.rkeys = rk;
    attention_forward_rows(yr, q, k, v, B, T, T, 0, NH, NKV, hd, 0, NULL, 1, &abk);
    double e_keys = max_abs_diff(yr, y, nq);
    float *y1 = (float *)xmalloc((size_t)4 * NH * hd * 4);
    abk.Tq = 4;
    attention_forward_rows(y1, q + (size_t)7 * NH * hd, k, v, 1, 4, T, 7, NH, NKV, hd, 0, NULL, 1, &abk);
    double e_keys_kv = max_abs_diff(y1, y + (size_t)7 * NH * hd, (size_t)4 * NH * hd);
    abk.rkeys = NULL;  // the same without the keys: they must have moved the output
    attention_forward_rows(y1, q + (size_t)7 * NH * hd, k, v, 1, 4, T, 7, NH, NKV, hd, 0, NULL, 1, &abk);
    double moved = max_abs_diff(y1, y + (size_t)7 * NH * hd, (size_t)4 * NH * hd);
    check(e_keys < 1e-6 && e_keys_kv < 1e-6 && moved > 1e-2, "attention-score hook: the rows path's relative-key scores "
          "formed per query from the keys (T-PE's evaluation) equal training's, whole and continuing a cache",
          "max abs diff %.2e, %.2e (the keys move the output by %.2e)", e_keys, e_keys_kv, moved);
    free(rk);
    free(y1);
    free(q); free(k); free(v); free(w); free(table); free(y); free(att); free(dq); free(dk); free(dv); free(diag);
    free(yr); free(qrel); free(rowg);
}

typedef void (*GemmFn)(float *, const float *, const float *, int, int, int, int, int, int);

// How many of fn's products on shapes (N,K,M) differ from the definition in any bit, over
// every transposition, accumulating or not (*cases gets the count of products)
static int gemm_mismatches(GemmFn fn, const int (*shapes)[3], int n_shapes, unsigned seed, int *cases) {
    int bad = 0;
    *cases = 0;
    for (int si = 0; si < n_shapes; si++)
        for (int v = 0; v < 8; v++) {
            int N = shapes[si][0], K = shapes[si][1], M = shapes[si][2], acc = v & 1, at = (v >> 1) & 1, bt = (v >> 2) & 1;
            float *A = test_matrix((size_t)N * K, seed + v), *Bm = test_matrix((size_t)K * M, seed + 1 + v);
            float *got = test_matrix((size_t)N * M, seed + 2), *want = test_matrix((size_t)N * M, seed + 2);
            fn(got, A, Bm, N, K, M, acc, at, bt);
            gemm_reference(want, A, Bm, N, K, M, acc, at, bt);
            bad += memcmp(got, want, (size_t)N * M * sizeof(float)) != 0;
            (*cases)++;
            free(A); free(Bm); free(got); free(want);
        }
    return bad;
}

static void test_kernels(void) {
    // the packed GEMM equals the one-fmaf-chain definition bit for bit, on odd shapes, in
    // every transposition, with and without accumulation, across KC (384) and NC (512) blocks;
    // 48 rows are whole panels of every ISA's MR (12, 6, 8): A is then read in place only; 37 rows
    // at 790 leave a partial panel packed per thread, over k blocks of 264, 264 and 262
    int shapes[][3] = {{1, 1, 1}, {3, 17, 5}, {17, 3, 129}, {127, 129, 17}, {129, 127, 1}, {13, 600, 33}, {5, 300, 3100}, {37, 790, 1061},
                       {48, 800, 70}, {37, 790, 61}};
    int cases, bad = gemm_mismatches(gemm, shapes, (int)(sizeof(shapes) / sizeof(shapes[0])), 1, &cases);
    check(bad == 0, "GEMM equals its definition bit for bit on odd shapes, every transposition, accumulating or not",
          "%d cases, %d differ", cases, bad);
    // the tall product (gemm() takes it for a weight gradient of GEMM_TALL_BYTES or more: the LM
    // head's dwte), called directly on odd shapes across k blocks, partial panels and chunks
    int tall[][3] = {{1, 390, 1}, {5, 400, 3}, {37, 790, 61}, {100, 1000, 33}, {48, 800, 70}, {211, 777, 512}};
    bad = gemm_mismatches(gemm_tall, tall, (int)(sizeof(tall) / sizeof(tall[0])), 31, &cases);
    check(bad == 0, "the tall GEMM (dwte's) equals its definition bit for bit on odd shapes, every transposition",
          "%d cases, %d differ", cases, bad);
    // the trainer's large buffers (big_calloc): zeroed, and at a huge page's boundary (madvise's unit)
    size_t big_n = HUGE_PAGE / sizeof(float) + 5, big_nonzero = 0;
    float *big = (float *)big_calloc(big_n, sizeof(float));
    for (size_t i = 0; i < big_n; i++) big_nonzero += big[i] != 0.0f;
    check(big_nonzero == 0 && (uintptr_t)big % HUGE_PAGE == 0, "a large buffer is zeroed and huge-page aligned",
          "%zu nonzero, address %p", big_nonzero, (void *)big);
    free(big);
    // the serial product (attention's), in place with row strides, equals the definition bit
    // for bit in each of its shapes (triangular inputs zero where the shape says), edge tiles included
    int serial_cases = 0, serial_bad = 0;
    for (int v = 0; v < 16; v++) {
        int shape = v & 3, acc = (v >> 2) & 1, at = (v >> 3) & 1;
        if ((shape == GEMM_LOWER_A && at) || (shape == GEMM_UPPER_A && !at)) continue;  // as attention uses them
        int N = 29, M = shape == GEMM_CAUSAL_OUT ? 29 : 45, K = shape == GEMM_LOWER_A || shape == GEMM_UPPER_A ? 29 : 300;
        int lda = (at ? N : K) + 3, ldb = M + 5, ldc = M + 2;
        float *A = test_matrix((size_t)(at ? K : N) * lda, 11 + v), *Bm = test_matrix((size_t)K * ldb, 12 + v);
        float *out = test_matrix((size_t)N * ldc, 13), *a = xmalloc((size_t)N * K * 4), *b = xmalloc((size_t)K * M * 4);
        float *want = xmalloc((size_t)N * M * 4);
        for (int r = 0; r < N; r++)
            for (int k = 0; k < K; k++) {
                float *e = at ? &A[(size_t)k * lda + r] : &A[(size_t)r * lda + k];
                if ((shape == GEMM_LOWER_A && k > r) || (shape == GEMM_UPPER_A && k < r)) *e = 0.0f;
                a[(size_t)r * K + k] = *e;
            }
        for (int k = 0; k < K; k++) memcpy(b + (size_t)k * M, Bm + (size_t)k * ldb, M * 4);
        for (int r = 0; r < N; r++) memcpy(want + (size_t)r * M, out + (size_t)r * ldc, M * 4);
        gemm_reference(want, a, b, N, K, M, acc, 0, 0);
        Gemm g = {out, A, Bm, ldc, lda, ldb, K, acc, shape, at};
        gemm_serial(&g, N, M);
        for (int r = 0; r < N; r++)
            for (int c = 0; c < M; c++)
                if (!(shape == GEMM_CAUSAL_OUT && c > r) && memcmp(&out[(size_t)r * ldc + c], &want[(size_t)r * M + c], 4)) serial_bad++;
        serial_cases++;
        free(A); free(Bm); free(out); free(a); free(b); free(want);
    }
    check(serial_bad == 0, "serial GEMM (attention's shapes, strided, in place) equals its definition bit for bit",
          "%d cases, %d elements differ", serial_cases, serial_bad);
    // exp against double-precision exp: within 1 ulp on [-87.3, 88.7], vector = scalar path
    size_t n = 1000000;
    float *x = test_matrix(n, 7), *y = (float *)xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = -104.0f + 193.0f * (x[i] + 0.5f);
    exp_array(y, x, 1.0f, 0.0f, n);
    double worst = 0;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++) {
        differ += y[i] != exp_scalar(x[i]);
        if (x[i] < -87.3f || x[i] > 88.7f) continue;
        double want = exp((double)x[i]), ulp = nextafterf((float)want, INFINITY) - (float)want;
        double e = fabs(y[i] - want) / ulp;
        worst = e > worst ? e : worst;
    }
    check(worst <= 1.0 && differ == 0, "vectorized exp within 1 ulp of exp on [-87.3, 88.7], the same as its scalar form",
          "worst %.3f ulp, %zu differ", worst, differ);
    // the vector builds' masked tails: every length 1..40 (a start at 3: unaligned), nothing written past n
    size_t tail_bad = 0;
    for (size_t len = 1; len <= 40; len++) {
        float buf[48];
        for (int i = 0; i < 48; i++) buf[i] = -7.0f;
        exp_array(buf + 3, x + len, 0.5f, -1.0f, len);
        for (size_t i = 0; i < 48; i++) {
            int inside = i >= 3 && i < 3 + len;
            tail_bad += inside ? buf[i] != exp_scalar(fmaf(0.5f, x[len + i - 3], -1.0f)) : buf[i] != -7.0f;
        }
    }
    check(tail_bad == 0, "exp_array at every length 1..40 equals the scalar form and writes nothing past its end", "%zu differ", tail_bad);
    float special[6] = {-INFINITY, -1000.0f, -104.0f, 88.73f, INFINITY, 0.0f}, got[6];
    exp_array(got, special, 1.0f, 0.0f, 6);
    check(got[0] == 0 && got[1] == 0 && got[2] == 0 && isinf(got[3]) && isinf(got[4]) && got[5] == 1.0f && isnan(exp_scalar(NAN)),
          "exp at the range ends: 0, inf, exp(0) = 1, NaN", "");
    // the softmax's fused exp-and-sum (exp_sum_array) equals exp_array then sum_array bit for bit,
    // at every length 1..70 from an unaligned start, writing nothing past its end; max_array equals
    // the plain loop at those lengths (all-negative rows too, where a masked lane's 0 must not
    // win); the attention's causal softmax (16 rows at a time) equals its rows done one by one
    // with exp_array and sum_array, rows past a multiple of 16 included
    size_t fused_bad = 0;
    float *xs = test_matrix(160, 41);
    for (int i = 0; i < 160; i++) xs[i] *= 20.0f;  // [-10, 10]: every term counts in the sum
    for (size_t len = 1; len <= 70; len++) {
        float buf[80], want[80];
        for (int i = 0; i < 80; i++) buf[i] = want[i] = -7.0f;
        float mx = xs[len];
        for (size_t i = 0; i < len; i++) mx = xs[len + i] > mx ? xs[len + i] : mx;
        fused_bad += max_array(xs + len, len) != mx;
        float neg[80], mneg = -1.0f - fabsf(xs[len]);  // all negative: masked lanes' zeros must not win
        for (size_t i = 0; i < len; i++) neg[i] = -1.0f - fabsf(xs[len + i]), mneg = neg[i] > mneg ? neg[i] : mneg;
        fused_bad += max_array(neg, len) != mneg;
        double got_sum = exp_sum_array(buf + 3, xs + len, -mx, len);
        exp_array(want + 3, xs + len, 1.0f, -mx, len);
        fused_bad += memcmp(&got_sum, &(double){sum_array(want + 3, len)}, sizeof(double)) != 0 || memcmp(buf, want, sizeof(buf)) != 0;
    }
    for (int T = 1; T <= 40; T += 13) {  // 1, 14, 27, 40
        float *S = test_matrix((size_t)T * T, 30 + T), *R = xmalloc((size_t)T * T * 4);
        for (int i = 0; i < T * T; i++) S[i] *= 40.0f;  // logits spread over [-20, 20]
        memcpy(R, S, (size_t)T * T * 4);
        causal_softmax(S, T);
        for (int t = 0; t < T; t++) {
            float *a = R + (size_t)t * T;
            exp_array(a, a, 1.0f, -max_array(a, t + 1), t + 1);
            float inv = (float)(1.0 / sum_array(a, t + 1));
            for (int s = 0; s <= t; s++) a[s] *= inv;
            for (int s = t + 1; s < T; s++) a[s] = 0.0f;
        }
        fused_bad += memcmp(S, R, (size_t)T * T * 4) != 0;
        free(S); free(R);
    }
    free(xs);
    check(fused_bad == 0, "the softmax's fused exp-and-sum, max and 16-row causal softmax equal their definitions bit for bit",
          "%zu cases differ", fused_bad);
    // sum and max against the plain loops
    double plain = 0;
    float m = x[0];
    for (size_t i = 0; i < 100003; i++) { plain += x[i]; m = x[i] > m ? x[i] : m; }
    check(fabs(sum_array(x, 100003) - plain) <= 1e-9 * fabs(plain) + 1e-6 && max_array(x, 100003) == m,
          "sum_array and max_array agree with the plain loops", "%.9g vs %.9g", sum_array(x, 100003), plain);
    // AdamW's vector form equals the update written one element at a time, bit for bit, at an odd length
    size_t na = 1003;
    float *p1 = test_matrix(na, 21), *m1 = test_matrix(na, 22), *v1 = test_matrix(na, 23), *gr = test_matrix(na, 24);
    for (size_t i = 0; i < na; i++) v1[i] = fabsf(v1[i]) * 1e-3f;
    float *p2 = xmalloc(na * 4), *m2 = xmalloc(na * 4), *v2 = xmalloc(na * 4);
    memcpy(p2, p1, na * 4); memcpy(m2, m1, na * 4); memcpy(v2, v1, na * 4);
    AdamWArgs aw = {0.7f, 0.9f, 0.95f, 1.0f - 0.9f, 1.0f - 0.95f, 1.0f - powf(0.9f, 3.0f), 1.0f - powf(0.95f, 3.0f), 1e-3f, 1e-8f, 0.1f};
    adamw_array(p1, gr, m1, v1, na, aw);
    for (size_t i = 0; i < na; i++) {
        float g = gr[i] * aw.clip;
        m2[i] = aw.b1 * m2[i] + (1.0f - aw.b1) * g;
        v2[i] = aw.b2 * v2[i] + (1.0f - aw.b2) * g * g;
        p2[i] -= aw.lr * (m2[i] / aw.bc1 / (sqrtf(v2[i] / aw.bc2) + aw.eps) + aw.wd * p2[i]);
    }
    check(!memcmp(p1, p2, na * 4) && !memcmp(m1, m2, na * 4) && !memcmp(v1, v2, na * 4),
          "AdamW's vector form equals its one-element-at-a-time definition bit for bit", "");
    free(p1); free(m1); free(v1); free(gr); free(p2); free(m2); free(v2);
    free(x);
    free(y);
}

// ----------------------------------------------------------------------------
// 6. the trainer binary: resume exactness, bad inputs

// Runs a shell command, returns its exit status; its output goes to `out` (size n).
static int run_cmd(const char *cmd, char *out, size_t n) {
    char full[2048];
    snprintf(full, sizeof(full), "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t got = 0;
    if (out && n) out[0] = 0;
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof(buf), p)) > 0) {
        if (out && got + 1 < n) {
            size_t c = k < n - 1 - got ? k : n - 1 - got;
            memcpy(out + got, buf, c);
            got += c;
            out[got] = 0;
        }
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

// the losses column of a log.jsonl, as text
static void read_losses(const char *path, char *out, size_t n) {
    FILE *f = fopen(path, "r");
    out[0] = 0;
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        char *l = strstr(line, "\"loss\": ");
        if (!l) continue;
        char *e = strchr(l, ',');
        if (e) *e = 0;
        strncat(out, l + 8, n - strlen(out) - 2);
        strncat(out, " ", n - strlen(out) - 1);
    }
    fclose(f);
}

// the CPU trainer under test (TRAINER in the environment: a sanitizer build) and a small run of it
static const char *TRAINER = "./train_gpt_cpu";
static const char *SMALL_FLAGS = "--n_embd 32 --n_layer 2 --n_head 4 --n_kv_head 2 --ffn_hidden 64 --seq_len 32 "
                                 "--batch_size 2 --total_batch 4 --steps 6 --warmup 2 --val_every 3 --eval_len 0 "
                                 "--pos posaug --indist_start 8";
static int THREADS;      // the trainer's threads (THREADS in the environment)
static char SMALL[512];  // TRAINER SMALL_FLAGS --threads THREADS
// HOST_ONLY=1: TRAINER is train_gpt.cu's build, so the checks of what only the CPU trainer
// does (generation, OpenMP threads, host memory of activations) are skipped
static int CUDA_TRAINER;
static int cpu_trainer_only(const char *label) {
    if (CUDA_TRAINER) skip(label, "the CPU trainer's (generation, threads and host activations are not train_gpt.cu's)");
    return CUDA_TRAINER;
}

// `flags` run in one go (<TMP>/<prefix>full) and in two (<prefix>part: --stop_after 3,
// then --resume with `resume_flags`) give the same losses and final checkpoint, to the
// bit. Returns 0 when a run failed (reported).
static int check_resume(const char *flags, const char *resume_flags, const char *prefix, const char *what) {
    char cmd[2048], out[8192], la[2048], lb[2048], a[512], b[512], label[400];
    snprintf(cmd, sizeof(cmd), "%s --out_dir %s/%sfull", flags, TMP, prefix);
    int r1 = run_cmd(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s --out_dir %s/%spart --stop_after 3", flags, TMP, prefix);
    int r2 = run_cmd(cmd, out, sizeof(out));
    if (resume_flags)
        snprintf(cmd, sizeof(cmd), "%s %s --out_dir %s/%spart --resume %s/%spart/checkpoint.bin", flags, resume_flags, TMP,
                 prefix, TMP, prefix);
    else  // no flag but --resume: the checkpoint's own flags continue the run
        snprintf(cmd, sizeof(cmd), "%s --resume %s/%spart/checkpoint.bin", TRAINER, TMP, prefix);
    int r3 = run_cmd(cmd, out, sizeof(out));
    if (r1 || r2 || r3) {
        snprintf(label, sizeof(label), "%sresume runs", what);
        check(0, label, "exit codes %d %d %d: %s", r1, r2, r3, out);
        return 0;
    }
    snprintf(a, sizeof(a), "%s/%sfull/log.jsonl", TMP, prefix);
    snprintf(b, sizeof(b), "%s/%spart/log.jsonl", TMP, prefix);
    read_losses(a, la, sizeof(la));
    read_losses(b, lb, sizeof(lb));
    snprintf(label, sizeof(label), "%sresume%s gives bit-identical losses", what,
             !resume_flags ? " with no flag but --resume" : resume_flags[0] ? " (other threads)" : "");
    check(strcmp(la, lb) == 0 && strlen(la) > 20, label, "[%s] vs [%s]", la, lb);
    snprintf(a, sizeof(a), "%s/%sfull/checkpoint.bin", TMP, prefix);
    snprintf(b, sizeof(b), "%s/%spart/checkpoint.bin", TMP, prefix);
    snprintf(label, sizeof(label), "%sresume gives a byte-identical final checkpoint", what);
    check(files_equal(a, b), label, "");
    return 1;
}

// --resume alone continues the same experiment: every scheme and encoding, its parameters
// off their defaults, resumed with no flag, ends bit-identical to the uninterrupted run.
static void test_resume_keeps_flags(void) {
    const char *schemes[] = {
        "--pos discrete --alpha_set 2,3", "--pos cycle --alpha_set 1,4", "--pos fixed --alpha 3",
        "--pos posaug --alpha_range 0.5,4 --pos_layers bottom", "--pos posaug-log --pos_layers independent",
        "--pos curriculum-step --curriculum_frac 0.25", "--pos curriculum-linear --curriculum_dist log",
        "--pos random-base", "--pos rpe --rpe_max 200 --rpe_layers independent", "--pos rfs --rfs_scale 500",
        "--pe alibi --pos posaug", "--pe sinusoidal --pos posaug", "--pe learned --pos rope", "--pe nope --pos rope",
        "--qk_norm --pos posaug", "--pos rope --drope_step 4", "--pe erpe --pos posaug --rel_clip 20",
        "--pe t5 --pos posaug --t5_buckets 16 --t5_max_distance 64",
        "--pe tape --pos posaug", "--pe shaw --pos posaug --rel_clip 8", "--pe tpe --pos posaug", "--pe tupe --pos rope", "--pos pose --pose_target 300",
        "--pe learned --pos rope --wpe_rows 100", "--pe kerple --pos posaug", "--pe fire --pos posaug",
        "--pe xpos --pos posaug", "--pe kerple-power --pos posaug"};
    char flags[1024], prefix[32], what[160];
    for (size_t k = 0; k < sizeof(schemes) / sizeof(schemes[0]); k++) {
        if (!wants_flags(schemes[k]) && !wants("resume")) continue;
        snprintf(flags, sizeof(flags), "%s --lr 2e-3 --min_lr 1e-4 --warmup 3 %s", SMALL, schemes[k]);
        snprintf(prefix, sizeof(prefix), "keep%zu_", k);
        snprintf(what, sizeof(what), "%s: ", schemes[k]);
        check_resume(flags, NULL, prefix, what);
    }
    // a flag given again with another value is a change, printed; the scheme's needs its own folder
    if (!wants("resume discrete")) return;
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof(cmd), "%s --resume %s/keep0_part/checkpoint.bin --steps 8", TRAINER, TMP);
    int rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && strstr(out, "--resume with changes: --steps 8 (checkpoint: 6)") && strstr(out, "--pos discrete"),
          "--resume prints a changed flag and keeps the others", "exit %d", rc);
    snprintf(cmd, sizeof(cmd), "%s --resume %s/keep0_part/checkpoint.bin --pos posaug", TRAINER, TMP);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "--pos posaug (checkpoint: discrete)") && strstr(out, "its own --out_dir"),
          "--resume with another scheme in the checkpoint's own folder is refused", "exit %d", rc);
    snprintf(cmd, sizeof(cmd), "%s --resume %s/keep0_part/checkpoint.bin --pos posaug --steps 10 --out_dir %s/keep0_posaug", TRAINER,
             TMP, TMP);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && strstr(out, "--pe rope --pos posaug"), "--resume with another scheme into a new folder: a PosAug fine-tune",
          "exit %d", rc);
}

static void test_resume(void) {
    char cmd[2048], out[8192], a[512];
    if (!check_resume(SMALL, "", "", "")) return;
    // the kept flags hold every byte a command line can: a UTF-8 path with a space, a quote
    // and a control character, resumed and evaluated with no flag but --resume
    const char *odd = "test_tmp/donn\xc3\xa9" "es \"\x01\"";
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && cp data/builtin/train.bin data/builtin/val.bin '%s'", odd, odd);
    if (run_cmd(cmd, NULL, 0) == 0) {
        char flags[1024];
        snprintf(flags, sizeof(flags), "%s --train_data '%s/train.bin' --val_data '%s/val.bin'", SMALL, odd, odd);
        check_resume(flags, NULL, "utf8_", "a UTF-8 data path: ");
        snprintf(cmd, sizeof(cmd), "%s --resume %s/utf8_full/checkpoint.bin --eval_only --eval_len 64 --eval_n 1 --indist_start 8",
                 TRAINER, TMP);
        int rc = run_cmd(cmd, out, sizeof(out));
        check(rc == 0 && strstr(out, "cliff"), "--eval_only of a checkpoint whose flags hold a UTF-8 path", "exit %d: %.300s", rc, out);
    } else check(0, "a folder with a UTF-8 name", "cannot make '%s'", odd);
    snprintf(a, sizeof(a), "%s/full/checkpoint.bin", TMP);
    // generation from the checkpoint
    if (cpu_trainer_only("generation from a checkpoint")) return;
    snprintf(cmd, sizeof(cmd), "%s --resume %s --steps 0 --generate 20 --prompt 'The '", SMALL, a);
    int rg = run_cmd(cmd, out, sizeof(out));
    check(rg == 0 && strstr(out, "The ") != NULL, "generation from a checkpoint", "exit %d", rg);
}

// A checkpoint's own model and scheme are adopted for evaluation (QK-norm, a learned
// table: no flags needed), and --init_from starts a run from a checkpoint's weights.
static void test_checkpoint_models(void) {
    char cmd[2048], out[8192], a[512], b[512];
    const char *ev = "--eval_len 96 --eval_n 2 --gain_window 16";
    snprintf(cmd, sizeof(cmd), "%s --steps 3 %s --pe learned --pos rpe --qk_norm --out_dir %s/lq", SMALL, ev, TMP);
    int r1 = run_cmd(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s %s --eval_only --resume %s/lq/checkpoint.bin --eval_tag again", SMALL, ev, TMP);
    int r2 = run_cmd(cmd, out, sizeof(out));
    snprintf(a, sizeof(a), "%s/lq/eval_L96.csv", TMP);
    snprintf(b, sizeof(b), "%s/lq/again.csv", TMP);
    check(r1 == 0 && r2 == 0 && files_equal(a, b), "--eval_only adopts the checkpoint's QK-norm and learned table",
          "exit %d %d", r1, r2);
    snprintf(a, sizeof(a), "%s/lq/eval_L96.json", TMP);
    if (r1 == 0) {  // the JSON's ratio is OOD over in-dist (its three numbers are printed with 6 decimals)
        double ratio = read_json_number(a, "ratio"), want = read_json_number(a, "ood") / read_json_number(a, "in_dist");
        check(fabs(ratio - want) < 1e-5, "eval JSON: ratio = ood / in_dist", "%.6f vs %.6f", ratio, want);
    }
    snprintf(a, sizeof(a), "%s/lq/eval_L96.csv", TMP);
    // --init_from with --steps 0 evaluates exactly the checkpoint's weights
    snprintf(cmd, sizeof(cmd), "%s --steps 0 %s --pe learned --pos rpe --qk_norm --init_from %s/lq/checkpoint.bin --out_dir %s/lq0",
             SMALL, ev, TMP, TMP);
    int r3 = run_cmd(cmd, out, sizeof(out));
    snprintf(b, sizeof(b), "%s/lq0/eval_L96.csv", TMP);
    check(r3 == 0 && files_equal(a, b), "--init_from loads the checkpoint's weights", "exit %d", r3);
    // DroPE recalibration from a RoPE checkpoint: no encoding, QK-norm added, new optimizer
    snprintf(cmd, sizeof(cmd), "%s --steps 3 --out_dir %s/base", SMALL, TMP);
    int r4 = run_cmd(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s --steps 2 %s --pos rope --pe nope --qk_norm --beta2 0.999 --weight_decay 0 --init_from %s/base/checkpoint.bin "
             "--out_dir %s/drope", SMALL, ev, TMP, TMP);
    int r5 = run_cmd(cmd, out, sizeof(out));
    int ok = r4 == 0 && r5 == 0 && strstr(out, "QK-norm gains added at 1") && strstr(out, "step     1/2");
    if (ok) {
        TensorFile tf;
        snprintf(a, sizeof(a), "%s/drope/checkpoint.bin", TMP);
        tf_load(&tf, a, TF_KIND_CHECKPOINT);
        const uint64_t *st = (const uint64_t *)tf_get(&tf, "meta.state", TF_U64, 5);
        const int32_t *ci = (const int32_t *)tf_get(&tf, "meta.config_i", TF_I32, CKI_N);
        ok = st[0] == 2 && ci[CKI_PE] == PE_NOPE && ci[CKI_QK] == 1 && tf_find(&tf, "param.q_norm") && tf_find(&tf, "adam_v.k_norm");
        tf_free(&tf);
    }
    check(ok, "DroPE from a checkpoint: --init_from --pe nope --qk_norm trains from step 0", "exit %d %d", r4, r5);
}

// --pose_scaling through the trainer: a PoSE model trained with linear, ntk or yarn evaluates
// exactly as its weights do under --scaling pi, ntk or yarn with --scale_factor L_t / T (the
// evaluation-time scaling test_scaling and dev/test_hf.py check against Hugging Face), and not
// as they do without it; the checkpoint keeps the flag; an added --scaling is refused.
static void test_pose_scaling_runs(void) {
    char flags[512], cmd[2048], out[8192], a[512], b[512], c0[512];
    snprintf(flags, sizeof(flags), "--n_embd 32 --n_layer 2 --seq_len 32 --batch_size 2 --total_batch 4 --eval_len 128 "
             "--eval_n 2 --indist_start 8 --threads %d", THREADS > 1 ? THREADS : 2);
    for (int m = 1; m < POSE_SCALING_N; m++) {
        const char *name = POSE_SCALING_NAMES[m], *eval = SCALE_NAMES[POSE_SCALING_METHOD[m]];
        snprintf(cmd, sizeof(cmd), "%s --pos pose --pose_target 256 --pose_scaling %s --steps 3 --warmup 1 %s --out_dir %s/pose_%s",
                 TRAINER, name, flags, TMP, name);
        int r1 = run_cmd(cmd, out, sizeof(out));
        int shown = strstr(out, "x8, train and evaluation") != NULL;
        snprintf(cmd, sizeof(cmd), "%s --init_from %s/pose_%s/checkpoint.bin --steps 0 --scaling %s --scale_factor 8 %s "
                 "--out_dir %s/pose_%s_as_scaling", TRAINER, TMP, name, eval, flags, TMP, name);
        int r2 = run_cmd(cmd, out, sizeof(out));
        snprintf(cmd, sizeof(cmd), "%s --init_from %s/pose_%s/checkpoint.bin --steps 0 %s --out_dir %s/pose_%s_unscaled",
                 TRAINER, TMP, name, flags, TMP, name);
        int r3 = run_cmd(cmd, out, sizeof(out));
        snprintf(a, sizeof(a), "%s/pose_%s/eval_L128.csv", TMP, name);
        snprintf(b, sizeof(b), "%s/pose_%s_as_scaling/eval_L128_%s.csv", TMP, name, eval);
        snprintf(c0, sizeof(c0), "%s/pose_%s_unscaled/eval_L128.csv", TMP, name);
        snprintf(cmd, sizeof(cmd), "%s/pose_%s/eval_L128.json", TMP, name);
        char json[4096] = "", want[64];
        FILE *f = fopen(cmd, "r");
        if (f) {
            json[fread(json, 1, sizeof(json) - 1, f)] = 0;
            fclose(f);
        }
        snprintf(want, sizeof(want), "\"pose_scaling\": \"%s\"", name);
        char label[160];
        snprintf(label, sizeof(label), "--pose_scaling %s: its evaluation equals its weights under --scaling %s "
                 "--scale_factor 8, not unscaled; recorded in the JSON", name, eval);
        check(r1 == 0 && r2 == 0 && r3 == 0 && shown && files_equal(a, b) && !files_equal(a, c0) && strstr(json, want),
              label, "exit %d %d %d, header %d, equal %d, unscaled differs %d", r1, r2, r3, shown, files_equal(a, b),
              !files_equal(a, c0));
    }
    snprintf(cmd, sizeof(cmd), "%s --eval_only --resume %s/pose_yarn/checkpoint.bin --eval_len 128 --eval_n 2 "
             "--indist_start 8 --scaling pi --eval_tag refused", TRAINER, TMP);
    int r4 = run_cmd(cmd, out, sizeof(out));
    snprintf(a, sizeof(a), "%s/pose_yarn/refused.json", TMP);
    check(r4 != 0 && strstr(out, "--pose_scaling yarn") && strstr(out, "without --scaling") && access(a, F_OK) != 0,
          "--eval_only --scaling on a --pose_scaling checkpoint is refused, naming both flags", "exit %d: %.300s", r4, out);
    // a checkpoint from before meta.pose_scaling: its --pose_scaling yarn was YaRN's own blend, refused for
    // evaluation and --resume; its linear is today's and evaluates as before
    int refused = 0, r5 = -1;
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof(a), "%s/pose_yarn/checkpoint.bin", TMP);
        snprintf(b, sizeof(b), "%s/pose_yarn_old.bin", TMP);
        copy_without(a, b, "meta.pose_scaling");
        snprintf(cmd, sizeof(cmd), i ? "%s --resume %s --steps 4 %s --out_dir %s/pose_yarn_old_run"
                                     : "%s --eval_only --resume %s %s --eval_tag old --out_dir %s/pose_yarn_old_run",
                 TRAINER, b, flags, TMP);
        int r = run_cmd(cmd, out, sizeof(out));
        snprintf(c0, sizeof(c0), "%s/pose_yarn_old_run", TMP);
        refused += r == 1 && strstr(out, "as --scaling yarn (before --pose_scaling yarn became PoSE's revised YaRN)") &&
                   access(c0, F_OK) != 0;
    }
    snprintf(a, sizeof(a), "%s/pose_linear/checkpoint.bin", TMP);
    snprintf(b, sizeof(b), "%s/pose_linear_old.bin", TMP);
    copy_without(a, b, "meta.pose_scaling");
    snprintf(cmd, sizeof(cmd), "%s --eval_only --resume %s %s --eval_tag old --out_dir %s/pose_linear_old_run", TRAINER, b,
             flags, TMP);
    r5 = run_cmd(cmd, out, sizeof(out));
    snprintf(a, sizeof(a), "%s/pose_linear/eval_L128.csv", TMP);
    snprintf(c0, sizeof(c0), "%s/pose_linear_old_run/old.csv", TMP);
    check(refused == 2 && r5 == 0 && files_equal(a, c0),
          "a --pose_scaling yarn checkpoint made before PoSE's revised YaRN (no meta.pose_scaling) is refused, naming the "
          "change (--eval_only, --resume); an old linear one evaluates as before", "%d of 2 refused, linear exit %d", refused, r5);
}

// --arch gru through the trainer: bit-exact resume, the same losses on 1 and 2 threads, an
// evaluation that adopts the checkpoint's architecture, generation from its state.
static void test_gru_runs(void) {
    char flags[512], cmd[2048], out[8192], a[512], b[512];
    snprintf(flags, sizeof(flags), "%s --arch gru --n_embd 32 --n_layer 2 --seq_len 32 --batch_size 2 --total_batch 4 "
             "--steps 6 --warmup 2 --val_every 3 --eval_len 0 --indist_start 8 --threads %d", TRAINER, THREADS > 1 ? THREADS : 2);
    if (!check_resume(flags, "--threads 1", "gru_", "GRU: ")) return;
    snprintf(a, sizeof(a), "%s/gru_full/checkpoint.bin", TMP);
    // evaluation with no model flags: the checkpoint's architecture and shape
    snprintf(cmd, sizeof(cmd), "%s --eval_only --resume %s --eval_len 96 --eval_n 2 --indist_start 8", TRAINER, a);
    int r4 = run_cmd(cmd, out, sizeof(out));
    snprintf(b, sizeof(b), "%s/gru_full/eval_L96.json", TMP);
    FILE *f = fopen(b, "r");
    char json[4096] = "";
    if (f) {
        size_t n = fread(json, 1, sizeof(json) - 1, f);
        json[n] = 0;
        fclose(f);
    }
    check(r4 == 0 && strstr(json, "\"arch\": \"gru\"") && strstr(json, "\"gain\": null") && isfinite(read_json_number(b, "cliff")),
          "GRU: --eval_only adopts the checkpoint's architecture (no G(C): no attention)", "exit %d", r4);
    snprintf(cmd, sizeof(cmd), "%s --resume %s --steps 0 --generate 20 --prompt 'The '", TRAINER, a);
    int rg = run_cmd(cmd, out, sizeof(out));
    check(rg == 0 && strstr(out, "The ") != NULL, "GRU: generation from a checkpoint", "exit %d", rg);
}

// HellaSwag's scoring (lm-evaluation-harness's acc and acc_norm) on a file with known
// answers, its loader's checks, and a run of the trainer with --hellaswag.
static void test_hellaswag(void) {
    char path[256], csvp[256];
    snprintf(path, sizeof(path), "%s/hellaswag.bin", TMP);
    snprintf(csvp, sizeof(csvp), "%s/hellaswag.csv", TMP);
    write_hellaswag(path, 2, 256);
    Config c;
    config_defaults(&c);
    snprintf(c.hellaswag, sizeof(c.hellaswag), "%s", path);
    PosConfig pc = pos_config_of(&c);
    EvalScaling es = eval_scaling_of(&c);
    EvalModel m = {NULL, token_value_losses, NULL, NULL};
    FILE *f = xfopen(csvp, "w");
    HellaSwagResult r = run_hellaswag(&c, &m, &pc, &es, f);
    fclose(f);
    f = xfopen(csvp, "r");
    char line[512];
    double s[2][4] = {{0}};
    int lab[2], pred[2], pn[2], rows = 0;
    if (!fgets(line, sizeof(line), f)) line[0] = 0;  // header
    while (rows < 2 && fgets(line, sizeof(line), f)) {
        int i;
        if (sscanf(line, "%d,%d,%d,%d,%lf,%lf,%lf,%lf", &i, &lab[rows], &pred[rows], &pn[rows], &s[rows][0], &s[rows][1],
                   &s[rows][2], &s[rows][3]) == 8)
            rows++;
    }
    fclose(f);
    check(rows == 2 && s[0][0] == 8 && s[0][1] == 3 && s[0][2] == 18 && s[0][3] == 8 && s[1][0] == 4 && s[1][1] == 4 &&
              s[1][2] == 6 && s[1][3] == 5,
          "hellaswag: each ending's loss sum covers exactly its tokens", "%d rows", rows);
    check(rows == 2 && pred[0] == 1 && pn[0] == 0 && pred[1] == 0 && pn[1] == 2 && r.n == 2 && r.correct == 0 &&
              r.correct_norm == 2,
          "hellaswag: acc by the sum, acc_norm by the sum per character, ties to the first", "acc %d/2, acc_norm %d/2",
          r.correct, r.correct_norm);
    c.hellaswag_n = 1;
    f = xfopen(csvp, "w");
    r = run_hellaswag(&c, &m, &pc, &es, f);
    fclose(f);
    check(r.n == 1, "hellaswag: --hellaswag_n takes the first examples", "n %d", r.n);
    // through the trainer: JSON numbers and one CSV row per example
    char cmd[2048], out[8192], json[512];
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --eval_len 64 --eval_n 2 --hellaswag %s --out_dir %s/hs", SMALL, path, TMP);
    int rc = run_cmd(cmd, out, sizeof(out));
    snprintf(json, sizeof(json), "%s/hs/eval_L64.json", TMP);
    snprintf(csvp, sizeof(csvp), "%s/hs/eval_L64_hellaswag.csv", TMP);
    f = fopen(csvp, "r");
    int lines = 0;
    while (f && fgets(line, sizeof(line), f)) lines++;
    if (f) fclose(f);
    double acc = rc == 0 ? read_json_number(json, "acc") : -1;
    check(rc == 0 && lines == 3 && acc >= 0 && acc <= 1 && strstr(out, "hellaswag: acc"),
          "hellaswag through the trainer: JSON and one CSV row per example", "exit %d, %d lines", rc, lines);
}

// Loss masks: the shard reader's checks, the loader's masks, the step's weights, a masked
// loss against its definition, a mask of ones against no mask, gradient accumulation
// against one batch, and finite differences of the masked loss.
static void test_loss_masks(void) {
    enum { N = 600 };
    uint16_t tok[N];
    unsigned char mask[N];
    for (int i = 0; i < N; i++) tok[i] = (uint16_t)(i * 7 % 200), mask[i] = (unsigned char)(i % 3 == 0);
    char p[256];
    snprintf(p, sizeof(p), "%s/masked.bin", TMP);
    write_masked_shard(p, 1, tok, N, mask, N);
    long n;
    unsigned char *m = NULL;
    int *t = shard_load(p, 257, &n, &m);
    check(n == N && m && t[5] == 35 && m[3] == 1 && m[4] == 0 && memcmp(m, mask, N) == 0, "masked shard: tokens and mask read", "");
    free(t);
    free(m);
    DataLoader d;
    loader_init(&d, p, 257, 32, 5);
    int rows[4 * 33];
    unsigned char masks[4 * 33];
    loader_next_batch(&d, 4, rows, masks);
    int agree = d.masked;
    for (int b = 0; b < 4; b++) {  // each row is a window of the shard: its mask is the shard's at the same offset
        int off = -1;
        for (int o = 0; o + 33 <= N && off < 0; o += 32)
            if (rows[b * 33] == tok[o] && rows[b * 33 + 1] == tok[o + 1] && rows[b * 33 + 32] == tok[o + 32]) off = o;
        agree &= off >= 0 && memcmp(masks + b * 33, mask + off, 33) == 0;
    }
    loader_free(&d);
    check(agree, "loader: each window comes with its own mask", "");
    float w[4 * 32];
    long count = loss_weights(w, masks, 4, 32);
    double sw = 0;
    long want = 0;
    for (int i = 0; i < 4 * 33; i++) want += i % 33 != 0 && masks[i];
    for (int i = 0; i < 4 * 32; i++) sw += w[i];
    check(count == want && fabs(sw - 1.0) < 1e-6 && w[0] == masks[1] / (float)count, "loss weights: mask / counted targets of the step",
          "count %ld, sum %.7f", count, sw);
    const char *bad_names[4] = {"a mask value of 2", "a truncated mask", "header[3] = 5", "a mask that counts nothing"};
    const char *bad_words[4] = {"loss mask value 2 at index 7", "is truncated: header says 600 tokens and their mask",
                                "header[3] is 5", "its loss mask counts no token"};
    for (int k = 0; k < 4; k++) {
        unsigned char bm[N];
        memcpy(bm, mask, N);
        if (k == 0) bm[7] = 2;
        if (k == 3) memset(bm, 0, N);
        snprintf(p, sizeof(p), "%s/bad_mask%d.bin", TMP, k);
        write_masked_shard(p, k == 2 ? 5 : 1, tok, N, bm, k == 1 ? N - 10 : N);
        char cmd[1024], out[4096], label[128];
        snprintf(cmd, sizeof(cmd), "%s --train_data %s --steps 1 --out_dir %s/bad", SMALL, p, TMP);
        int rc = run_cmd(cmd, out, sizeof(out));
        snprintf(label, sizeof(label), "bad input: %s", bad_names[k]);
        check(rc == 1 && strstr(out, bad_words[k]), label, "exit %d: %.200s", rc, out);
    }
    // the masked loss and its gradient, in process on a small model
    Config c;
    config_defaults(&c);
    c.V = 50; c.C = 16; c.L = 2; c.NH = 4; c.NKV = 2; c.F = 24; c.T = 8; c.B = 2;
    round_vocab(&c);
    GPT g;
    gpt_alloc(&g, &c, 1);
    gpt_init(&g, 3);
    acts_alloc(&g.acts, &c, c.B, c.T, 1);
    Rng r = rng_make(9, 9);
    int rr[4 * 9];  // 2 micro-batches of B = 2 rows of T+1
    unsigned char mm[4 * 9];
    for (int i = 0; i < 4 * 9; i++) rr[i] = (int)rng_below(&r, c.V), mm[i] = (unsigned char)(rng_below(&r, 2));
    PosConfig pc = pos_config_of(&c);
    PosStep ps = pos_standard(&pc);
    float ww[4 * 8], ones[4 * 8], norm;
    loss_weights(ww, mm, 4, 8);
    double direct = 0;  // the definition: mean over the counted targets of the per-token losses
    long cnt = 0;
    for (int micro = 0; micro < 2; micro++) {
        int inp[16], tgt[16];
        for (int b = 0; b < 2; b++)
            for (int tt = 0; tt < 8; tt++) inp[b * 8 + tt] = rr[(micro * 2 + b) * 9 + tt], tgt[b * 8 + tt] = rr[(micro * 2 + b) * 9 + tt + 1];
        gpt_forward(&g, &g.acts, inp, tgt, &ps);
        for (int b = 0; b < 2; b++)
            for (int tt = 0; tt < 8; tt++)
                if (mm[(micro * 2 + b) * 9 + tt + 1]) direct += g.acts.losses[b * 8 + tt], cnt++;
    }
    direct /= cnt;
    float lw = compute_gradients(&g, rr, ww, 2, &ps, &norm);
    float *gw = (float *)xmalloc(g.n_params * sizeof(float));
    memcpy(gw, g.grads_mem, g.n_params * sizeof(float));
    check(fabs(lw - direct) < 1e-5 * fabs(direct), "masked loss = mean over the counted targets", "%.7f vs %.7f", lw, direct);
    for (int i = 0; i < 4 * 8; i++) ones[i] = 1.0f / 32;
    float l1 = compute_gradients(&g, rr, ones, 2, &ps, &norm);
    float *g1 = (float *)xmalloc(g.n_params * sizeof(float));
    memcpy(g1, g.grads_mem, g.n_params * sizeof(float));
    float l0 = compute_gradients(&g, rr, NULL, 2, &ps, &norm);
    double e1 = rel_err(g1, g.grads_mem, g.n_params);
    check(fabs(l1 - l0) < 1e-6 * l0 && e1 < 1e-6, "a mask of ones trains as no mask", "loss %.7f vs %.7f, grads rel err %.1e", l1, l0, e1);
    // one micro-batch of 4 rows against two of 2
    GPT g4;
    Config c4 = c;
    c4.B = 4;
    gpt_alloc(&g4, &c4, 1);
    memcpy(g4.params_mem, g.params_mem, g.n_params * sizeof(float));
    acts_alloc(&g4.acts, &c4, 4, 8, 1);
    float l4 = compute_gradients(&g4, rr, ww, 1, &ps, &norm);
    double e4 = rel_err(gw, g4.grads_mem, g.n_params);
    check(fabs(l4 - lw) < 1e-6 * lw && e4 < 1e-5, "masked gradient accumulation equals one batch", "loss %.7f vs %.7f, grads rel err %.1e", l4, lw, e4);
    // finite differences of the masked loss on its 3 largest gradients
    double worst = 0;
    for (int pick = 0; pick < 3; pick++) {
        size_t best = 0;
        for (size_t j = 0; j < g.n_params; j++)
            if (fabsf(gw[j]) > fabsf(gw[best])) best = j;
        float orig = g.params_mem[best], h = 1e-2f * (fabsf(orig) > 0.1f ? fabsf(orig) : 0.1f);
        g.params_mem[best] = orig + h;
        double lp = compute_gradients(&g, rr, ww, 2, &ps, &norm);
        g.params_mem[best] = orig - h;
        double lm = compute_gradients(&g, rr, ww, 2, &ps, &norm);
        g.params_mem[best] = orig;
        double fd = (lp - lm) / (2.0 * h), e = fabs(fd - gw[best]) / (fabs(gw[best]) + 1e-12);
        worst = e > worst ? e : worst;
        gw[best] = 0.0f;
    }
    check(worst < 2e-2, "finite differences of the masked loss", "worst rel err %.2e over the 3 largest gradients", worst);
    // the validation loss of a masked stream: the mean over the targets its mask marks
    enum { NV = 2 * 16 + 1 };  // two (B,T) windows and the last target
    int vs[NV];
    unsigned char vm[NV], vones[NV];
    for (int i = 0; i < NV; i++) vs[i] = (int)rng_below(&r, c.V), vm[i] = (unsigned char)(i % 3 != 1), vones[i] = 1;
    double vdirect = 0, vunmasked = 0;
    long vcnt = 0;
    for (int k = 0; k < 2; k++) {
        vunmasked += gpt_forward(&g, &g.acts, vs + k * 16, vs + k * 16 + 1, &ps) / 2.0;  // B rows of T: one window of 16
        for (int i = 0; i < 16; i++)
            if (vm[k * 16 + i + 1]) vdirect += g.acts.losses[i], vcnt++;
    }
    vdirect /= vcnt;
    float vl = validation_loss(&g, &g.acts, vs, vm, NV, 2), v1 = validation_loss(&g, &g.acts, vs, vones, NV, 2),
          v0 = validation_loss(&g, &g.acts, vs, NULL, NV, 2);
    check(fabs(vl - vdirect) < 1e-6 * vdirect && fabs(v1 - v0) < 1e-6 * v0 && fabs(v0 - vunmasked) < 1e-6 * v0,
          "validation loss with a mask = mean over the counted targets; a mask of ones = no mask",
          "%.7f vs %.7f; ones %.7f vs none %.7f (direct %.7f)", vl, vdirect, v1, v0, vunmasked);
    free(gw);
    free(g1);
    gpt_free(&g4);
    gpt_free(&g);
}

// A stand-in model for the task evaluation: copies the letters after "Copy: " (right), or
// answers 'x' (wrong).
static int copier_right;
static void copier_greedy(void *ctx, const int *prompt, int n, int n_new, const PosStep *ps, int *out) {
    (void)ctx, (void)ps;
    int start = 0;
    for (int i = 0; i + 5 < n; i++)
        if (prompt[i] == 'C' && prompt[i + 4] == ':') start = i + 6;
    for (int j = 0; j < n_new; j++) out[j] = copier_right && start + j < n ? prompt[start + j] : 'x';
}

// --task_eval: exact match per length (lengths sorted, every answer token compared)
// through a copier and a wrong model, and a trainer run writing its CSV and JSON.
static void test_task_eval(void) {
    int pt[512], at[512], po[9] = {0}, ao[9] = {0}, lens[8], np = 0, na = 0;
    int order[8] = {3, 1, 2, 1, 3, 2, 1, 3};  // lengths out of order
    for (int e = 0; e < 8; e++) {
        char prompt[64], answer[64];
        const char *letters = "qwertyuiop";
        int k = order[e], pl = snprintf(prompt, sizeof(prompt), "Copy:"), al = 0;
        for (int i = 0; i < k; i++) {
            pl += snprintf(prompt + pl, sizeof(prompt) - pl, " %c", letters[(e + i) % 10]);
            al += snprintf(answer + al, sizeof(answer) - al, "%s%c", i ? " " : "", letters[(e + i) % 10]);
        }
        pl += snprintf(prompt + pl, sizeof(prompt) - pl, "\n");
        pt[np++] = 256;
        for (int i = 0; i < pl; i++) pt[np++] = (unsigned char)prompt[i];
        for (int i = 0; i < al; i++) at[na++] = (unsigned char)answer[i];
        po[e + 1] = np;
        ao[e + 1] = na;
        lens[e] = k;
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/task_test.bin", TMP);
    TensorWriter w;
    tw_open(&w, path, TF_KIND_DUMP, 5);
    tw_add1(&w, "prompt_tokens", TF_I32, np, pt);
    tw_add1(&w, "prompt_offsets", TF_I32, 9, po);
    tw_add1(&w, "answer_tokens", TF_I32, na, at);
    tw_add1(&w, "answer_offsets", TF_I32, 9, ao);
    tw_add1(&w, "lengths", TF_I32, 8, lens);
    tw_close(&w);
    Config c;
    config_defaults(&c);
    TaskFile t;
    task_file_load(&t, path, c.V);
    EvalModel m = {NULL, NULL, NULL, copier_greedy};
    TaskResult *r = (TaskResult *)xmalloc(sizeof(TaskResult));
    copier_right = 1;
    run_task_examples(&c, &m, &t, r);
    int ok = r->n == 3 && r->lengths[0] == 1 && r->lengths[2] == 3 && r->total[0] == 3 && r->total[1] == 2 && r->total[2] == 3 &&
             r->correct[0] == 3 && r->correct[1] == 2 && r->correct[2] == 3;
    copier_right = 0;
    run_task_examples(&c, &m, &t, r);
    ok &= r->correct[0] + r->correct[1] + r->correct[2] == 0;
    check(ok, "task evaluation: exact match per length, lengths sorted (a copier 8/8, a wrong model 0/8)", "");
    free(r);
    tf_free(&t.tf);
    char cmd[2048], out[8192], csv[300];
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --eval_len 0 --task_eval %s --out_dir %s/task", SMALL, path, TMP);
    int rc = run_cmd(cmd, out, sizeof(out));
    snprintf(csv, sizeof(csv), "%s/task/eval_L0_task.csv", TMP);
    FILE *f = fopen(csv, "r");
    int lines = 0;
    char line[256];
    while (f && fgets(line, sizeof(line), f)) lines++;
    if (f) fclose(f);
    snprintf(csv, sizeof(csv), "%s/task/eval_L0_task.json", TMP);
    f = fopen(csv, "r");
    check(rc == 0 && lines == 4 && f && strstr(out, "exact match by length: 1:"), "--task_eval through the trainer (CSV and JSON)",
          "exit %d, %d lines", rc, lines);
    if (f) fclose(f);
}

// An evaluation records the data it read (its JSON's val_data), an --eval_only takes the
// run's own --val_data from the checkpoint, and does not replace an evaluation of other
// data without --eval_tag or --overwrite.
// Token i of a uint16 shard (data/prepare.py's format: a 1024-byte header) changed in place
// to another value below 256; 0 when the file cannot be.
static int bump_token(const char *path, long i) {
    FILE *f = fopen(path, "r+b");
    uint16_t tok = 0;
    int ok = f && fseek(f, 1024 + 2 * i, SEEK_SET) == 0 && fread(&tok, 2, 1, f) == 1;
    tok = (uint16_t)((tok + 1) % 256);
    ok = ok && fseek(f, 1024 + 2 * i, SEEK_SET) == 0 && fwrite(&tok, 2, 1, f) == 1;
    if (f) fclose(f);
    return ok;
}

static void test_eval_data(void) {
    char cmd[4096], out[8192], dir[512], json[600], copy[600], val[600];
    snprintf(dir, sizeof(dir), "%s/vdata", TMP);
    snprintf(val, sizeof(val), "%s/data/val.bin", dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/data && cp data/builtin/val.bin %s", dir, val);
    int copied = run_cmd(cmd, NULL, 0) == 0 && bump_token(val, 10);  // the run's own data: not the built-in corpus
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --eval_len 0 --val_every 0 --val_data %s --out_dir %s/run", SMALL, val, dir);
    int r0 = copied ? run_cmd(cmd, out, sizeof(out)) : -1;
    snprintf(cmd, sizeof(cmd), "%s --resume %s/run/checkpoint.bin --eval_only --eval_len 64 --eval_n 1 --indist_start 8",
             TRAINER, dir);
    int r1 = run_cmd(cmd, out, sizeof(out));
    snprintf(json, sizeof(json), "%s/run/eval_L64.json", dir);
    char want[700], text[65536] = "";
    snprintf(want, sizeof(want), "\"val_data\": {\"files\": \"%s/data/val.bin\", \"tokens\": ", dir);
    FILE *f = fopen(json, "r");
    if (f) { size_t n = fread(text, 1, sizeof(text) - 1, f); text[n] = 0; fclose(f); }
    check(r0 == 0 && r1 == 0 && strstr(out, "--val_data") && strstr(text, want) && strstr(text, "\"evaluated_crc32\": \""),
          "--eval_only takes the run's own --val_data from the checkpoint, and its JSON records the data", "exit %d %d", r0, r1);
    snprintf(copy, sizeof(copy), "%s/json_copy", dir);
    snprintf(cmd, sizeof(cmd), "cp %s %s", json, copy);
    run_cmd(cmd, NULL, 0);
    snprintf(cmd, sizeof(cmd), "%s --resume %s/run/checkpoint.bin --eval_only --eval_len 64 --eval_n 1 --indist_start 8 "
             "--val_data data/builtin/val.bin", TRAINER, dir);
    int r2 = run_cmd(cmd, out, sizeof(out));
    check(r2 == 1 && strstr(out, "is an evaluation of other validation data") && strstr(out, "--eval_tag") &&
              files_equal(json, copy), "an evaluation of other data does not replace the folder's evaluation of that tag",
          "exit %d", r2);
    snprintf(cmd, sizeof(cmd), "%s --resume %s/run/checkpoint.bin --eval_only --eval_len 64 --eval_n 1 --indist_start 8 "
             "--val_data data/builtin/val.bin --eval_tag builtin", TRAINER, dir);
    int r3 = run_cmd(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s --resume %s/run/checkpoint.bin --eval_only --eval_len 64 --eval_n 1 --indist_start 8 "
             "--val_data data/builtin/val.bin --overwrite", TRAINER, dir);
    int r4 = run_cmd(cmd, out, sizeof(out));
    check(r3 == 0 && r4 == 0 && !files_equal(json, copy), "... but does with its own --eval_tag, or --overwrite", "exit %d %d",
          r3, r4);
    // the data is its content: the same file by another name is the same data; other tokens
    // under the same name (and count) are other data
    char cwd[1024], before[600];
    snprintf(cmd, sizeof(cmd), "%s --resume %s/run/checkpoint.bin --eval_only --eval_len 64 --eval_n 1 --indist_start 8 "
             "--val_data %s --overwrite", TRAINER, dir, val);
    int r5 = run_cmd(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s --resume %s/run/checkpoint.bin --eval_only --eval_len 64 --eval_n 1 --indist_start 8 "
             "--val_data %s/%s/data/../data/val.bin", TRAINER, dir, getcwd(cwd, sizeof(cwd)) ? cwd : ".", dir);
    int r6 = run_cmd(cmd, out, sizeof(out));
    check(r5 == 0 && r6 == 0 && !strstr(out, "other validation data"),
          "an evaluation of the same file by another name (absolute, through ..) is of the same data", "exit %d %d", r5, r6);
    snprintf(before, sizeof(before), "%s/json_before", dir);
    snprintf(cmd, sizeof(cmd), "cp %s %s", json, before);
    run_cmd(cmd, NULL, 0);
    int changed = bump_token(val, 20);  // a token the evaluation reads
    snprintf(cmd, sizeof(cmd), "%s --resume %s/run/checkpoint.bin --eval_only --eval_len 64 --eval_n 1 --indist_start 8 "
             "--val_data %s", TRAINER, dir, val);
    int r7 = run_cmd(cmd, out, sizeof(out));
    check(changed && r7 == 1 && strstr(out, "is an evaluation of other validation data") && strstr(out, "CRC-32") &&
              files_equal(json, before),
          "other tokens under the same name and count are other data: the folder's evaluation is not replaced", "exit %d", r7);
}

// A long evaluation reports progress (positions, rate, time left) in a log as on a terminal,
// a short one adds nothing to a log; the loss bars split the bucket the window ends inside.
static void test_eval_progress(void) {
    char cmd[2048], out[16384], dir[512];
    snprintf(dir, sizeof(dir), "%s/progress", TMP);
    snprintf(cmd, sizeof(cmd), "rm -rf %s && PROGRESS_EVERY=0 %s --steps 1 --eval_len 96 --eval_n 2 --indist_start 8 --out_dir %s",
             dir, SMALL, dir);  // the window (32) ends inside the bucket 30-35
    int r0 = run_cmd(cmd, out, sizeof(out));
    int straddles = 0, split = 0, lo, hi;
    char where[8];
    for (const char *l = out; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (sscanf(l, " %d-%d %7s", &lo, &hi, where) == 3) {
            straddles += lo < 32 && hi >= 32;
            split += lo == 30 && hi == 31 && !strcmp(where, "in");
        }
    check(r0 == 0 && strstr(out, "eval eval_L96: 192/192 positions (100.0%) | ") && strstr(out, "positions/s | ETA"),
          "an evaluation prints its progress in a log: positions done, rate, time left", "exit %d", r0);
    check(r0 == 0 && split == 1 && straddles == 0, "the loss bars split the bucket the training window ends inside",
          "rows 30-31 in: %d, rows across position 32: %d", split, straddles);
    snprintf(cmd, sizeof(cmd), "%s --resume %s/checkpoint.bin --eval_only --eval_len 96 --eval_n 2 --indist_start 8",
             TRAINER, dir);
    int r1 = run_cmd(cmd, out, sizeof(out));
    check(r1 == 0 && !strstr(out, " positions ("), "a short evaluation adds no progress line to a log", "exit %d", r1);
    const char *bad[] = {"2junk", "-1", "nan"};
    int refused = 0;
    for (int i = 0; i < 3; i++) {  // refused before the run: not when the evaluation begins, after training
        snprintf(cmd, sizeof(cmd), "PROGRESS_EVERY=%s %s --steps 1 --eval_len 96 --eval_n 2 --indist_start 8 --out_dir %s_bad",
                 bad[i], SMALL, dir);
        int r = run_cmd(cmd, out, sizeof(out));
        char folder[600];
        snprintf(folder, sizeof(folder), "%s_bad", dir);
        refused += r == 1 && strstr(out, "error: PROGRESS_EVERY") && !strstr(out, "| loss ") && access(folder, F_OK) != 0;
    }
    check(refused == 3, "PROGRESS_EVERY that is not a number of seconds >= 0 (2junk, -1, nan) is refused before the run",
          "%d of 3 refused", refused);
}

// every scheme and encoding trains two steps and evaluates through the trainer binary
static void test_every_scheme_runs(void) {
    char cmd[2048], out[8192], label[200];
    const char *extra[] = {"--drope_step 1", "--drope_step 1 --qk_norm", "--pos rpe --rpe_layers independent --rpe_eval random",
                           "--pe learned --pos rope --wpe_rows 96"};  // the PE survey's table: rows to the evaluation length
    int n_extra = (int)(sizeof(extra) / sizeof(extra[0]));
    for (int k = 0; k < POS_N_SCHEMES + PE_N + n_extra; k++) {
        char flags[128];
        if (k < POS_N_SCHEMES) snprintf(flags, sizeof(flags), "--pos %s", POS_SCHEME_NAMES[k]);
        else if (k < POS_N_SCHEMES + PE_N) {  // a learned table needs integer positions (RPE's reach past the window); NoPE has none
            int pe = k - POS_N_SCHEMES;
            snprintf(flags, sizeof(flags), "--pe %s --pos %s", PE_NAMES[pe],  // TUPE: rows to the evaluation length
                     pe == PE_LEARNED ? "rpe" : pe == PE_NOPE ? "rope" : pe == PE_TUPE ? "rope --wpe_rows 96" : "posaug");
        }
        else snprintf(flags, sizeof(flags), "%s", extra[k - POS_N_SCHEMES - PE_N]);
        if (!wants_flags(flags)) continue;
        snprintf(cmd, sizeof(cmd), "%s --steps 2 --val_every 1 --eval_len 96 --eval_n 2 --gain_window 16 %s --out_dir %s/scheme_%d",
                 SMALL, flags, TMP, k);
        int rc = run_cmd(cmd, out, sizeof(out));
        snprintf(label, sizeof(label), "%s trains and evaluates", flags);
        check(rc == 0 && strstr(out, "cliff"), label, "exit %d", rc);
    }
}

typedef struct {
    const char *name, *args, *expect;
} BadCase;

static void test_bad_inputs(void) {
    char p[512], cmd[2048], out[8192];
    uint16_t tk[600];
    for (int i = 0; i < 600; i++) tk[i] = (uint16_t)(i % 200);
    snprintf(p, sizeof(p), "%s/bad_magic.bin", TMP);
    write_shard(p, 12345, 1, 600, tk, sizeof(tk));
    snprintf(p, sizeof(p), "%s/bad_version.bin", TMP);
    write_shard(p, SHARD_MAGIC_U16, 3, 600, tk, sizeof(tk));
    snprintf(p, sizeof(p), "%s/truncated.bin", TMP);
    write_shard(p, SHARD_MAGIC_U16, 1, 600, tk, 500);
    for (char c = 'a'; c <= 'e'; c++) {  // good training shards, then (below) a bad last one
        snprintf(p, sizeof(p), "%s/multi_%c.bin", TMP, c);
        write_shard(p, SHARD_MAGIC_U16, 1, 600, tk, sizeof(tk));
    }
    tk[321] = 300;
    snprintf(p, sizeof(p), "%s/big_token.bin", TMP);
    write_shard(p, SHARD_MAGIC_U16, 1, 600, tk, sizeof(tk));
    snprintf(p, sizeof(p), "%s/multi_f.bin", TMP);
    write_shard(p, SHARD_MAGIC_U16, 1, 600, tk, sizeof(tk));
    // a truncated copy of a good checkpoint
    char good[512], trunc[512];
    snprintf(good, sizeof(good), "%s/full/checkpoint.bin", TMP);
    snprintf(trunc, sizeof(trunc), "%s/truncated_ckpt.bin", TMP);
    FILE *f = fopen(good, "rb");
    if (f) {
        long n = file_size(f);
        char *buf = (char *)xmalloc(n);
        xfread(buf, n, f, good, "checkpoint");
        fclose(f);
        FILE *g = xfopen(trunc, "wb");
        fwrite(buf, 1, n - 1000, g);
        fclose(g);
        free(buf);
    }
    char a_magic[600], a_ver[600], a_trunc[600], a_tok[600], a_ck[600], a_cfg[600];
    snprintf(a_magic, sizeof(a_magic), "--train_data %s/bad_magic.bin", TMP);
    snprintf(a_ver, sizeof(a_ver), "--train_data %s/bad_version.bin", TMP);
    snprintf(a_trunc, sizeof(a_trunc), "--train_data %s/truncated.bin", TMP);
    snprintf(a_tok, sizeof(a_tok), "--train_data %s/big_token.bin", TMP);
    char a_multi[600], a_valtok[600];
    snprintf(a_multi, sizeof(a_multi), "--train_data '%s/multi_*.bin' --steps 40", TMP);
    snprintf(a_valtok, sizeof(a_valtok), "--val_data %s/big_token.bin --val_every 0 --eval_len 64 --eval_n 2 --gain_window 16", TMP);
    snprintf(a_ck, sizeof(a_ck), "--resume %s", trunc);
    snprintf(a_cfg, sizeof(a_cfg), "--resume %s --ffn_hidden 96", good);
    char a_t5[600], a_gen[600];
    snprintf(a_t5, sizeof(a_t5), "--init_from %s --pe t5", good);
    snprintf(a_gen, sizeof(a_gen), "--resume %s/lq/checkpoint.bin --pos rpe --steps 0 --generate 400", TMP);
    char a_qk[600], a_lq[600], a_both[1100];
    snprintf(a_qk, sizeof(a_qk), "--resume %s --qk_norm", good);
    snprintf(a_lq, sizeof(a_lq), "--init_from %s/lq/checkpoint.bin --pe learned --pos rpe --steps 4", TMP);
    snprintf(a_both, sizeof(a_both), "--resume %s --init_from %s", good, good);
    char hs_label[600], hs_token[600], a_hs_label[700], a_hs_token[700];
    snprintf(hs_label, sizeof(hs_label), "%s/hs_bad_label.bin", TMP);
    snprintf(hs_token, sizeof(hs_token), "%s/hs_bad_token.bin", TMP);
    write_hellaswag(hs_label, 7, 256);
    write_hellaswag(hs_token, 2, 300);
    snprintf(a_hs_label, sizeof(a_hs_label), "--steps 1 --eval_len 64 --hellaswag %s", hs_label);
    snprintf(a_hs_token, sizeof(a_hs_token), "--steps 1 --eval_len 64 --hellaswag %s", hs_token);
    char a_arch[600];
    snprintf(a_arch, sizeof(a_arch), "--resume %s --arch gru --pos rope", good);
    char a_lqs[600];
    snprintf(a_lqs, sizeof(a_lqs), "--eval_only --resume %s/lq/checkpoint.bin --eval_len 96 --scaling ntk", TMP);
    // damaged checkpoints: a NaN weight and an Inf moment (valid checksums), a flipped
    // byte (the checksum catches it), a data position past an int
    char ck_nan[600], ck_inf[600], ck_flip[600], ck_state[600], a_nan[700], a_inf[700], a_flip[700], a_state[700];
    snprintf(ck_nan, sizeof(ck_nan), "%s/nan_weight.bin", TMP);
    snprintf(ck_inf, sizeof(ck_inf), "%s/inf_moment.bin", TMP);
    snprintf(ck_flip, sizeof(ck_flip), "%s/flipped.bin", TMP);
    snprintf(ck_state, sizeof(ck_state), "%s/bad_state.bin", TMP);
    rewrite_tensor(good, ck_nan, "param.wq", 5, NAN, 0);
    rewrite_tensor(good, ck_inf, "adam_v.w_up", 3, INFINITY, 0);
    rewrite_tensor(good, ck_state, "meta.state", 4, 0, 1ull << 40);
    f = fopen(good, "rb");
    if (f) {
        long n = file_size(f);
        unsigned char *buf = (unsigned char *)xmalloc(n);
        xfread(buf, n, f, good, "checkpoint");
        fclose(f);
        buf[n / 2] ^= 0x10;  // one bit in the middle of the weights
        FILE *g = xfopen(ck_flip, "wb");
        fwrite(buf, 1, n, g);
        fclose(g);
        free(buf);
    }
    // a checkpoint's every field checked for what it can be: damaged values (valid checksums)
    // refused as corrupt naming the field; a newer build's values naming the checkpoint
    enum { N_DAMAGED = 18 };
    char dmg[N_DAMAGED][600], a_dmg[N_DAMAGED][700];
    for (int k = 0; k < N_DAMAGED; k++) {
        snprintf(dmg[k], sizeof(dmg[k]), "%s/damaged%d.bin", TMP, k);
        snprintf(a_dmg[k], sizeof(a_dmg[k]), "--resume %.600s --eval_only --eval_len 64 --eval_n 1", dmg[k]);
    }
    char x_pe[200], x_neg[200], x_pos[200];  // the tables' sizes: the first index past them is a newer build's
    snprintf(x_pe, sizeof(x_pe), "was made by a newer build of this project (its meta.config_i pe is %d", PE_N);
    snprintf(x_neg, sizeof(x_neg), "is corrupt: meta.config_i pe is -1; it can be in [0, %d]", PE_N - 1);
    snprintf(x_pos, sizeof(x_pos), "was made by a newer build of this project (its meta.config_i pos_scheme is %d", POS_N_SCHEMES);
    int wk_t[3] = {2, 32, 16}, ci14[1] = {CKI_N + 1};
    rewrite_tensor(good, dmg[0], "meta.embed_scale", 0, 3.0f, 0);
    rewrite_tensor(good, dmg[1], "meta.embed_scale", 0, 1e30f, 0);
    rewrite_tensor(good, dmg[2], "meta.config_i", CKI_PE, 0, PE_N);
    rewrite_tensor(good, dmg[3], "meta.config_i", CKI_PE, 0, (uint64_t)-1);
    rewrite_tensor(good, dmg[4], "meta.config_i", CKI_POS, 0, POS_N_SCHEMES);
    rewrite_tensor(good, dmg[5], "meta.config_i", CKI_C, 0, 33);
    rewrite_tensor(good, dmg[6], "meta.config_f", 0, 0.5f, 0);
    rewrite_tensor(good, dmg[7], "meta.config_f", 1, 2.0f, 0);
    rewrite_flags(good, dmg[8], "--pos\tposaug", "--pos\tfuture");
    rewrite_flags(good, dmg[9], "--pos\tposaug\n", "--pos\tposaug\n--future\t1\n");
    rewrite_flags(good, dmg[10], "--pos\tposaug\n", "--pos\tposaug\n--lr\tfast\n");
    rewrite_entry(good, dmg[11], "param.wk", NULL, 3, wk_t);
    rewrite_entry(good, dmg[12], "adam_v.wte", "param.future", 0, NULL);
    rewrite_entry(good, dmg[13], "adam_v.wte", "param.wpe", 0, NULL);
    rewrite_entry(good, dmg[14], "meta.config_i", NULL, 1, ci14);
    rewrite_tensor(good, dmg[15], "meta.config_i", CKI_WPE, 0, 64);
    snprintf(a_dmg[15], sizeof(a_dmg[15]), "--resume %.600s --steps 8", dmg[15]);
    rewrite_flags(good, dmg[16], "--pos\tposaug\n", "--pos\tposaug\n--rel_clip\t2147483647\n");
    snprintf(a_dmg[16], sizeof(a_dmg[16]), "--init_from %.600s --steps 8", dmg[16]);  // (--resume adopts the flag: refused as given)
    rewrite_tensor(good, dmg[17], "meta.pose_scaling", 0, 0, (uint64_t)-1);
    char ck_w[600], a_w[700];
    snprintf(ck_w, sizeof(ck_w), "%s/weights_only.bin", TMP);
    write_weights_only(good, ck_w);
    snprintf(a_w, sizeof(a_w), "--resume %s --steps 8", ck_w);
    snprintf(a_nan, sizeof(a_nan), "--eval_only --resume %s", ck_nan);
    snprintf(a_inf, sizeof(a_inf), "--resume %s --steps 8", ck_inf);
    snprintf(a_flip, sizeof(a_flip), "--resume %s --steps 8", ck_flip);
    snprintf(a_state, sizeof(a_state), "--resume %s --steps 8", ck_state);
    // a tokenizer whose header declares 1.16G tokens in a 1 KB file
    char tk_huge[600], a_tok_huge[700], a_dir[700];
    snprintf(tk_huge, sizeof(tk_huge), "%s/huge_tokenizer.bin", TMP);
    uint32_t th[256] = {20240328, 2, 1160000000u, 0};
    f = xfopen(tk_huge, "wb");
    fwrite(th, 4, 256, f);
    fputs("abcd", f);
    fclose(f);
    snprintf(a_tok_huge, sizeof(a_tok_huge), "--tokenizer %s", tk_huge);
    snprintf(a_dir, sizeof(a_dir), "--resume %s", TMP);
    BadCase cases[] = {
        {"shard with wrong magic", a_magic, "wrong magic"},
        {"shard with wrong version", a_ver, "version 3"},
        {"truncated shard", a_trunc, "truncated"},
        {"token id >= V", a_tok, "token 300 at index 321 is >= vocab size 257"},
        {"token id >= V in the last of several training shards", a_multi, "multi_f.bin': token 300 at index 321"},
        {"token id >= V in the validation data, checked before training", a_valtok, "big_token.bin': token 300 at index 321"},
        {"truncated checkpoint", a_ck, "truncated"},
        {"checkpoint of another config", a_cfg, "another config: it has --ffn_hidden 64, this run has 96"},
        {"missing data file", "--train_data nothing_here_*.bin", "no file matches"},
        {"unknown flag", "--nonsense 3", "unknown flag '--nonsense'"},
        {"no training and nothing to evaluate", "--steps 0", "--steps 0 trains nothing"},
        {"an empty run folder name", "--out_dir ''", "--out_dir must not be empty"},
        {"flag without value", "--steps", "--steps needs a value"},
        {"non-numeric value", "--lr fast", "--lr expects a number"},
        {"alpha range a > b", "--alpha_range 8,2", "0 < a <= b"},
        {"alpha range a = 0", "--alpha_range 0,8", "0 < a <= b"},
        {"alpha range syntax", "--alpha_range 8", "expects a,b"},
        {"NH % NKV", "--n_kv_head 3", "divisible by --n_kv_head 3"},
        {"odd head dim", "--n_embd 36 --n_head 4", "must be even"},
        {"C % NH", "--n_embd 30", "divisible by --n_head"},
        {"negative size", "--seq_len -5", "sizes must be positive"},
        {"zero batch", "--batch_size 0", "--batch_size must be positive"},
        {"total batch not a multiple", "--total_batch 5 --batch_size 2", "multiple of --batch_size"},
        {"eval_len within the window", "--eval_len 16", "must exceed the training window"},
        {"unknown scheme", "--pos magic", "--pos: unknown value 'magic'"},
        {"unknown encoding", "--pe cope", "--pe: unknown value 'cope'"},
        {"xPos past its scale's range", "--pe xpos --eval_len 20000", "--pe xpos takes positions up to 18130 (ROTARY_TABLE: "
         "its scale's range); this run reaches 19999"},
        {"unknown attention path", "--attention fast", "--attention: unknown value 'fast'"},
        {"flash with hd 256", "--attention flash --n_embd 512 --n_head 2 --n_kv_head 2", "head sizes up to 128"},
        {"flash with TUPE", "--attention flash --pe tupe --pos rope", "--attention flash does not take --pe tupe's untied positions"},
        {"flash with T-PE", "--attention flash --pe tpe", "--attention flash does not take --pe tpe's relative keys"},
        {"TUPE with scaled positions", "--pe tupe --pos posaug", "--pe tupe needs integer positions: --pos rope, got --pos posaug"},
        {"TUPE evaluated past its table", "--pe tupe --pos rope --eval_len 64", "--pe tupe: wpe has rows for positions 0..31 only"},
        {"unknown preset", "--model 7b", "unknown preset '7b'"},
        {"min_lr above lr", "--lr 1e-3 --min_lr 1e-2", "--min_lr"},
        {"unknown scaling", "--scaling rope2", "--scaling: unknown value 'rope2'"},
        {"alpha set syntax", "--pos discrete --alpha_set 1,x", "--alpha_set expects positive numbers"},
        {"curriculum fraction", "--pos curriculum-step --curriculum_frac 1.5", "--curriculum_frac must lie in [0, 1], got 1.5"},
        {"unknown layer mode", "--pos_layers middle", "--pos_layers: unknown value 'middle'"},
        {"rpe range below the window", "--pos rpe --rpe_max 16", "--rpe_max 16 must be at least --seq_len 32"},
        {"scale factor below 1", "--scale_factor 0.5", "--scale_factor must be >= 1"},
        {"PoSE scaling without PoSE", "--pose_scaling linear", "--pose_scaling linear interpolates the rotary frequencies under PoSE's skips: it needs --pos pose and --pe rope, xpos"},
        {"PoSE scaling of a sinusoid", "--pos pose --pe sinusoidal --pose_scaling ntk", "it needs --pos pose and --pe rope, xpos, got --pos pose --pe sinusoidal"},
        {"PoSE scaling and --scaling", "--pos pose --pose_scaling yarn --scaling pi", "trained with --pose_scaling yarn"},
        {"gain lengths syntax", "--gain_lengths 512,x", "--gain_lengths expects positive integers"},
        {"gain length past L_eval", "--eval_len 64 --gain_lengths 128", "must lie in"},
        {"passkey digits", "--passkey_digits 3", "--passkey_digits must be 0 or 5"},
        {"passkey prompt too short", "--passkey_lengths 50 --steps 1 --eval_len 64 --eval_n 2", "cannot hold the passkey prompt"},
        {"RULER prompt too short", "--ruler_lengths 256 --steps 1 --eval_len 64 --eval_n 2", "--ruler_lengths: 256 tokens cannot hold the ruler prompt"},
        {"RULER examples", "--ruler_n 0", "--ruler_n must be positive"},
        {"a HellaSwag label past 3", a_hs_label, "example 1 has label 7, not 0..3"},
        {"a HellaSwag token past the vocab", a_hs_token, "has token 300 at index 3 of ctx_tokens, outside the vocab size 257"},
        {"a missing HellaSwag file", "--steps 1 --eval_len 64 --hellaswag nothing.bin", "nothing.bin"},
        {"missing baseline", "--steps 1 --eval_len 64 --baseline nope.json", "--baseline: cannot open 'nope.json'"},
        {"learned APE with scaled positions", "--pe learned --pos posaug", "--pe learned needs integer positions"},
        {"learned APE evaluated past its table", "--pe learned --pos rope --eval_len 64", "wpe has rows for positions 0..31 only"},
        {"RPE evaluation past rpe_max", "--pos rpe --rpe_eval random --rpe_max 48 --eval_len 64", "--rpe_eval random draws --eval_len 64"},
        {"beta2 out of range", "--beta2 1", "--beta2 must lie in (0, 1)"},
        {"NoPE with a position scheme", "--pe nope --pos posaug", "--pe nope has no positional signal"},
        {"random base without RoPE", "--pe alibi --pos random-base", "--pos random-base draws the rotary base: it needs --pe rope, xpos, got --pe alibi"},
        {"ALiBi with explicit positions", "--pe alibi --pos rfs", "not by explicit positions"},
        {"a learned bias with PoSE's positions", "--pe erpe --pos pose", "--pe erpe biases by alpha * (i - j), not by explicit positions"},
        {"--rel_clip without eRPE", "--pe t5 --rel_clip 8", "--rel_clip is a parameter of --pe erpe and shaw; --pe t5 does not use it"},
        {"--t5_buckets without T5", "--pe erpe --t5_buckets 16", "--t5_buckets and --t5_max_distance are parameters of --pe t5, tupe; --pe erpe does not use them"},
        {"--t5_max_distance within the exact buckets", "--pe t5 --t5_buckets 16 --t5_max_distance 8", "--t5_max_distance 8 must exceed the 8 distances"},
        {"--t5_buckets 1", "--pe t5 --t5_buckets 1", "--t5_buckets 1 must lie in [2, 4096]"},
        {"--wpe_rows without a learned table", "--wpe_rows 64", "--wpe_rows is the size of --pe learned's and tupe's table; --pe rope has none"},
        {"--wpe_rows below the window", "--pe learned --wpe_rows 16", "--wpe_rows 16 must cover the positions training reaches (32)"},
        {"--pose_target below the window", "--pos pose --pose_target 16", "--pose_target 16 must lie in [--seq_len 32"},
        {"RoPE scaling of a non-RoPE model", "--pe alibi --steps 1 --eval_len 64 --scaling yarn", "--scaling yarn changes RoPE's frequencies"},
        {"RoPE scaling of a learned-APE checkpoint", a_lqs, "--scaling ntk changes RoPE's frequencies, which a --pe learned model"},
        {"RPE passkey past rpe_max", "--pos rpe --rpe_eval random --rpe_max 64 --eval_len 64 --passkey_lengths 60", "--rpe_eval random draws 70 passkey positions"},
        {"resume and init_from together", a_both, "pass one of them"},
        {"a transformer checkpoint resumed as a GRU", a_arch, "is a transformer, this run asks for a gru (--arch"},
        {"GRU with a position scheme", "--arch gru", "--arch gru has no positional encoding"},
        {"GRU with a context-gain window", "--arch gru --pos rope --gain_window 8", "pass --gain_window 0"},
        {"unknown architecture", "--arch lstm", "--arch: unknown value 'lstm'"},
        {"QK-norm added on resume", a_qk, "add --qk_norm to its weights with --init_from"},
        {"QK-norm checkpoint's weights without QK-norm", a_lq, "has QK-norm gains (trained with --qk_norm): pass --qk_norm"},
        {"NaN in a checkpoint's weights", a_nan, "param.wq[5] is nan"},
        {"Inf in a checkpoint's AdamW moments", a_inf, "adam_v.w_up[3] is inf"},
        {"a flipped bit in a checkpoint", a_flip, "is corrupt: its CRC-32 is"},
        {"a data position past an int", a_state, "meta.state data_sample is 1099511627776"},
        {"an embedding factor other than 1 or sqrt(C)", a_dmg[0], "is corrupt: meta.embed_scale is 3; it can be 1 or sqrt(C) = 5.65685"},
        {"an embedding factor of 1e30", a_dmg[1], "is corrupt: meta.embed_scale is 1.00000002e+30"},
        {"an encoding of a newer build", a_dmg[2], x_pe},
        {"a negative encoding", a_dmg[3], x_neg},
        {"a position scheme of a newer build", a_dmg[4], x_pos},
        {"a width that no head count divides", a_dmg[5], "is corrupt: meta.config_i C is 33; it can be NH times an even head size"},
        {"a RoPE base below 1", a_dmg[6], "is corrupt: meta.config_f rope_base is 0.5"},
        {"an RMSNorm eps of 2", a_dmg[7], "is corrupt: meta.config_f rms_eps is 2; it can be in (0, 1)"},
        {"a kept flag's value of a newer build", a_dmg[8], "was made by a newer build of this project (its run's --pos is 'future'"},
        {"a kept flag of a newer build", a_dmg[9], "was made by a newer build of this project (its run's flag --future"},
        {"a kept flag's damaged value", a_dmg[10], "is corrupt: meta.flags holds --lr 'fast', not a value of that flag"},
        {"a tensor of another shape, as many values", a_dmg[11], "is corrupt: param.wk is f32 [2, 32, 16] (3 dims), its model's is f32 [2, 16, 32]"},
        {"a tensor of a newer build", a_dmg[12], "was made by a newer build of this project (it holds the tensor param.future"},
        {"a tensor its model does not have", a_dmg[13], "is corrupt: it holds param.wpe, which its model (a transformer with --pe rope"},
        {"a header of a newer build", a_dmg[14], "was made by a newer build of this project (its meta.config_i has 14 values"},
        {"a learned table's rows without one", a_dmg[15], "is corrupt: meta.config_i wpe_rows is 64; it can be 0 without a learned table"},
        {"a kept clip distance past the positions", a_dmg[16], "is corrupt: meta.flags sizes its relative encoding past 16777216"},
        {"a negative PoSE interpolation", a_dmg[17], "is corrupt: meta.pose_scaling is -1; it can be in [0, "},
        {"a clip distance past the positions", "--pe erpe --rel_clip 2147483647", "--rel_clip must lie in [0, 16777216]"},
        {"a folder as the checkpoint", a_dir, "is not a regular file"},
        {"a weights-only checkpoint resumed", a_w, "holds weights only (no AdamW moments"},
        {"--alpha_range with a scheme that draws no alpha", "--pos rope --alpha_range 0.5,2", "--pos rope draws no alpha from it"},
        {"--alpha without --pos fixed", "--alpha 3", "--alpha is a parameter of --pos fixed; --pos posaug does not use it"},
        {"--rfs_scale without --pos rfs", "--rfs_scale 10", "--rfs_scale is a parameter of --pos rfs; --pos posaug does not use it"},
        {"--rfs_scale not positive", "--pos rfs --rfs_scale 0", "--rfs_scale must be > 0, got 0"},
        {"--alpha not positive", "--pos fixed --alpha -1", "--alpha must be > 0, got -1"},
        {"--alpha_set without --pos discrete or cycle", "--alpha_set 1,2", "--alpha_set is the set of --pos discrete and cycle"},
        {"--prompt without --generate", "--prompt hello", "--prompt is the start of --generate's text"},
        {"a seed past 64 bits", "--seed 99999999999999999999", "--seed: 99999999999999999999 is out of range"},
        {"an evaluation tag with a folder in it", "--eval_tag a/b", "a name without '/'"},
        {"a generation past the positions", "--generate 100000000", "--generate must lie in [0, "},
        {"threads beyond reason", "--threads 100000", "--threads must lie in [0, 1024]"},
        {"vocab size past the limit", "--vocab_size 2147483647", "--vocab_size must lie in [2, 16777216]"},
        {"window past the limit", "--seq_len 268435456", "--seq_len and --ffn_hidden must be at most 1048576"},
        {"evaluation longer than the validation data", "--eval_len 100000", "the evaluation needs 2000001"},
        {"a tokenizer declaring more tokens than its file holds", a_tok_huge, "declares 1160000000 tokens in 1028 bytes"},
        {"a configuration larger than --max_memory", "--seq_len 1024 --batch_size 64 --total_batch 64 --max_memory 1",
         "more than the 1.00 GiB allowed by --max_memory"},
        {"--init_from a checkpoint without the encoding's tensors", a_t5, "has no tensor attn_bias: it was trained with --pe rope, and this run's --pe t5"},
        {"--generate past a learned table", a_gen, "--generate 400: the end-of-text, the prompt and the new tokens reach position 399"},
    };
    size_t left[sizeof(cases) / sizeof(cases[0])];
    int n_left = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char label[128];
        snprintf(label, sizeof(label), "bad input: %s", cases[i].name);
        if (strstr(cases[i].args, "--max_memory") && cpu_trainer_only(label)) continue;  // the GPU holds the activations
        snprintf(cmd, sizeof(cmd), "%s --out_dir %s/bad%zu %s", SMALL, TMP, i, cases[i].args);
        int rc = run_cmd(cmd, out, sizeof(out));
        // refused before the first training step, not minutes later
        int ok = rc == 1 && strstr(out, "error: ") && strstr(out, cases[i].expect) && !strstr(out, "| loss ");
        char *nl = strstr(out, "error: ");
        if (nl) { char *e = strchr(nl, '\n'); if (e) *e = 0; }
        check(ok, label, "exit %d, %s", rc, nl ? nl : "no error message");
        snprintf(p, sizeof(p), "%s/bad%zu", TMP, i);  // refused before anything on disk changed: no run folder
        struct stat sb;
        if (stat(p, &sb) == 0) left[n_left++] = i;
    }
    char which[2048] = "";
    for (int k = 0; k < n_left; k++)
        snprintf(which + strlen(which), sizeof(which) - strlen(which), "%s'%s'", k ? ", " : "", cases[left[k]].name);
    check(n_left == 0, "bad input: every refusal comes before the run folder is made", "%d left one: %s", n_left, which);
    // a value given twice: the last counts (here a bad one, so the run stops at once), and a note says so
    snprintf(cmd, sizeof(cmd), "%s --out_dir %s/twice --lr 1e-3 --lr fast", SMALL, TMP);
    int rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "note: --lr is given twice; the last value counts (fast, not 1e-3)") &&
              strstr(out, "--lr expects a number"),
          "bad input: a flag given twice is noted, and its last value is the one taken", "exit %d", rc);
    // a good checkpoint was never replaced by a damaged one: the last save left no .tmp
    snprintf(p, sizeof(p), "%s/full/checkpoint.bin.tmp", TMP);
    f = fopen(p, "rb");
    check(!f, "checkpoint writes leave no temporary file", "");
    if (f) fclose(f);
}

// The lines of a text file (0 when it does not exist).
static int count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    for (int ch; (ch = fgetc(f)) != EOF;) n += ch == '\n';
    fclose(f);
    return n;
}

// One run per folder: the lock, another run's files, resuming in place, --overwrite.
static void test_run_folders(void) {
    char cmd[2048], out[8192], dir[512], p[600], copy[600];
    // a folder held by a live run (this process takes its lock, as a running trainer does)
    snprintf(dir, sizeof(dir), "%s/locked", TMP);
    mkdir(dir, 0755);
    snprintf(p, sizeof(p), "%s/.lock", dir);
    int fd = open(p, O_RDWR | O_CREAT, 0644);
    int locked = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
    char pid[32];
    snprintf(pid, sizeof(pid), "pid %d)", (int)getpid());
    if (locked && write(fd, pid + 4, strlen(pid + 4) - 1) < 0) locked = 0;
    snprintf(cmd, sizeof(cmd), "%s --steps 1 --out_dir %s", SMALL, dir);
    int rc = run_cmd(cmd, out, sizeof(out));
    check(locked && rc == 1 && strstr(out, "is in use by another run") && strstr(out, pid) && !strstr(out, "| loss "),
          "run folder: a second run on a folder a live run holds is refused, naming the holder's pid", "exit %d", rc);
    if (fd >= 0) close(fd);  // the holder ends: its lock file stays, no longer locked
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0, "run folder: the lock of a run that ended is taken over", "exit %d", rc);
    // a new run in a folder with another run's files: refused, nothing on disk changed
    snprintf(p, sizeof(p), "%s/checkpoint.bin", dir);
    snprintf(copy, sizeof(copy), "%s/locked_ckpt_copy.bin", TMP);
    snprintf(cmd, sizeof(cmd), "cp %s %s", p, copy);
    run_cmd(cmd, NULL, 0);
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --out_dir %s", SMALL, dir);
    rc = run_cmd(cmd, out, sizeof(out));
    char log[600];
    snprintf(log, sizeof(log), "%s/log.jsonl", dir);
    check(rc == 1 && strstr(out, "holds another run's files (") && strstr(out, "--overwrite") && files_equal(p, copy) &&
              count_lines(log) == 1,
          "run folder: a new run in a folder holding another run's files is refused; checkpoint and log unchanged", "exit %d", rc);
    // --overwrite: the old run's files go first, so the log holds the new run's steps only
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --out_dir %s --overwrite", SMALL, dir);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && strstr(out, "--overwrite: removed") && count_lines(log) == 2, "run folder: --overwrite removes the old run's files first",
          "exit %d, %d log lines", rc, count_lines(log));
    // --resume without --out_dir continues in the checkpoint's folder
    snprintf(cmd, sizeof(cmd), "%s --steps 4 --resume %s", SMALL, p);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 0 && count_lines(log) == 4 && strstr(out, dir), "run folder: --resume without --out_dir continues in the checkpoint's folder",
          "exit %d, %d log lines", rc, count_lines(log));
    snprintf(cmd, sizeof(cmd), "%s --steps 4 --resume %s --overwrite", SMALL, p);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "would remove the run it continues"), "run folder: --overwrite of the run being resumed is refused",
          "exit %d", rc);
    // continuing into, or evaluating into, a folder that holds a different run: refused
    snprintf(cmd, sizeof(cmd), "%s --steps 6 --resume %s --out_dir %s/full", SMALL, p, TMP);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "holds another run's files"), "run folder: --resume into another run's folder is refused", "exit %d", rc);
    snprintf(cmd, sizeof(cmd), "%s --eval_only --resume %s --eval_len 64 --eval_n 2 --out_dir %s/full", SMALL, p, TMP);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "holds another run's files") && !strstr(out, "in_dist"),
          "run folder: an evaluation into another run's folder is refused before it runs", "exit %d", rc);
    // without --out_dir a new run never lands in an earlier run's folder: it takes the next number
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/numbered && cd %s/numbered && for i in 1 2; do ../../%s %s --steps 1 "
             "--train_data ../../data/builtin/train.bin --val_data ../../data/builtin/val.bin || exit 1; done",
             TMP, TMP, TRAINER[0] == '.' ? TRAINER + 2 : TRAINER, SMALL_FLAGS);
    rc = run_cmd(cmd, out, sizeof(out));
    char first[600], second[600];
    snprintf(first, sizeof(first), "%s/numbered/runs/tiny_posaug/log.jsonl", TMP);
    snprintf(second, sizeof(second), "%s/numbered/runs/tiny_posaug_2/log.jsonl", TMP);
    check(rc == 0 && strstr(out, "'runs/tiny_posaug' holds an earlier run: this one writes to 'runs/tiny_posaug_2'") &&
              count_lines(first) == 1 && count_lines(second) == 1,
          "run folder: the default folder of a new run is numbered on past an earlier run's", "exit %d", rc);
    // --overwrite removes last, exactly the run's files, never an input
    char ow[512], ck[600], base[600], notes[600], keep[600];
    snprintf(ow, sizeof(ow), "%s/ow", TMP);
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --eval_len 64 --eval_n 1 --out_dir %s --eval_tag n", SMALL, ow);
    int r0 = run_cmd(cmd, out, sizeof(out));
    snprintf(ck, sizeof(ck), "%s/checkpoint.bin", ow);
    snprintf(base, sizeof(base), "%s/n.json", ow);
    snprintf(notes, sizeof(notes), "%s/notes.txt", ow);
    snprintf(keep, sizeof(keep), "%s/ow_ckpt_copy.bin", TMP);
    FILE *nf = fopen(notes, "w");
    if (nf) { fputs("my notes\n", nf); fclose(nf); }
    snprintf(cmd, sizeof(cmd), "cp %s %s", ck, keep);
    run_cmd(cmd, NULL, 0);
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --out_dir %s --overwrite --seq_len 1024 --batch_size 64 --total_batch 64 "
             "--max_memory 1", SMALL, ow);
    int r1 = run_cmd(cmd, out, sizeof(out));
    check(r0 == 0 && r1 == 1 && strstr(out, "--max_memory") && files_equal(ck, keep) && count_lines(base) == 1,
          "run folder: --overwrite with a run refused later (the memory estimate) leaves the old run's files", "exit %d %d", r0, r1);
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --init_from %s --out_dir %s --overwrite", SMALL, ck, ow);
    r1 = run_cmd(cmd, out, sizeof(out));
    check(r1 == 1 && strstr(out, "--overwrite would remove") && strstr(out, "which this run reads (--init_from)") &&
              files_equal(ck, keep), "run folder: --overwrite never removes the checkpoint --init_from reads", "exit %d", r1);
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --eval_len 64 --eval_n 1 --baseline %s --out_dir %s --overwrite", SMALL, base, ow);
    r1 = run_cmd(cmd, out, sizeof(out));
    check(r1 == 1 && strstr(out, "which this run reads (--baseline)") && files_equal(ck, keep) && count_lines(base) == 1,
          "run folder: --overwrite never removes the evaluation --baseline reads", "exit %d", r1);
    snprintf(cmd, sizeof(cmd), "%s --steps 2 --out_dir %s --overwrite --eval_tag n", SMALL, ow);
    r1 = run_cmd(cmd, out, sizeof(out));
    nf = fopen(notes, "r");
    check(r1 == 0 && nf && !strstr(out, "notes.txt") && strstr(out, "n.json"), "run folder: --overwrite removes the run's "
          "files by exact name (with --eval_tag n, not the user's notes.txt)", "exit %d: %.200s", r1, strstr(out, "--overwrite:") ? strstr(out, "--overwrite:") : "");
    if (nf) fclose(nf);
    char mine[600];
    snprintf(mine, sizeof(mine), "%s/mine", TMP);  // a folder of the user's own files only
    mkdir(mine, 0755);
    snprintf(notes, sizeof(notes), "%s/mine/eval_notes.json", TMP);
    nf = fopen(notes, "w");
    if (nf) { fputs("{\"mine\": 1}\n", nf); fclose(nf); }
    snprintf(cmd, sizeof(cmd), "%s --steps 1 --out_dir %s", SMALL, mine);
    r1 = run_cmd(cmd, out, sizeof(out));
    check(r1 == 0 && count_lines(notes) == 1, "run folder: a folder holding only the user's files is not another run's", "exit %d", r1);
    // a folder nothing can be written in: refused before the evaluation is computed
    snprintf(cmd, sizeof(cmd), "%s --eval_only --resume %s --eval_len 64 --eval_n 2 --out_dir /proc/self", SMALL, p);
    rc = run_cmd(cmd, out, sizeof(out));
    check(rc == 1 && strstr(out, "cannot write in '/proc/self'") && !strstr(out, "in_dist"),
          "run folder: an unwritable --out_dir is refused before the evaluation", "exit %d", rc);
}

// Runs cmd as a child of its own (sh execs the trainer) and returns its exit status; *mib
// gets the child's peak resident memory.
static int run_measured(const char *cmd, char *out, size_t n, double *mib) {
    char full[2300];
    snprintf(full, sizeof(full), "exec %s > %s/measured.log 2>&1", cmd, TMP);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", full, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    wait4(pid, &st, 0, &ru);
    *mib = ru.ru_maxrss / 1024.0;
    char log[300];
    snprintf(log, sizeof(log), "%s/measured.log", TMP);
    FILE *f = fopen(log, "r");
    size_t got = f ? fread(out, 1, n - 1, f) : 0;
    out[got] = 0;
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Divergence, stale temporary files, and the memory estimate against the measured peak.
static void test_hostile_runs(void) {
    char cmd[2048], out[16384], p[512];
    // a window of 8 evaluated at 12 positions: a loss chart of 12 rows, no empty (nan) one; a
    // prompt that looks like a flag is a prompt; a tag and a folder with a quote and a backslash
    // give valid JSON strings
    snprintf(cmd, sizeof(cmd), "%s --seq_len 8 --steps 2 --eval_len 12 --eval_n 2 --gain_window 0 --indist_start 4 "
             "--out_dir %s/short_eval", SMALL, TMP);
    int rs = run_cmd(cmd, out, sizeof(out));
    check(rs == 0 && strstr(out, "     11-11     OOD") && !strstr(out, "nan"), "the loss chart of an evaluation shorter than 16 positions",
          "exit %d", rs);
    if (!cpu_trainer_only("--prompt -h is a prompt, not a request for help")) {
        snprintf(cmd, sizeof(cmd), "%s --resume %s/short_eval/checkpoint.bin --steps 0 --generate 3 --prompt -h", TRAINER, TMP);
        rs = run_cmd(cmd, out, sizeof(out));
        check(rs == 0 && strstr(out, "-h") && !strstr(out, "usage:"), "--prompt -h is a prompt, not a request for help", "exit %d", rs);
    }
    snprintf(cmd, sizeof(cmd), "%s --steps 1 --eval_len 64 --eval_n 2 --gain_window 0 --out_dir '%s/q\"uo\\te' --eval_tag 'a\"b'",
             SMALL, TMP);
    rs = run_cmd(cmd, out, sizeof(out));
    snprintf(p, sizeof(p), "%s/q\"uo\\te/a\"b.json", TMP);
    FILE *jf = fopen(p, "r");
    char json[4096] = "";
    if (jf) {
        json[fread(json, 1, sizeof(json) - 1, jf)] = 0;
        fclose(jf);
    }
    check(rs == 0 && strstr(json, "{\"tag\": \"a\\\"b\", \"run\": \"q\\\"uo\\\\te\","),
          "JSON strings escaped: a quote and a backslash in --eval_tag and --out_dir", "exit %d: %.80s", rs, json);
    // OMP_NUM_THREADS held to --threads' limit; the built-in corpus looked for from another folder
    int r0;
    if (!cpu_trainer_only("OMP_NUM_THREADS past the limit is refused")) {
        snprintf(cmd, sizeof(cmd), "OMP_NUM_THREADS=2000 %s --steps 1 --out_dir %s/omp", TRAINER, TMP);
        r0 = run_cmd(cmd, out, sizeof(out));
        check(r0 == 1 && strstr(out, "OMP_NUM_THREADS asks for 2000 threads, more than 1024"),
              "OMP_NUM_THREADS past the limit is refused", "exit %d", r0);
    }
    snprintf(cmd, sizeof(cmd), "cd /tmp && %s/%s --steps 1 --out_dir %s/%s/elsewhere", getcwd(p, sizeof(p)) ? p : ".",
             TRAINER[0] == '.' ? TRAINER + 2 : TRAINER, p, TMP);
    r0 = run_cmd(cmd, out, sizeof(out));
    check(r0 == 1 && strstr(out, "in /tmp (the path is relative to the current folder; the built-in corpus is data/builtin/"),
          "the built-in corpus looked for from another folder: the message says paths are relative", "exit %d", r0);
    // a learning rate that destroys the model: the step with a non-finite loss or gradient
    // norm is refused before its update, and the checkpoint on disk (saved every step) is finite
    snprintf(cmd, sizeof(cmd), "%s --lr 1e6 --min_lr 0 --warmup 0 --ckpt_every 1 --steps 30 --val_every 0 --out_dir %s/diverge", SMALL, TMP);
    int rc = run_cmd(cmd, out, sizeof(out));
    long bad_step = -1;
    char *e = strstr(out, "error: step ");
    if (e) sscanf(e, "error: step %ld", &bad_step);
    int finite = 1;
    uint64_t saved_step = 0;
    snprintf(p, sizeof(p), "%s/diverge/checkpoint.bin", TMP);
    if (rc == 1 && e) {
        TensorFile tf;
        tf_load(&tf, p, TF_KIND_CHECKPOINT);
        for (int i = 0; i < tf.n; i++)
            if (tf.t[i].dtype == TF_F32) finite &= first_nonfinite((const float *)tf.t[i].data, tf.t[i].numel) < 0;
        saved_step = ((const uint64_t *)tf_get(&tf, "meta.state", TF_U64, 5))[0];
        tf_free(&tf);
    }
    check(rc == 1 && strstr(out, "the update was not applied") && finite && (long)saved_step == bad_step - 1,
          "divergence stops before the update; the checkpoint on disk is the step before, all finite",
          "exit %d, failing step %ld, saved step %llu, finite %d", rc, bad_step, (unsigned long long)saved_step, finite);
    // a .tmp left by a killed save is removed when the next run starts
    snprintf(p, sizeof(p), "%s/stale", TMP);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/stale/checkpoint.bin.tmp", TMP);
    FILE *f = xfopen(p, "wb");
    fputs("half a checkpoint", f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s --steps 1 --out_dir %s/stale", SMALL, TMP);
    rc = run_cmd(cmd, out, sizeof(out));
    f = fopen(p, "rb");
    check(rc == 0 && !f && strstr(out, "left by an interrupted save"), "a stale checkpoint .tmp is removed at the next start", "exit %d", rc);
    if (f) fclose(f);
    // the printed estimate against the peak resident memory, training then evaluating
    if (getenv("SANITIZED")) {  // AddressSanitizer's shadow memory is not the trainer's
        skip("memory estimates against the measured peak", "a sanitizer build");
        return;
    }
    if (cpu_trainer_only("memory estimates against the measured peak")) return;
    const char *shapes[2] = {"--seq_len 512 --batch_size 32 --total_batch 32 --steps 1 --eval_len 0",  // training dominates
                             "--n_embd 128 --ffn_hidden 2048 --batch_size 1 --total_batch 1 --steps 1 --eval_len 4096 --eval_n 1 "
                             "--gain_window 0 --passkey_lengths 300 --passkey_n 2"};  // evaluation dominates
    for (int k = 0; k < 2; k++) {
        snprintf(cmd, sizeof(cmd), "%s %s --out_dir %s/mem%d", SMALL, shapes[k], TMP, k);
        double measured = 0, est = -1;
        rc = run_measured(cmd, out, sizeof(out), &measured);
        char *m = strstr(out, "host memory: ");
        if (m) sscanf(m, "host memory: %lf GiB", &est);
        est *= 1024;  // MiB
        char label[128];
        snprintf(label, sizeof(label), "memory estimate of run %d: within 25%% of the measured peak (plus 32 MiB of code and threads)", k + 1);
        check(rc == 0 && measured <= est * 1.25 + 32 && est <= measured * 1.25 + 32, label, "estimate %.1f MiB, measured %.1f MiB", est,
              measured);
    }
}

// ----------------------------------------------------------------------------
// 6b. Hugging Face interop (doc/huggingface.md): --resume and --init_from take the model
// from the checkpoint (a non-preset shape needs no flags, a contradicting flag is an error),
// and YaRN's ramp bounds are clamped as Hugging Face clamps them.

static void test_checkpoint_adoption(void) {
    char cmd[2048], out[8192], a[512], b[512], ck[512], eps_ck[512];
    snprintf(ck, sizeof(ck), "%s/full/checkpoint.bin", TMP);  // test_resume's: C 32, L 2, NH 4, NKV 2, F 64, T 32
    char ev[128];
    snprintf(ev, sizeof(ev), "--eval_len 96 --eval_n 2 --gain_window 16 --indist_start 8 --threads %d", THREADS);
    snprintf(cmd, sizeof(cmd), "%s --resume %s --eval_only %s --out_dir %s/adopt --eval_tag flags", SMALL, ck, ev, TMP);
    int r1 = run_cmd(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s --resume %s --eval_only %s --out_dir %s/adopt --eval_tag bare", TRAINER, ck, ev, TMP);
    int r2 = run_cmd(cmd, out, sizeof(out));
    snprintf(a, sizeof(a), "%s/adopt/flags.csv", TMP);
    snprintf(b, sizeof(b), "%s/adopt/bare.csv", TMP);
    check(r1 == 0 && r2 == 0 && files_equal(a, b) && strstr(out, "C=32 L=2 NH=4 NKV=2 hd=8 F=64 T=32"),
          "--eval_only takes a non-preset model from the checkpoint: no shape flags, the same evaluation", "exit %d %d", r1, r2);
    if (!cpu_trainer_only("--generate takes the model from the checkpoint")) {
        char with_flags[8192];
        snprintf(cmd, sizeof(cmd), "%s --resume %s --steps 0 --generate 20 --prompt 'The '", SMALL, ck);
        int r3 = run_cmd(cmd, with_flags, sizeof(with_flags));
        snprintf(cmd, sizeof(cmd), "%s --resume %s --steps 0 --generate 20 --prompt 'The ' --threads %d", TRAINER, ck, THREADS);
        int r4 = run_cmd(cmd, out, sizeof(out));
        const char *ga = strstr(with_flags, "\nThe "), *gb = strstr(out, "\nThe ");
        check(r3 == 0 && r4 == 0 && ga && gb && strcmp(ga, gb) == 0, "--generate takes the model from the checkpoint", "exit %d %d",
              r3, r4);
    }
    snprintf(cmd, sizeof(cmd), "%s --init_from %s --steps 1 --batch_size 2 --total_batch 2 --eval_len 0 --val_every 0 --threads %d "
             "--pos posaug --out_dir %s/adopt_init", TRAINER, ck, THREADS, TMP);
    int r5 = run_cmd(cmd, out, sizeof(out));
    check(r5 == 0 && strstr(out, "C=32 L=2 NH=4 NKV=2 hd=8 F=64 T=32") && strstr(out, "step     1/1"),
          "--init_from takes the model from the checkpoint", "exit %d", r5);
    // a flag or a preset that says otherwise is refused before anything runs
    const char *bad[][2] = {{"--n_head 2", "it has --n_head 4, this run has 2 (--n_head; without it the checkpoint's model is used)"},
                            {"--model 10m", "it has --n_embd 32, this run has 384 (--model 10m; without it"},
                            {"--rope_base 500000", "was trained with --rope_base 10000, this run has 500000"}};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof(cmd), "%s --resume %s --eval_only %s %s", TRAINER, ck, ev, bad[i][0]);
        int rc = run_cmd(cmd, out, sizeof(out));
        char label[128];
        snprintf(label, sizeof(label), "a checkpoint's model contradicted by %s: a clear error", bad[i][0]);
        check(rc == 1 && strstr(out, bad[i][1]) && !strstr(out, "loaded "), label, "exit %d: %.200s", rc, out);
    }
    // the RMSNorm eps is the checkpoint's too (an imported model may have another)
    snprintf(eps_ck, sizeof(eps_ck), "%s/adopt/eps.bin", TMP);
    rewrite_tensor(ck, eps_ck, "meta.config_f", 1, 1e-6f, 0);
    char out_dir[512];
    snprintf(out_dir, sizeof(out_dir), "%s/adopt", TMP);
    char *argv[] = {"train_gpt_cpu", "--init_from", eps_ck, "--out_dir", out_dir};
    Config c;
    parse_args(&c, 5, argv);
    check(c.rms_eps == 1e-6f && c.C == 32 && c.L == 2 && c.NH == 4 && c.NKV == 2 && c.F == 64 && c.T == 32 && c.Vp == 384 &&
          c.eval_len == 8 * 32 && !strcmp(c.model, "tiny") && c.lr == 3e-3f,
          "parse_args: the checkpoint's shape, base and eps; the default eval length from its window; --model's hyperparameters",
          "eps %g C %d T %d eval_len %d", c.rms_eps, c.C, c.T, c.eval_len);
}

// The sinusoids scale the token embedding by sqrt(C) (embed_scale), and the checkpoint keeps
// the factor: one from before it was recorded (no meta.embed_scale) is evaluated and resumed
// with the factor 1 it was trained with, and says so.
static float ckpt_embed_scale_of(const char *path) {
    TensorFile tf;
    tf_load(&tf, path, TF_KIND_CHECKPOINT);
    const TensorEntry *e = tf_find(&tf, "meta.embed_scale");
    float v = e ? ((const float *)e->data)[0] : -1.0f;
    tf_free(&tf);
    return v;
}

static void test_embed_scale(void) {
    char cmd[4096], out[16384], dir[512], ck[600], old[600], bad[600];
    snprintf(dir, sizeof(dir), "%s/embed_scale", TMP);
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s && %s --steps 2 --eval_len 0 --val_every 0 --pe sinusoidal --out_dir %s/new && "
             "%s --steps 2 --eval_len 0 --val_every 0 --out_dir %s/rope", dir, dir, SMALL, dir, SMALL, dir);
    int r0 = run_cmd(cmd, out, sizeof(out));
    snprintf(ck, sizeof(ck), "%s/new/checkpoint.bin", dir);
    char rope_ck[600];
    snprintf(rope_ck, sizeof(rope_ck), "%s/rope/checkpoint.bin", dir);
    float s_sin = ckpt_embed_scale_of(ck), s_rope = ckpt_embed_scale_of(rope_ck);
    check(r0 == 0 && s_sin == sqrtf(32.0f) && s_rope == 1.0f, "the checkpoint keeps the embedding's factor: sqrt(C) with --pe sinusoidal, 1 with RoPE",
          "exit %d, %g %g", r0, s_sin, s_rope);
    snprintf(old, sizeof(old), "%s/old/checkpoint.bin", dir);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s/old", dir);
    run_cmd(cmd, NULL, 0);
    copy_without(ck, old, "meta.embed_scale");
    snprintf(cmd, sizeof(cmd), "%s --resume %s --steps 3 --threads %d", TRAINER, old, THREADS);
    int r1 = run_cmd(cmd, out, sizeof(out));
    float s_old = ckpt_embed_scale_of(old);
    check(r1 == 0 && strstr(out, "was trained before --pe sinusoidal scaled the token embedding") && s_old == 1.0f,
          "a sinusoidal checkpoint from before the factor resumes with the 1 it was trained with, and says so", "exit %d, %g", r1, s_old);
    snprintf(bad, sizeof(bad), "%s/bad.bin", dir);
    rewrite_tensor(ck, bad, "meta.embed_scale", 0, -1.0f, 0);
    snprintf(cmd, sizeof(cmd), "%s --resume %s --eval_only --eval_len 64 --eval_n 1 --indist_start 8 --out_dir %s/badrun", TRAINER, bad, dir);
    int r2 = run_cmd(cmd, out, sizeof(out));
    check(r2 == 1 && strstr(out, "is corrupt: meta.embed_scale is -1; it can be 1 or sqrt(C)"), "a damaged meta.embed_scale is refused",
          "exit %d", r2);
}

// A TUPE checkpoint from before its released code's form (no LayerNorm on wpe, no query
// bias, a relative bias per layer) is refused by name, for --resume, evaluation and
// --init_from alike, and --init_from leaves no run folder.
static void test_tupe_old_checkpoint(void) {
    char cmd[4096], out[16384], dir[512], ck[600], old[600];
    snprintf(dir, sizeof(dir), "%s/tupe_old", TMP);
    snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s && %s --steps 2 --eval_len 0 --val_every 0 --pe tupe --pos rope --wpe_rows 64 --out_dir %s/new",
             dir, dir, SMALL, dir);
    int r0 = run_cmd(cmd, out, sizeof(out));
    snprintf(ck, sizeof(ck), "%s/new/checkpoint.bin", dir);
    snprintf(old, sizeof(old), "%s/old.bin", dir);
    if (r0 == 0) copy_without(ck, old, "param.tupe_ln_");
    const char *how[3] = {"--resume %s --steps 3", "--resume %s --eval_only --eval_len 64 --eval_n 1 --indist_start 8",
                          "--init_from %s --pe tupe --wpe_rows 64 --steps 3 --eval_len 0"};
    int refused = 0;
    for (int i = 0; i < 3; i++) {
        char flags[800];
        snprintf(flags, sizeof(flags), how[i], old);
        snprintf(cmd, sizeof(cmd), "%s %s --threads %d --out_dir %s/run%d", TRAINER, flags, THREADS, dir, i);
        int r = run_cmd(cmd, out, sizeof(out));
        char run[600];
        snprintf(run, sizeof(run), "%s/run%d", dir, i);
        refused += r == 1 && strstr(out, "made before TUPE followed its released code") && access(run, F_OK) != 0;
    }
    check(r0 == 0 && refused == 3, "a TUPE checkpoint of the old form is refused by name (--resume, --eval_only, --init_from), no folder made",
          "exit %d, %d of 3 refused", r0, refused);
}

// A copy of checkpoint src in an earlier form of one learned bias: tensor <group>.<name> of each
// group (the weights, both moments) renamed <group>.<as>, at `shape` (ndim 0: its own; the rows
// added are zeros: the loader refuses the form by name and shape before it reads a value).
static void copy_old_bias_form(const char *src, const char *dst, const char *name, const char *as, int ndim, const int *shape) {
    char from[TF_MAX_NAME], to[TF_MAX_NAME];
    for (int g = 0; g < 3; g++) {
        snprintf(from, sizeof(from), "%s.%s", CK_GROUPS[g], name);
        snprintf(to, sizeof(to), "%s.%s", CK_GROUPS[g], as);
        TensorEdit ed = {from, to, 0, ndim, shape, 0, 0.0f, 0};
        rewrite_with(g ? dst : src, dst, ed);
    }
}

// A trainer's checkpoint holds each learned bias in its form (KERPLE's r1, r2 (1, NH), one set
// for the 2 layers of SMALL_FLAGS' model; FIRE's multiplier (L)), and a checkpoint of an
// earlier form is refused by the name of its tensor, for --resume, evaluation and --init_from
// (into the same encoding or another) alike, with no run folder made: KERPLE's r1, r2 one set
// per layer (before they were shared by the layers), FIRE's threshold learned as L itself
// (fire_thresh, before fire_l_mult).
static void test_bias_old_checkpoints(void) {
    static const int per_layer[2] = {2, 4};  // (L, NH): one set per layer
    struct { const char *pe, *tensor, *as, *said; int rows, cols, old_ndim; } cases[] = {
        {"kerple", "kerple_r1", "kerple_r1", "with one kerple_r1 per layer (2 of them)", 1, 4, 2},
        {"kerple-power", "kerple_pow_r2", "kerple_pow_r2", "with one kerple_pow_r2 per layer (2 of them)", 1, 4, 2},
        {"fire", "fire_l_mult", "fire_thresh", "it has no fire_l_mult", 2, 0, 0},
    };
    char cmd[4096], out[16384], dir[512], ck[600], old[600];
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        if (!wants(cases[k].pe) && !wants("checkpoints")) continue;
        snprintf(dir, sizeof(dir), "%s/bias_old_%s", TMP, cases[k].pe);
        snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -p %s && %s --steps 2 --eval_len 0 --val_every 0 --pe %s --out_dir %s/new",
                 dir, dir, SMALL, cases[k].pe, dir);
        int r0 = run_cmd(cmd, out, sizeof(out));
        snprintf(ck, sizeof(ck), "%s/new/checkpoint.bin", dir);
        snprintf(old, sizeof(old), "%s/old.bin", dir);
        if (r0 == 0) copy_old_bias_form(ck, old, cases[k].tensor, cases[k].as, cases[k].old_ndim, per_layer);
        int shaped = 0, want_dims = cases[k].cols ? 2 : 1;
        if (r0 == 0) {
            TensorFile tf;
            tf_load(&tf, ck, TF_KIND_CHECKPOINT);
            char name[TF_MAX_NAME];
            for (int g = 0; g < 3; g++) {  // the weights and both moments
                snprintf(name, sizeof(name), "%s.%s", CK_GROUPS[g], cases[k].tensor);
                const TensorEntry *e = tf_find(&tf, name);
                shaped += e && e->ndim == want_dims && e->shape[0] == cases[k].rows && (want_dims == 1 || e->shape[1] == cases[k].cols);
            }
            tf_free(&tf);
        }
        char slabel[160];
        snprintf(slabel, sizeof(slabel), "--pe %s: the trainer's checkpoint holds %s as (%d%s%.0d)", cases[k].pe,
                 cases[k].tensor, cases[k].rows, cases[k].cols ? ", " : "", cases[k].cols);
        check(shaped == 3, slabel, "%d of 3 (param, adam_m, adam_v) of that shape", shaped);
        const char *how[4] = {"--resume %s --steps 3", "--resume %s --eval_only --eval_len 64 --eval_n 1 --indist_start 8",
                              "--init_from %s --pe %s --steps 3 --eval_len 0", "--init_from %s --pe alibi --steps 3 --eval_len 0"};
        int refused = 0;
        for (int i = 0; i < 4; i++) {
            char flags[800], run[600];
            snprintf(flags, sizeof(flags), how[i], old, cases[k].pe);
            snprintf(run, sizeof(run), "%s/run%d", dir, i);
            snprintf(cmd, sizeof(cmd), "%s %s --threads %d --out_dir %s", TRAINER, flags, THREADS, run);
            int r = run_cmd(cmd, out, sizeof(out));
            refused += r == 1 && strstr(out, cases[k].said) && strstr(out, "train it again") && access(run, F_OK) != 0;
        }
        char label[200];
        snprintf(label, sizeof(label), "--pe %s: a checkpoint with %s of the earlier form is refused by name (--resume, "
                 "--eval_only, --init_from into it and into ALiBi), no folder made", cases[k].pe, cases[k].as);
        check(r0 == 0 && refused == 4, label, "exit %d, %d of 4 refused: %.300s", r0, refused, out);
    }
}

// The learned biases' starts as their released code (FIRE: its PyTorch port) has them: TUPE's
// relative-bias table drawn N(0, 0.02), as BERT's init draws every embedding (eRPE's table
// stays 0); FIRE's threshold m L0 at m = 1 and L0 = 512 whatever the window, so a query at
// position 100 of a window of 128 normalizes the distance 50 by psi(512): x = ln(0.1 * 50 + 1) /
// ln(0.1 * 512 + 1) = ln 6 / ln 52.2 (with L at the window it would be ln 6 / ln 13.8).
static void test_bias_inits(void) {
    if (wants("tupe") || wants("erpe")) {
        double sum[2] = {0, 0}, sq[2] = {0, 0};
        size_t n[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            GPT g;
            small_gpt(&g, k ? PE_ERPE : PE_TUPE, 8);
            for (uint64_t seed = 1; seed <= 8; seed++) {  // 8 x 128 TUPE draws: the std within 5% (2 s.e.)
                gpt_init(&g, seed);
                for (size_t j = 0; j < g.shapes[P_ATTN_BIAS].numel; j++, n[k]++)
                    sum[k] += g.params[P_ATTN_BIAS][j], sq[k] += (double)g.params[P_ATTN_BIAS][j] * g.params[P_ATTN_BIAS][j];
            }
            gpt_free(&g);
        }
        double mean = sum[0] / n[0], sd = sqrt(sq[0] / n[0] - mean * mean);
        check(n[0] == 8 * 128 && fabs(sd - 0.02) < 0.001 && fabs(mean) < 0.0015 && sq[1] == 0,
              "--pe tupe's relative-bias table starts N(0, 0.02) as its code's BERT init; eRPE's at 0",
              "TUPE over %zu draws: mean %.5f, std %.5f; eRPE's sum of squares %g", n[0], mean, sd, sq[1]);
    }
    if (wants("fire")) {
        GPT g;
        small_gpt(&g, PE_FIRE, 128);
        gpt_init(&g, 1);
        BiasFn f;
        memset(&f, 0, sizeof(f));
        f.w[BP_FIRE_C] = g.params[P_FIRE_C];
        f.w[BP_FIRE_L_MULT] = g.params[P_FIRE_L_MULT];
        float D, x = fire_input(&f, 100.0f, 50.0f, &D), want = (float)(log(6.0) / log(52.2));
        check(g.params[P_FIRE_L_MULT][0] == 1.0f && g.params[P_FIRE_L_MULT][1] == 1.0f && fabsf(x - want) < 1e-6f * want,
              "--pe fire: L = m * 512 from m = 1 at a window of 128 (the port's init_L): query 100, distance 50 at "
              "ln 6 / ln 52.2", "m %g %g, x %.7f against %.7f", g.params[P_FIRE_L_MULT][0], g.params[P_FIRE_L_MULT][1], x,
              want);
        gpt_free(&g);
    }
}

static void test_yarn_bounds(const char *ref_path) {
    TensorFile tf;
    tf_load(&tf, ref_path, TF_KIND_REFERENCE);
    int checked = 0, bad = 0;
    for (int i = 0; i < tf.n; i++) {  // <prefix>yarn_s<s>.low_high, the set's [hd, base, w] in <prefix>config
        const char *name = tf.t[i].name, *y = strstr(name, "yarn_s");
        if (!y || !strstr(y, ".low_high")) continue;
        char cfg_name[160];
        snprintf(cfg_name, sizeof(cfg_name), "%.*sconfig", (int)(y - name), name);
        const float *set = (const float *)tf_get(&tf, cfg_name, TF_F32, 3);
        const int32_t *want = (const int32_t *)tf_get(&tf, name, TF_I32, 2);
        int low, high;
        yarn_low_high((int)set[0], set[1], (int)set[2], 32.0, 1.0, &low, &high);
        bad += low != want[0] || high != want[1];
        checked++;
    }
    int low, high;  // the long set: hd 32, base 500, w 4096, where high passes the last rotary dimension
    yarn_low_high(32, 500.0, 4096, 32.0, 1.0, &low, &high);
    check(checked >= 4 && !bad && low == 7 && high == 17,
          "YaRN ramp bounds as Hugging Face's (high clamped to hd-1, not hd/2-1: 17 for hd 32, B 500, w 4096)",
          "%d sets, %d differ; long set %d %d", checked, bad, low, high);
    tf_free(&tf);
}

// ----------------------------------------------------------------------------
// 7. GPU vs CPU: both trainers' --dump_case on the same case files, compared by name.
// Cases: the PyTorch reference (GQA, alphas with 8, accumulation) and a long window
// (T 512, alpha 8: angles to 4088 rad).

// A case file for --dump_case (random tokens, this project's init): the encoding pe,
// QK-norm, and scheme >= 0 for a scheduled case (positions from pos_schedule_step; -1: the
// alphas 8, 1/8, 8, 2).
// hd 16 (C 64, 4 heads over 2 KV heads) or 64 (C 128, 2 heads over 1: MQA, the 10m's head size)
// The model of a case written here: head dim hd, NH query and NKV key/value heads (C = NH hd,
// F = 2C), 2 layers, V 257, micro-batches of 2 sequences, 2 per step
static void case_model(Config *c, int T, int pe, int qk_norm, int scheme, int rpe_layers, int hd, int NH, int NKV) {
    config_defaults(c);
    c->V = 257; c->C = NH * hd; c->L = 2; c->NH = NH; c->NKV = NKV; c->F = 2 * c->C; c->T = T; c->B = 2;
    c->total_batch = 2 * c->B;
    c->pe = pe; c->qk_norm = qk_norm; c->rpe_max = 8 * T; c->pos_scheme = scheme < 0 ? POS_ROPE : scheme;
    c->rpe_layers = rpe_layers;
    round_vocab(c);
}

static void write_case(const char *path, int T, int pe, int qk_norm, int scheme, int rpe_layers, int hd, int NH, int NKV) {
    Config c;
    case_model(&c, T, pe, qk_norm, scheme, rpe_layers, hd, NH, NKV);
    int micro = c.total_batch / c.B, steps = 4, warmup = 2;
    int32_t ci[12] = {c.V, c.Vp, c.C, c.L, c.NH, c.NKV, c.F, c.T, c.B, micro, steps, warmup};
    float cf[10] = {c.rope_base, c.rms_eps, 3e-3f, 3e-4f, c.weight_decay, c.beta1, c.beta2, c.adam_eps, c.grad_clip, 8.0f};
    float alphas[4] = {8.0f, 0.125f, 8.0f, 2.0f};
    int32_t kind = pe, qk = qk_norm, sched[2] = {scheme, rpe_layers};
    size_t ntok = (size_t)steps * micro * c.B * (c.T + 1);
    int *tokens = (int *)xmalloc(ntok * sizeof(int));
    Rng r = rng_make(21, 21);
    for (size_t i = 0; i < ntok; i++) tokens[i] = (int)rng_below(&r, (uint32_t)c.V);
    GPT g;
    gpt_alloc(&g, &c, 0);
    gpt_init(&g, 3);
    for (size_t j = 0; j < g.shapes[P_ATTN_BIAS].numel; j++) g.params[P_ATTN_BIAS][j] = 0.5f * rng_normal(&r);  // read from the start
    int present = 0;
    for (int i = 0; i < NP; i++) present += g.shapes[i].numel > 0;
    TensorWriter w;
    tw_open(&w, path, TF_KIND_REFERENCE, 6 + (scheme >= 0) + present);
    tw_add1(&w, "config_i", TF_I32, 12, ci);
    tw_add1(&w, "config_f", TF_F32, 10, cf);
    tw_add1(&w, "pos_kind", TF_I32, 1, &kind);
    tw_add1(&w, "qk_norm", TF_I32, 1, &qk);
    if (scheme >= 0) tw_add1(&w, "pos_scheme", TF_I32, 2, sched);
    tw_add1(&w, "alphas", TF_F32, steps, alphas);
    int tshape[4] = {steps, micro, c.B, c.T + 1};
    tw_add(&w, "tokens", TF_I32, 4, tshape, tokens);
    for (int i = 0; i < NP; i++)
        if (g.shapes[i].numel) tw_add(&w, PARAM_NAMES[i], TF_F32, g.shapes[i].ndim, g.shapes[i].shape, g.params[i]);
    tw_close(&w);
    gpt_free(&g);
    free(tokens);
}

// The numeric columns of an evaluation CSV (header skipped), row-major into out; returns rows.
static int read_csv(const char *path, double *out, int max_rows, int cols) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[4096];
    int rows = 0;
    if (!fgets(line, sizeof(line), f)) { fclose(f); return 0; }
    while (rows < max_rows && fgets(line, sizeof(line), f)) {
        char *p = line;
        for (int c = 0; c < cols; c++) {
            out[(size_t)rows * cols + c] = strtod(p, &p);
            if (*p == ',') p++;
        }
        rows++;
    }
    fclose(f);
    return rows;
}

// GPU evaluation vs CPU evaluation of the same checkpoint: every CSV column (the folders
// numbered by build: a second evaluation into a folder would be refused as another run's)
// The evaluation (the forward-only attention: a KV cache for the chunked gain, windows for the
// banded one, the entropy) GPU against CPU for every position term, one case per --pe: a
// checkpoint of a few CPU steps with it, evaluated past its window by both. A --pe without a
// row fails test_eval_cases_cover; the GRU's case is compare_gpu_eval_gru.
static const struct {
    int pe;
    const char *flags;  // after SMALL's (--pos posaug) and --pe: what the encoding needs (integer positions, rows to 128)
} EVAL_CASES[] = {
    {PE_ROPE, ""}, {PE_NOPE, "--pos rope"}, {PE_ALIBI, ""}, {PE_SINUSOIDAL, ""},
    {PE_LEARNED, "--pos rope --wpe_rows 128"}, {PE_ERPE, ""}, {PE_T5, ""}, {PE_TAPE, "--pos rope"},
    {PE_SHAW, "--pos rope"}, {PE_TPE, ""}, {PE_TUPE, "--pos rope --wpe_rows 128"}, {PE_KERPLE, ""}, {PE_FIRE, ""},
    {PE_XPOS, ""}, {PE_KERPLE_POWER, ""},
};
#define N_EVAL_CASES (int)(sizeof(EVAL_CASES) / sizeof(EVAL_CASES[0]))
static const char *EVAL_CASE_FLAGS = "--eval_only --eval_len 128 --eval_n 2 --gain_window 16 --gain_lengths 64,128";

static void test_eval_cases_cover(void) {
    char missing[512] = "";
    for (int pe = 0; pe < PE_N; pe++) {
        int found = 0;
        for (int k = 0; k < N_EVAL_CASES; k++) found |= EVAL_CASES[k].pe == pe;
        if (!found) snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " --pe %s", PE_NAMES[pe]);
    }
    char detail[600];
    if (missing[0]) snprintf(detail, sizeof(detail), "none for%s", missing);
    else snprintf(detail, sizeof(detail), "%d cases", N_EVAL_CASES);
    check(!missing[0], "every --pe has a GPU-vs-CPU evaluation case (EVAL_CASES)", "%s", detail);
}

// Case k's checkpoint and CPU evaluation (always: the commands a GPU run would use are checked
// here); returns 1 when both ran
static int eval_case_cpu(int k) {
    char cmd[2048], out[4096], label[160];
    const char *pe = PE_NAMES[EVAL_CASES[k].pe];
    snprintf(cmd, sizeof(cmd), "%s --steps 3 --warmup 1 --val_every 0 --pe %s %s --out_dir %s/evc_%s", SMALL, pe,
             EVAL_CASES[k].flags, TMP, pe);
    int r1 = run_cmd(cmd, out, sizeof(out));
    if (r1 == 0) {
        snprintf(cmd, sizeof(cmd), "%s --resume %s/evc_%s/checkpoint.bin %s --threads %d --out_dir %s/evc_%s_cpu", TRAINER,
                 TMP, pe, EVAL_CASE_FLAGS, THREADS, TMP, pe);
        r1 = run_cmd(cmd, out, sizeof(out));
    }
    snprintf(label, sizeof(label), "evaluation case --pe %s: a CPU checkpoint, evaluated at 4x its window", pe);
    check(r1 == 0, label, "exit %d%s%.400s", r1, r1 ? ": " : "", r1 ? out : "");
    return r1 == 0;
}

// ||a - b|| / ||b|| over column c of two CSVs read into rows of `cols` numbers
static double column_rel_err(const double *a, const double *b, int rows, int cols, int c) {
    double num = 0, den = 0;
    for (int i = 0; i < rows; i++) {
        double d = a[i * cols + c] - b[i * cols + c];
        num += d * d;
        den += b[i * cols + c] * b[i * cols + c];
    }
    return sqrt(num) / (sqrt(den) + 1e-30);
}

// Case k's evaluation on a GPU build against the CPU's: every column of the CSV
static void compare_gpu_eval(const char *gpu_bin, int build, const char *name, int k, double tol) {
    char cmd[2048], out[4096];
    const char *pe = PE_NAMES[EVAL_CASES[k].pe];
    snprintf(cmd, sizeof(cmd), "%s --resume %s/evc_%s/checkpoint.bin %s --out_dir %s/evc_%s_gpu%d", gpu_bin, TMP, pe,
             EVAL_CASE_FLAGS, TMP, pe, build);
    int r2 = run_cmd(cmd, out, sizeof(out));
    char label[200];
    snprintf(label, sizeof(label), "%s: evaluation of --pe %s", name, pe);
    if (r2) { check(0, label, "exit %d: %s", r2, out); return; }
    static double a[128 * 5], b[128 * 5];
    char pa[256], pb[256];
    snprintf(pa, sizeof(pa), "%s/evc_%s_cpu/eval_L128.csv", TMP, pe);
    snprintf(pb, sizeof(pb), "%s/evc_%s_gpu%d/eval_L128.csv", TMP, pe, build);
    int na = read_csv(pa, a, 128, 5), nb = read_csv(pb, b, 128, 5);
    const char *cols[5] = {"position", "loss", "loss_banded", "loss_chunked", "entropy"};
    for (int c = 1; c < 5; c++) {
        double e = column_rel_err(a, b, 128, 5, c);
        snprintf(label, sizeof(label), "%s: evaluation of --pe %s, column %s", name, pe, cols[c]);
        check(na == 128 && nb == 128 && e < tol, label, "rel err %.2e (tol %.0e)", e, tol);
    }
}

// The GRU's per-position losses from test_gru_runs' checkpoint, GPU against CPU.
static void compare_gpu_eval_gru(const char *gpu_bin, int build, const char *label, double tol) {
    char cmd[2048], out[4096], l[200];
    const char *eval = "--eval_only --eval_len 96 --eval_n 2 --indist_start 8";
    snprintf(cmd, sizeof(cmd), "%s --resume %s/gru_full/checkpoint.bin %s --out_dir %s/gru_eval_cpu%d", TRAINER, TMP, eval, TMP,
             build);
    int r1 = run_cmd(cmd, out, sizeof(out));
    snprintf(cmd, sizeof(cmd), "%s --resume %s/gru_full/checkpoint.bin %s --out_dir %s/gru_eval_gpu%d", gpu_bin, TMP, eval, TMP,
             build);
    int r2 = run_cmd(cmd, out, sizeof(out));
    snprintf(l, sizeof(l), "%s: GRU evaluation losses", label);
    if (r1 || r2) { check(0, l, "exit codes %d %d: %s", r1, r2, out); return; }
    static double a[96 * 3], b[96 * 3];
    char pa[256], pb[256];
    snprintf(pa, sizeof(pa), "%s/gru_eval_cpu%d/eval_L96.csv", TMP, build);
    snprintf(pb, sizeof(pb), "%s/gru_eval_gpu%d/eval_L96.csv", TMP, build);
    int na = read_csv(pa, a, 96, 3), nb = read_csv(pb, b, 96, 3);
    double e = column_rel_err(a, b, 96, 3, 1);
    check(na == 96 && nb == 96 && e < tol, l, "rel err %.2e (tol %.0e)", e, tol);
}

// Whether two dumps hold the same tensors: names, dtypes and shapes, in the same order.
static int dumps_same_layout(const char *a_path, const char *b_path) {
    TensorFile a, b;
    tf_load(&a, a_path, 0);
    tf_load(&b, b_path, 0);
    int same = a.n == b.n;
    for (int i = 0; same && i < a.n; i++) {
        same = strcmp(a.t[i].name, b.t[i].name) == 0 && a.t[i].dtype == b.t[i].dtype && a.t[i].ndim == b.t[i].ndim;
        for (int d = 0; same && d < a.t[i].ndim; d++) same = a.t[i].shape[d] == b.t[i].shape[d];
    }
    tf_free(&a);
    tf_free(&b);
    return same;
}

// The GPU-vs-CPU cases, one row each: the names they concern (--only), the label, a PyTorch
// file (NULL: the reference test_gpt was given) or, with no file, a case written here
// (write_case: T, --pe, --qk_norm, --pos (-1: the alphas), --rpe_layers independent, head
// dim, query and key/value heads); and what --attention flash says when it refuses the case's
// encoding (NULL: flash takes it; "": the case has no attention, one run). Append rows:
// trainer.sh names a case by its index. ./test_gpt --list shows each case's model as trainer
// flags; dev/cuda_emu/coverage.sh fails when a kernel variant the trainer picks is reached by none.
static const struct {
    const char *names, *label, *file;
    int T, pe, qk_norm, scheme, rpe_layers, hd, NH, NKV;
    const char *flash_refusal;
} GPU_CASES[] = {
    {"reference rope posaug", "reference case", NULL, 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"nope", "NoPE case", "dev/reference_nope.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"alibi posaug", "ALiBi+PosAug case", "dev/reference_alibi.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"sinusoidal", "sinusoidal APE case", "dev/reference_sinusoidal.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"learned", "learned APE case", "dev/reference_learned.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"qk-norm", "QK-norm case", "dev/reference_qknorm.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"gru", "GRU case", "dev/reference_gru.bin", 0, 0, 0, 0, 0, 0, 0, 0, ""},
    {"erpe", "eRPE case", "dev/reference_erpe.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"t5", "T5 bias case", "dev/reference_t5.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"tape", "tAPE case", "dev/reference_tape.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"shaw", "Shaw relative keys case", "dev/reference_shaw.bin", 0, 0, 0, 0, 0, 0, 0, 0,
     "does not take --pe shaw's relative keys"},
    {"rope", "long case", NULL, 512, PE_ROPE, 0, -1, 0, 16, 4, 2, NULL},
    {"rpe", "RPE per-layer case", NULL, 64, PE_ROPE, 0, POS_RPE, 1, 16, 4, 2, NULL},
    {"rfs", "RFS case", NULL, 64, PE_ROPE, 0, POS_RFS, 0, 16, 4, 2, NULL},
    {"sinusoidal rfs", "sinusoidal APE at RFS positions case", NULL, 64, PE_SINUSOIDAL, 0, POS_RFS, 0, 16, 4, 2, NULL},
    {"learned rpe qk-norm", "learned APE at RPE positions case", NULL, 64, PE_LEARNED, 1, POS_RPE, 0, 16, 4, 2, NULL},
    {"rope", "head dim 64 case (MQA, T 100)", NULL, 100, PE_ROPE, 0, -1, 0, 64, 2, 1, NULL},  // T off the flash tiles
    {"erpe posaug", "eRPE+PosAug case (T 80)", NULL, 80, PE_ERPE, 0, -1, 0, 16, 4, 2, NULL},
    {"pose", "RoPE at PoSE positions case", NULL, 64, PE_ROPE, 0, POS_POSE, 0, 16, 4, 2, NULL},
    {"tpe", "T-PE case", "dev/reference_tpe.bin", 0, 0, 0, 0, 0, 0, 0, 0, "does not take --pe tpe's relative keys"},
    {"tupe", "TUPE case", "dev/reference_tupe.bin", 0, 0, 0, 0, 0, 0, 0, 0, "does not take --pe tupe's untied positions"},
    {"kerple posaug", "KERPLE+PosAug case", "dev/reference_kerple.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"fire posaug", "FIRE+PosAug case", "dev/reference_fire.bin", 0, 0, 0, 0, 0, 0, 0, 0,
     "does not take --pe fire's bias of each query and key"},
    {"xpos posaug", "xPos+PosAug case", "dev/reference_xpos.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    {"kerple-power posaug", "KERPLE power+PosAug case", "dev/reference_kerple_power.bin", 0, 0, 0, 0, 0, 0, 0, 0, NULL},
    // the attention bias at head sizes of flash's variant 2 (hd 32, 64, 128), T off its tiles of
    // 64 (T5's past its largest distance, 128)
    {"alibi", "ALiBi case at hd 64 (GQA, T 100)", NULL, 100, PE_ALIBI, 0, -1, 0, 64, 4, 2, NULL},
    {"kerple", "KERPLE case at hd 64 (GQA, T 100)", NULL, 100, PE_KERPLE, 0, -1, 0, 64, 4, 2, NULL},
    {"t5", "T5 buckets case at hd 64 (GQA, T 130)", NULL, 130, PE_T5, 0, -1, 0, 64, 4, 2, NULL},
    {"alibi", "ALiBi case at hd 128 (MQA, T 100)", NULL, 100, PE_ALIBI, 0, -1, 0, 128, 2, 1, NULL},
    {"kerple", "KERPLE case at hd 128 (MQA, T 100)", NULL, 100, PE_KERPLE, 0, -1, 0, 128, 2, 1, NULL},
    {"t5", "T5 buckets case at hd 128 (MQA, T 130)", NULL, 130, PE_T5, 0, -1, 0, 128, 2, 1, NULL},
    {"alibi", "ALiBi case at hd 32 (GQA, T 100)", NULL, 100, PE_ALIBI, 0, -1, 0, 32, 4, 2, NULL},
    // C and hd/2 off the 128-bit pack: the variants' fallbacks (RMSNorm's backward v1, as at C > 1536; RoPE v1; flash v1)
    {"rope", "odd widths case (C 66, NH 3, hd 22, T 50)", NULL, 50, PE_ROPE, 0, -1, 0, 22, 3, 1, NULL},
};
#define N_GPU_CASES (int)(sizeof(GPU_CASES) / sizeof(GPU_CASES[0]))

// Case k's file into path (256 bytes): its PyTorch file, or the one written for it (returns 1)
static int gpu_case_path(char *path, int k, const char *ref) {
    int written = !GPU_CASES[k].file && k > 0;
    if (written) snprintf(path, 256, "%s/case%d.bin", TMP, k);
    else snprintf(path, 256, "%s", k == 0 ? ref : GPU_CASES[k].file);
    return written;
}

// Case k's model (k > 0): its PyTorch file's, or the one write_case writes for it
static void gpu_case_model(Config *c, int k) {
    if (!GPU_CASES[k].file) {
        case_model(c, GPU_CASES[k].T, GPU_CASES[k].pe, GPU_CASES[k].qk_norm, GPU_CASES[k].scheme, GPU_CASES[k].rpe_layers,
                   GPU_CASES[k].hd, GPU_CASES[k].NH, GPU_CASES[k].NKV);
        return;
    }
    TensorFile tf;
    int micro;
    tf_load(&tf, GPU_CASES[k].file, TF_KIND_REFERENCE);
    config_from_case(c, &tf, &micro);
    tf_free(&tf);
}

// --list's GPU cases: the attention paths each runs, its head size and its model as trainer
// flags (dev/cuda_emu/coverage.sh runs them to see which kernel variants the cases reach)
static void list_gpu_cases(void) {
    printf("GPU cases (GPU vs CPU, fp32 and bf16 builds; the model as trainer flags):\n");
    printf("gpu case 0: %s | the reference file test_gpt is given\n", GPU_CASES[0].label);
    for (int k = 1; k < N_GPU_CASES; k++) {
        Config c;
        gpu_case_model(&c, k);
        const char *refusal = GPU_CASES[k].flash_refusal;
        printf("gpu case %d: %s | ", k, GPU_CASES[k].label);
        if (!refusal || refusal[0]) printf("hd %d | --attention %s", c.C / c.NH, refusal ? "naive (flash refuses)" : "naive and flash");
        else printf("no attention");
        printf(" | --arch %s", ARCH_NAMES[c.arch]);
        if (c.arch == ARCH_TRANSFORMER)
            printf(" --pe %s --pos %s%s%s", PE_NAMES[c.pe], POS_SCHEME_NAMES[c.pos_scheme], c.qk_norm ? " --qk_norm" : "",
                   c.rpe_layers ? " --rpe_layers independent" : "");
        if (c.pos_scheme == POS_POSE) printf(" --pose_target %d", c.pose_target);
        printf(" --vocab_size %d --n_embd %d --n_layer %d --n_head %d --n_kv_head %d --ffn_hidden %d --seq_len %d "
               "--batch_size %d --total_batch %d\n",
               c.V, c.C, c.L, c.NH, c.NKV, c.F, c.T, c.B, c.total_batch);
    }
}

// The dump path itself, on the CPU: the binary's --dump_case on case k equals the in-process run
static void check_dump_binary(const char *path, int k) {
    char cpu_in[256], cpu_bin[256], cmd[1024], out[4096], label[160];
    snprintf(cpu_in, sizeof(cpu_in), "%s/cpu_case%d_inproc.bin", TMP, k);
    snprintf(cpu_bin, sizeof(cpu_bin), "%s/cpu_case%d_binary.bin", TMP, k);
    dump_case(path, cpu_in);
    snprintf(cmd, sizeof(cmd), "%s --dump_case %s %s", TRAINER, path, cpu_bin);
    int rc = run_cmd(cmd, out, sizeof(out));
    snprintf(label, sizeof(label), "CPU --dump_case on the %s", GPU_CASES[k].label);
    check(rc == 0 && files_equal(cpu_in, cpu_bin), label, "exit %d", rc);
}

static void test_gpu(const char *ref) {
    char out[4096];
    int has_gpu = run_cmd("nvidia-smi -L", out, sizeof(out)) == 0 && strstr(out, "GPU");
    const char *builds[2] = {"./train_gpt_fp32", "./train_gpt"};
    // a kernel that hangs fails its case instead of stopping the whole test
    const char *gpu_cmd[2] = {"timeout -k 5 60 ./train_gpt_fp32", "timeout -k 5 60 ./train_gpt"};
    const char *names[2] = {"GPU fp32 vs CPU", "GPU bf16 vs CPU"};
    Tolerances tols[2] = {TOL_FP32, TOL_BF16};
    char path[256];
    int first_written = -1, second_written = -1;
    for (int k = 0; k < N_GPU_CASES; k++) {
        int written = gpu_case_path(path, k, ref);
        if (!wants(GPU_CASES[k].names) && !wants("gpu")) continue;
        if (written)
            write_case(path, GPU_CASES[k].T, GPU_CASES[k].pe, GPU_CASES[k].qk_norm, GPU_CASES[k].scheme,
                       GPU_CASES[k].rpe_layers, GPU_CASES[k].hd, GPU_CASES[k].NH, GPU_CASES[k].NKV);
        check_dump_binary(path, k);
        if (!written) continue;
        if (first_written < 0) first_written = k;
        else if (second_written < 0 && (GPU_CASES[k].T != GPU_CASES[first_written].T || GPU_CASES[k].hd != GPU_CASES[first_written].hd))
            second_written = k;  // a case of another shape (--only may pick two of one)
    }
    if (second_written >= 0) {  // the layout comparison the flash-vs-naive GPU check relies on: two shapes
        char a[256], b2[256];
        snprintf(a, sizeof(a), "%s/cpu_case%d_inproc.bin", TMP, first_written);
        snprintf(b2, sizeof(b2), "%s/cpu_case%d_inproc.bin", TMP, second_written);
        check(dumps_same_layout(a, a) && !dumps_same_layout(a, b2), "dumps_same_layout tells equal layouts from different shapes", "");
    }
    int eval_ok[N_EVAL_CASES] = {0};
    if (wants("gpu eval")) {
        test_eval_cases_cover();
        for (int k = 0; k < N_EVAL_CASES; k++) eval_ok[k] = eval_case_cpu(k);
    }
    for (int b = 0; b < 2; b++) {
        char label[256];
        snprintf(label, sizeof(label), "%s", names[b]);
        if (!wants("gpu")) {
            int any = 0;
            for (int k = 0; k < N_GPU_CASES; k++) any |= wants(GPU_CASES[k].names);
            if (!any) continue;
        }
        if (!has_gpu) { skip(label, "no GPU on this machine"); continue; }
        FILE *f = fopen(builds[b] + 2, "rb");
        if (!f) { skip(label, "the CUDA build is missing (make cuda)"); continue; }
        fclose(f);
        for (int k = 0; k < N_GPU_CASES; k++) {
            if (!wants(GPU_CASES[k].names) && !wants("gpu")) continue;
            char cpu_out[256], gpu_out[2][256], cmd[8192];
            const char *refusal = GPU_CASES[k].flash_refusal;
            snprintf(cpu_out, sizeof(cpu_out), "%s/cpu_case%d_inproc.bin", TMP, k);  // check_dump_binary's, above
            gpu_case_path(path, k, ref);
            int ran[2] = {0, 0};
            for (int a = 0; a < (refusal && !refusal[0] ? 1 : ATTN_N); a++) {  // both training attention paths
                snprintf(gpu_out[a], sizeof(gpu_out[a]), "%s/gpu%d_case%d_%s.bin", TMP, b, k, ATTN_NAMES[a]);
                snprintf(cmd, sizeof(cmd), "%s --dump_case %s %s --attention %s", gpu_cmd[b], path, gpu_out[a],
                         ATTN_NAMES[a]);
                int rc = run_cmd(cmd, out, sizeof(out));
                snprintf(label, sizeof(label), "%s, %s, --attention %s", names[b], GPU_CASES[k].label, ATTN_NAMES[a]);
                if (refusal && a == ATTN_FLASH) {  // not taken yet: one refusal
                    check(rc != 0 && strstr(out, refusal), label, "refused: exit %d", rc);
                    continue;
                }
                if (rc != 0) { check(0, label, "exit %d: %s", rc, out); continue; }
                compare_dumps(label, gpu_out[a], cpu_out, tols[b]);
                ran[a] = 1;
            }
            if (ran[ATTN_NAIVE] && ran[ATTN_FLASH]) {
                snprintf(label, sizeof(label), "%s, %s: flash and naive dumps hold the same names and shapes", names[b],
                         GPU_CASES[k].label);
                check(dumps_same_layout(gpu_out[ATTN_FLASH], gpu_out[ATTN_NAIVE]), label, "");
            }
        }
        if (!wants("gpu eval")) continue;
        // bf16: the H200 gave 1.3-1.5e-4 on the loss columns at 357ceb0 (entropy 1.6e-7)
        for (int k = 0; k < N_EVAL_CASES; k++)
            if (eval_ok[k]) compare_gpu_eval(gpu_cmd[b], b, names[b], k, b == 0 ? 1e-5 : 1e-3);
        compare_gpu_eval_gru(gpu_cmd[b], b, names[b], b == 0 ? 1e-5 : 1e-3);
    }
}

// The groups of checks that are not one scheme's or encoding's (--only, --list); every name in
// main's calls below is a --pos or --pe name or one of these.
static const char *GROUPS[] = {"reference", "hook", "qk-norm", "drope", "gru", "metrics", "scaling", "eval", "files",
                               "kernels", "resume", "run-folders", "loss-masks", "checkpoints", "bad-inputs", "gpu"};
#define N_GROUPS (int)(sizeof(GROUPS) / sizeof(GROUPS[0]))

// The PyTorch files (dev/pytorch_reference.py --pos_kind ...): the names they concern, the file, the label
static const struct {
    const char *names, *file, *label;
} TORCH_FILES[] = {
    {"nope", "dev/reference_nope.bin", "CPU vs PyTorch, NoPE"},
    {"alibi posaug", "dev/reference_alibi.bin", "CPU vs PyTorch, ALiBi+PosAug"},
    {"sinusoidal posaug", "dev/reference_sinusoidal.bin", "CPU vs PyTorch, sinusoidal APE+PosAug"},
    {"learned", "dev/reference_learned.bin", "CPU vs PyTorch, learned APE"},
    {"erpe posaug", "dev/reference_erpe.bin", "CPU vs PyTorch, eRPE+PosAug"},
    {"t5 posaug", "dev/reference_t5.bin", "CPU vs PyTorch, T5 bias+PosAug"},
    {"tape posaug", "dev/reference_tape.bin", "CPU vs PyTorch, tAPE+PosAug"},
    {"shaw posaug", "dev/reference_shaw.bin", "CPU vs PyTorch, Shaw's relative keys+PosAug"},
    {"tpe posaug", "dev/reference_tpe.bin", "CPU vs PyTorch, T-PE+PosAug"},
    {"tupe", "dev/reference_tupe.bin", "CPU vs PyTorch, TUPE"},
    {"qk-norm", "dev/reference_qknorm.bin", "CPU vs PyTorch, QK-norm"},
    {"kerple posaug", "dev/reference_kerple.bin", "CPU vs PyTorch, KERPLE+PosAug"},
    {"fire posaug", "dev/reference_fire.bin", "CPU vs PyTorch, FIRE+PosAug"},
    {"gru", "dev/reference_gru.bin", "CPU vs PyTorch (torch.nn.GRU), GRU"},
    {"kerple-power posaug", "dev/reference_kerple_power.bin", "CPU vs PyTorch, KERPLE power+PosAug"},
    {"xpos posaug", "dev/reference_xpos.bin", "CPU vs PyTorch, xPos+PosAug"},
};

// Every encoding has its pieces beyond the trainer: its PyTorch file (dev/model_torch.py's
// ENCODINGS entry, written by make reference as dev/reference_<name>.bin, '-' as '_'; RoPE's is
// reference_tiny.bin), stored as its own index and compared here (a row of TORCH_FILES), and
// its section in doc/schemes.md (its flag, "--pe name").
static void test_encodings_complete(void) {
    char *doc = NULL;
    size_t doc_len = 0;
    FILE *f = fopen("doc/schemes.md", "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        doc_len = (size_t)ftell(f);
        fseek(f, 0, SEEK_SET);
        doc = (char *)xmalloc(doc_len + 1);
        doc[fread(doc, 1, doc_len, f)] = 0;
        fclose(f);
    }
    for (int pe = 0; pe < PE_N; pe++) {
        if (!wants(PE_NAMES[pe])) continue;
        char file[128], flag[64], label[160];
        if (pe == PE_ROPE) snprintf(file, sizeof(file), "dev/reference_tiny.bin");
        else snprintf(file, sizeof(file), "dev/reference_%s.bin", PE_NAMES[pe]);
        for (char *c = file + strlen("dev/"); *c; c++)
            if (*c == '-') *c = '_';
        int listed = pe == PE_ROPE, stored = -1;  // RoPE's file is the reference case's (test_reference)
        for (size_t i = 0; i < sizeof(TORCH_FILES) / sizeof(TORCH_FILES[0]); i++) listed |= strcmp(TORCH_FILES[i].file, file) == 0;
        if (access(file, F_OK) == 0) {
            TensorFile tf;
            tf_load(&tf, file, 0);
            const TensorEntry *e = tf_find(&tf, "pos_kind");
            stored = e ? ((const int32_t *)tf_get(&tf, "pos_kind", TF_I32, 1))[0] : PE_ROPE;
            tf_free(&tf);
        }
        snprintf(flag, sizeof(flag), "`--pe %s", PE_NAMES[pe]);
        snprintf(label, sizeof(label), "--pe %s has its PyTorch file, compared, and its doc section", PE_NAMES[pe]);
        check(stored == pe && listed && doc && strstr(doc, flag), label, "%s: %s%s; doc/schemes.md %s", file,
              stored < 0 ? "missing (make reference)" : stored != pe ? "another encoding's" : "present",
              listed ? ", in TORCH_FILES" : ", not in TORCH_FILES", doc && strstr(doc, flag) ? "names it" : "does not name it");
    }
    free(doc);
}

// --list: every name --only takes
static void list_names(void) {
    printf("--pos:");
    for (int i = 0; i < POS_N_SCHEMES; i++) printf(" %s", POS_SCHEME_NAMES[i]);
    printf("\n--pe:");
    for (int i = 0; i < PE_N; i++) printf(" %s", PE_NAMES[i]);
    printf("\ngroups:");
    for (int i = 0; i < N_GROUPS; i++) printf(" %s", GROUPS[i]);
    printf("\n");
    list_gpu_cases();
}

static int known_name(const char *name) {
    for (int i = 0; i < POS_N_SCHEMES; i++) if (strcmp(name, POS_SCHEME_NAMES[i]) == 0) return 1;
    for (int i = 0; i < PE_N; i++) if (strcmp(name, PE_NAMES[i]) == 0) return 1;
    for (int i = 0; i < N_GROUPS; i++) if (strcmp(name, GROUPS[i]) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    const char *ref = "dev/reference_tiny.bin";
    int ref_given = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) { list_names(); return 0; }
        if (strcmp(argv[i], "--only") == 0) {
            if (i + 1 >= argc) fail("--only takes a name (./test_gpt --list shows them)");
            ONLY = argv[++i];
            if (!known_name(ONLY)) fail("--only %s: no check concerns that name (./test_gpt --list shows them)", ONLY);
        } else if (argv[i][0] == '-') {
            fail("unknown flag %s (test_gpt takes [REFERENCE], --only NAME, --list)", argv[i]);
        } else {  // the reference file: one, and one that can be read
            struct stat sb;
            if (ref_given++) fail("test_gpt takes one REFERENCE file, got '%s' and '%s'", ref, argv[i]);
            if (stat(argv[i], &sb) != 0 || !S_ISREG(sb.st_mode) || access(argv[i], R_OK) != 0)
                fail("'%s' is neither a flag nor a reference file test_gpt can read (test_gpt takes [REFERENCE], --only "
                     "NAME, --list)%s%s", argv[i], known_name(argv[i]) ? "; the checks of that name: --only " : "",
                     known_name(argv[i]) ? argv[i] : "");
            ref = argv[i];
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);  // in order with the trainers' stderr
    if (getenv("TRAINER")) TRAINER = getenv("TRAINER");
    if (access(TRAINER, X_OK) != 0) fail("TRAINER=%s: not a trainer this can run (%s): make train_gpt_cpu first", TRAINER, strerror(errno));
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    THREADS = getenv("THREADS") ? (int)parse_int_in("THREADS (the trainer's threads)", getenv("THREADS"), 1, MAX_THREADS)
                                : (int)(cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : cpus);
    snprintf(SMALL, sizeof(SMALL), "%s %s --threads %d", TRAINER, SMALL_FLAGS, THREADS);
    mkdir(TMP, 0755);
    if (getenv("KERNELS_ONLY")) {  // dev/check_kernel_isas.sh: this build's GEMM and exp only
        test_kernels();
        printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
        return n_fail ? 1 : 0;
    }
    // a fresh folder: a run folder left by an earlier test run would be refused as another run's
    if (run_cmd("rm -rf test_tmp && mkdir test_tmp", NULL, 0) != 0) fail("cannot make a fresh '%s'", TMP);
    if (getenv("HOST_ONLY")) {  // dev/gpu_check.sh step o: the host code of TRAINER=./train_gpt on a GPU
        CUDA_TRAINER = 1;
        test_resume();
        test_resume_keeps_flags();
        test_run_folders();
        test_checkpoint_models();
        test_checkpoint_adoption();
        test_bad_inputs();
        test_hostile_runs();
        printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
        return n_fail ? 1 : 0;
    }
    if (wants("reference rope posaug")) test_reference(ref);
    for (int pe = 0; pe < PE_N; pe++)  // every encoding's gradient but NoPE's (no parameters of its own)
        if (pe != PE_NOPE && wants(PE_NAMES[pe])) test_finite_differences(ARCH_TRANSFORMER, pe, 0, FD_ALPHA, PE_NAMES[pe]);
    if (wants("qk-norm")) test_finite_differences(ARCH_TRANSFORMER, PE_ROPE, 1, FD_ALPHA, "QK-norm");
    if (wants("rpe")) test_finite_differences(ARCH_TRANSFORMER, PE_ROPE, 0, FD_RPE, "RoPE at RPE positions per layer");
    if (wants("learned rpe")) test_finite_differences(ARCH_TRANSFORMER, PE_LEARNED, 0, FD_RPE, "learned APE at RPE positions");
    if (wants("pose")) test_finite_differences(ARCH_TRANSFORMER, PE_ROPE, 0, FD_POSE_YARN, "PoSE + YaRN");
    if (wants("gru")) test_finite_differences(ARCH_GRU, PE_ROPE, 0, FD_ALPHA, "GRU");
    test_bounds();  // each encoding with a bounded tensor by its name
    if (wants("hook posaug posaug-log rope")) test_position_hook();
    if (wants("hook xpos")) test_xpos_rotation();
    if (wants("hook")) test_pass_positions();
    if (wants("hook alibi erpe shaw")) test_attn_bias();
    test_schemes();  // each check by its scheme
    for (size_t i = 0; i < sizeof(TORCH_FILES) / sizeof(TORCH_FILES[0]); i++)
        if (wants(TORCH_FILES[i].names)) test_reference_named(TORCH_FILES[i].file, TORCH_FILES[i].label);
    test_encodings_complete();  // each encoding by its name
    if (wants("metrics")) {
        test_metrics();
        test_eval_metrics();
    }
    if (wants("scaling")) test_scaling("dev/scaling_reference.bin");
    if (wants("eval")) {
        test_eval_passes();
        test_passkey();
        test_ruler();
        test_hellaswag();
        test_eval_data();
        test_eval_progress();
    }
    if (wants("files")) test_files();
    if (wants("kernels")) test_kernels();
    // test_resume's checkpoint (TMP/full) and test_checkpoint_models' (TMP/lq) serve later groups too
    if (wants("resume posaug checkpoints bad-inputs run-folders gpu")) test_resume();
    test_resume_keeps_flags();  // each scheme and encoding by its names
    if (wants("run-folders")) test_run_folders();
    test_every_scheme_runs();  // each by its name
    if (wants("gru gpu")) test_gru_runs();  // its checkpoint serves the GPU evaluation check too
    if (wants("pose")) test_pose_scaling_runs();
    if (wants("loss-masks")) test_loss_masks();
    if (wants("eval")) test_task_eval();
    if (wants("checkpoints learned qk-norm bad-inputs")) test_checkpoint_models();
    if (wants("bad-inputs")) test_bad_inputs();
    if (wants("run-folders")) test_hostile_runs();
    if (wants("checkpoints")) test_checkpoint_adoption();
    if (wants("checkpoints sinusoidal tape")) test_embed_scale();
    if (wants("checkpoints tupe")) test_tupe_old_checkpoint();
    if (wants("checkpoints kerple kerple-power fire")) test_bias_old_checkpoints();
    test_bias_inits();  // each part by its encoding
    if (wants("scaling")) test_yarn_bounds("dev/scaling_reference.bin");
    test_gpu(ref);  // each case by its names
    printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    return n_fail ? 1 : 0;
}
