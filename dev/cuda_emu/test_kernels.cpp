// dev/cuda_emu/test_kernels.cpp: the kernels of llmc/cuda/*.cuh (inlined by run.sh into
// kernels.inc, launches rewritten) run through emu.h against double-precision references.
// The launch shapes repeat the trainer's host functions (flash_forward_hd,
// flash_backward_hd, rmsnorm_backward), or the host functions themselves run
// (attention_forward_online, the tensor-core flash attention, the matmuls, the
// embeddings' scatter, the LM head with the classifier). Outputs start as NaN, so an element no thread writes fails; the
// tolerance is the fp32 one of test_gpt (norm-relative 1e-5), and TOL_BF16 for bf16
// outputs (references computed from the bf16-rounded inputs).
#include "../../llmc/config.h"
#include "../../llmc/rng.h"
#include "../../llmc/schedule.h"
#include "../../llmc/attn_bias.h"
#include "../../llmc/checkpoint.h"
#include "runtime.h"
// what llmc/cuda/cuda_common.cuh gives the kernels in the trainer
#define CUDA_FX CUDA_R_32F
static cublasHandle_t cublas;
static const float ONE = 1.0f, ZERO = 0.0f;
#define cublasCheck(x) do { if ((x) != CUBLAS_STATUS_SUCCESS) exit(1); } while (0)
#define cudaCheck(x) (void)(x)
static void *dmalloc(size_t bytes) { return calloc(bytes ? bytes : 1, 1); }
#define ENABLE_FP32
namespace fp32 {  // the kernels as the fp32 build compiles them (floatX = float)
typedef float floatX;
inline float to_f(float v) { return v; }
inline float to_x(float v) { return v; }
#include "kernels.inc"
}  // namespace fp32
#undef ENABLE_FP32
// the bf16 build: the same kernels compiled with floatX = __nv_bfloat16 (cuBLAS told so), and
// the tensor-core flash attention, which exists in that build only
#undef CUDA_FX
#define CUDA_FX CUDA_R_16BF
namespace bf16 {
typedef __nv_bfloat16 floatX;
inline float to_f(float v) { return v; }
inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
inline __nv_bfloat16 to_x(float v) { return __float2bfloat16(v); }
#include "kernels.inc"
}  // namespace bf16
using namespace fp32;

static int n_pass, n_fail;
static Rng rng = rng_make(2026, 11);

static std::vector<float> randn(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float &x : v) x = scale * rng_normal(&rng);
    return v;
}
// ||got - want|| / ||want|| (||got - want|| when want is 0, as dq and dk are at T 1),
// infinite when got holds a NaN
static double rel(const std::vector<float> &got, const std::vector<double> &want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); i++) {
        if (!std::isfinite(got[i])) return INFINITY;
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
// one line per case; output i passes below tols[i] (1e-5 for every output when tols is NULL)
static void report(const char *what, const char *names[], const double *errs, int n, const double *tols = NULL) {
    bool ok = true;
    char msg[512] = "";
    for (int i = 0; i < n; i++) {
        double tol = tols ? tols[i] : 1e-5;
        ok &= errs[i] < tol;
        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "%s%s %.1e", i ? ", " : "", names[i], errs[i]);
        if (tols) snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), " (tol %.0e)", tol);
    }
    printf("%s: %s: rel err %s%s\n", ok ? "PASS" : "FAIL", what, msg, tols ? "" : " (tol 1e-5)");
    (ok ? n_pass : n_fail)++;
}

// bf16 data: round-to-nearest-even conversions (emu.h), NaN as the poison
#define TOL_BF16 5e-3  // bf16 outputs: 8 significant bits, ~2e-3 per rounding (the outputs; P and dS in attention)
static const __nv_bfloat16 BF16_NAN = {0xFFFF};
static std::vector<__nv_bfloat16> to_bf16(const std::vector<float> &v) {
    std::vector<__nv_bfloat16> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = __float2bfloat16(v[i]);
    return r;
}
static std::vector<float> from_bf16(const std::vector<__nv_bfloat16> &v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = __bfloat162float(v[i]);
    return r;
}
static void round_bf16(std::vector<float> &v) { v = from_bf16(to_bf16(v)); }
static double slope(int h, int n) {  // llmc/schedule.h's alibi_slopes
    int c = 1;
    while (c * 2 <= n) c *= 2;
    return h < c ? exp2(-8.0 * (h + 1) / c) : exp2(-8.0 * (2 * (h - c) + 1) / (2 * c));
}

// ---- the attention-score hook of a case (llmc/attn_bias.h): ALiBi's slopes at alpha (0:
// none) as the host fills them, and with NB > 0 a learned bias per distance, term (NH,n), from
// a table of NB buckets (distance / 3, clipped), or (rel) relative keys rk (NB,hd) of those
// buckets, whose scores qrel (B,Tq,NH,NB) the kernels under test compute from q ----
struct TestBias {
    std::vector<float> slope, table, term, rk, qrel, pair;  // pair (NH,Tq,n_pair): a term of each query and key
    std::vector<int> bucket;
    int NB = 0, NH = 0, Tq = 0, n_pair = 0;
    AttnBias ab() const {
        AttnBias a;
        memset(&a, 0, sizeof(a));
        a.slope = slope.empty() ? nullptr : slope.data();
        a.term = term.empty() ? nullptr : term.data();
        a.qrel = qrel.empty() ? nullptr : qrel.data();
        a.bucket = NB ? bucket.data() : nullptr;
        a.NB = rk.empty() ? 0 : NB;
        a.n_dist = (int)bucket.size();
        a.NH = NH;
        a.Tq = Tq;
        if (!pair.empty()) {
            a.pair = pair.data();
            a.n_dist = n_pair;
        }
        return a;
    }
    double at(int h, int d) const {
        return (term.empty() ? 0.0 : (double)term[h * bucket.size() + d]) - (slope.empty() ? 0.0 : (double)slope[h] * d);
    }
    // the relative-key score of query row qt at distance d, q . rk[bucket] / sqrt(hd), in double
    double rel(const float *qt, int d, int hd) const {
        if (rk.empty()) return 0.0;
        double dot = 0;
        for (int c = 0; c < hd; c++) dot += (double)qt[c] * rk[(size_t)bucket[d] * hd + c];
        return dot / sqrt((double)hd);
    }
};
static TestBias test_bias(int NH, int n_dist, float alpha, int NB, int hd_rel = 0) {
    TestBias b;
    for (int h = 0; h < NH && alpha > 0; h++) b.slope.push_back((float)slope(h, NH) * alpha);
    b.NB = NB;
    b.NH = NH;
    if (NB) {
        if (hd_rel) b.rk = randn((size_t)NB * hd_rel, 2.0f);
        else b.table = randn((size_t)NH * NB, 2.0f);
        for (int d = 0; d < n_dist; d++) b.bucket.push_back(std::min(d / 3, NB - 1));
        for (int h = 0; h < NH && !hd_rel; h++)
            for (int d = 0; d < n_dist; d++) b.term.push_back(b.table[h * NB + b.bucket[d]]);
    }
    return b;
}
// tb's relative-key scores of the query rows q (B,Tq,NH,hd), by the kernel under test
static void rel_scores(TestBias &tb, const std::vector<float> &q, int B, int Tq, int hd) {
    tb.Tq = Tq;
    tb.qrel.assign((size_t)B * Tq * tb.NH * tb.NB, NAN);
    size_t rows = (size_t)B * Tq * tb.NH;
    emu_launch(dim3((rows * tb.NB + 255) / 256), dim3(256), 0,
               [&] { rel_key_scores_kernel(tb.qrel.data(), q.data(), tb.rk.data(), rows, hd, tb.NB); });
}
static const char *bias_name(float alpha, int NB, int rel = 0) {
    if (rel) return alpha > 0 ? ", ALiBi + relative keys" : ", relative keys";
    return NB ? (alpha > 0 ? ", ALiBi + a learned table" : ", a learned table") : alpha > 0 ? (alpha == 1 ? ", ALiBi" : ", ALiBi x alpha") : "";
}

// ---- causal GQA attention in double: y, lse, the probabilities P (B,NH,T,T), dq, dk, dv,
// and a learned table's gradient dtable (NH,NB) ----
struct AttRef {
    std::vector<double> y, lse, P, dq, dk, dv, dtable, drk;
};
static AttRef attention_reference(const std::vector<float> &q, const std::vector<float> &k, const std::vector<float> &v,
                                  const std::vector<float> &dy, int B, int T, int NH, int NKV, int hd, const TestBias &tb) {
    size_t nq = (size_t)B * T * NH * hd, nk = (size_t)B * T * NKV * hd, nl = (size_t)B * NH * T;
    AttRef r{std::vector<double>(nq, 0), std::vector<double>(nl), std::vector<double>(nl * T, 0),
             std::vector<double>(nq, 0), std::vector<double>(nk, 0), std::vector<double>(nk, 0),
             std::vector<double>((size_t)NH * tb.NB, 0), std::vector<double>(tb.rk.size(), 0)};
    int group = NH / NKV;
    double scale = 1.0 / sqrt((double)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / group;
                double m = -1e300, l = 0, Dt = 0;
                std::vector<double> x(t + 1), dp(t + 1);
                const float *qt = &q[(((size_t)b * T + t) * NH + h) * hd], *dyt = &dy[(((size_t)b * T + t) * NH + h) * hd];
                for (int s = 0; s <= t; s++) {
                    const float *ks = &k[(((size_t)b * T + s) * NKV + kvh) * hd], *vs = &v[(((size_t)b * T + s) * NKV + kvh) * hd];
                    double d = 0, e = 0;
                    for (int c = 0; c < hd; c++) d += (double)qt[c] * ks[c], e += (double)dyt[c] * vs[c];
                    x[s] = d * scale + tb.at(h, t - s) + tb.rel(qt, t - s, hd);
                    dp[s] = e;
                    m = std::max(m, x[s]);
                }
                for (int s = 0; s <= t; s++) l += exp(x[s] - m);
                size_t row = ((size_t)b * NH + h) * T + t;
                r.lse[row] = m + log(l);
                for (int s = 0; s <= t; s++) {
                    double p = exp(x[s] - m) / l;
                    r.P[row * T + s] = p;
                    Dt += p * dp[s];
                    for (int c = 0; c < hd; c++) r.y[(((size_t)b * T + t) * NH + h) * hd + c] += p * v[(((size_t)b * T + s) * NKV + kvh) * hd + c];
                }
                for (int s = 0; s <= t; s++) {
                    double p = r.P[row * T + s], ds = p * (dp[s] - Dt) * scale;
                    if (!tb.table.empty()) r.dtable[(size_t)h * tb.NB + tb.bucket[t - s]] += p * (dp[s] - Dt);
                    size_t ko = (((size_t)b * T + s) * NKV + kvh) * hd, qo = (((size_t)b * T + t) * NH + h) * hd;
                    for (int c = 0; c < hd && !tb.rk.empty(); c++) {  // the relative key's share
                        size_t ro = (size_t)tb.bucket[t - s] * hd + c;
                        r.dq[qo + c] += ds * tb.rk[ro];
                        r.drk[ro] += ds * qt[c];
                    }
                    for (int c = 0; c < hd; c++) {
                        r.dq[qo + c] += ds * k[ko + c];
                        r.dk[ko + c] += ds * qt[c];
                        r.dv[ko + c] += p * dyt[c];
                    }
                }
            }
    return r;
}

// ---- flash attention: forward (y, lse), D, backward (dq, dk, dv) ----
// ---- the table's gradient from the diagonal sums diag (B,NH,T) under test, scattered by bucket ----
static std::vector<float> table_grad(const TestBias &tb, const std::vector<float> &diag, int B, int NH, int T) {
    std::vector<float> dtable((size_t)NH * tb.NB, 0.0f);
    for (int h = 0; h < NH; h++)
        for (int b = 0; b < B; b++)
            for (int d = 0; d < T; d++) dtable[(size_t)h * tb.NB + tb.bucket[d]] += diag[((size_t)b * NH + h) * T + d];
    return dtable;
}

// ---- flash attention: forward (y, lse), D, backward (dq, dk, dv), a learned table's gradient ----
static void test_flash(int B, int T, int NH, int NKV, int hd, float alpha, int NB = 0) {
    size_t nq = (size_t)B * T * NH * hd, nk = (size_t)B * T * NKV * hd, nl = (size_t)B * NH * T;
    std::vector<float> q = randn(nq, 2.0f), k = randn(nk), v = randn(nk), dy = randn(nq);
    std::vector<float> y(nq, NAN), lse(nl, NAN), D(nl, NAN), dq(nq, NAN), dk(nk, NAN), dv(nk, NAN), diag(nl, NAN);
    TestBias tb = test_bias(NH, T, alpha, NB);
    AttnBias ab = tb.ab();
    AttRef ref = attention_reference(q, k, v, dy, B, T, NH, NKV, hd, tb);
    int hdmax = hd <= 32 ? 32 : hd <= 64 ? 64 : 128;
    dim3 fgrid((T + FLASH_ROWS - 1) / FLASH_ROWS, NH, B), kvgrid((T + FLASH_ROWS - 1) / FLASH_ROWS, NKV, B);
    size_t smem = flash_backward_smem(hd, hdmax);
    size_t rows = (size_t)B * T * NH;
#define FLASH_PASSES(HDMAX)                                                                                              \
    emu_launch(fgrid, dim3(FLASH_ROWS), 0, [&] { flash_forward_kernel<HDMAX>(y.data(), lse.data(), q.data(), k.data(), v.data(), T, NH, NKV, hd, ab); }); \
    emu_launch(dim3((rows + 7) / 8), dim3(256), 0, [&] { flash_backward_dot_kernel(D.data(), dy.data(), y.data(), B, T, NH, hd); }); \
    emu_launch(kvgrid, dim3(FLASH_ROWS), smem, [&] { flash_backward_kv_kernel<HDMAX>(dk.data(), dv.data(), dy.data(), lse.data(), D.data(), q.data(), k.data(), v.data(), T, NH, NKV, hd, ab); }); \
    emu_launch(fgrid, dim3(FLASH_ROWS), smem, [&] { flash_backward_q_kernel<HDMAX>(dq.data(), dy.data(), lse.data(), D.data(), q.data(), k.data(), v.data(), T, NH, NKV, hd, ab); });
    if (hdmax == 32) { FLASH_PASSES(32) } else if (hdmax == 64) { FLASH_PASSES(64) } else { FLASH_PASSES(128) }
    const char *names[6] = {"y", "lse", "dq", "dk", "dv", "dtable"};
    double errs[6] = {rel(y, ref.y), rel(lse, ref.lse), rel(dq, ref.dq), rel(dk, ref.dk), rel(dv, ref.dv), 0};
    if (NB) {
        emu_launch(dim3((nl + 127) / 128), dim3(128), 0, [&] { flash_bias_diag_kernel(diag.data(), dy.data(), lse.data(), D.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, hd, ab); });
        errs[5] = rel(table_grad(tb, diag, B, NH, T), ref.dtable);
    }
    char what[160];
    snprintf(what, sizeof(what), "flash attention B %d T %d NH %d NKV %d hd %d%s", B, T, NH, NKV, hd, bias_name(alpha, NB));
    report(what, names, errs, NB ? 6 : 5);
}

// ---- the bf16 build's flash attention on tensor cores (emu.h's WMMA), against double
// precision from the same bf16 inputs: y, dq, dk, dv (bf16) at TOL_BF16, lse (fp32) at
// 1e-5; the forward's y and lse feed the backward, as in training ----
static void test_flash_tc(int B, int T, int NH, int NKV, int hd, float alpha, int NB = 0) {
    size_t nq = (size_t)B * T * NH * hd, nk = (size_t)B * T * NKV * hd, nl = (size_t)B * NH * T;
    std::vector<float> q = randn(nq, 2.0f), k = randn(nk), v = randn(nk), dy = randn(nq), lse(nl, NAN), D(nl, NAN);
    std::vector<float> diag(nl, NAN);
    for (std::vector<float> *x : {&q, &k, &v, &dy}) round_bf16(*x);
    TestBias tb = test_bias(NH, T, alpha, NB);
    AttnBias ab = tb.ab();
    AttRef ref = attention_reference(q, k, v, dy, B, T, NH, NKV, hd, tb);
    std::vector<__nv_bfloat16> qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v), dyb = to_bf16(dy);
    std::vector<__nv_bfloat16> y(nq, BF16_NAN), dq(nq, BF16_NAN), dk(nk, BF16_NAN), dv(nk, BF16_NAN);
    bf16::flash_attention_forward(y.data(), lse.data(), qb.data(), kb.data(), vb.data(), B, T, NH, NKV, hd, ab);
    bf16::flash_attention_backward(dq.data(), dk.data(), dv.data(), NB ? diag.data() : nullptr, D.data(), dyb.data(),
                                   y.data(), lse.data(), qb.data(), kb.data(), vb.data(), B, T, NH, NKV, hd, ab);
    const char *names[6] = {"y", "lse", "dq", "dk", "dv", "dtable"};
    double errs[6] = {rel(from_bf16(y), ref.y), rel(lse, ref.lse), rel(from_bf16(dq), ref.dq), rel(from_bf16(dk), ref.dk),
                      rel(from_bf16(dv), ref.dv), NB ? rel(table_grad(tb, diag, B, NH, T), ref.dtable) : 0};
    double tols[6] = {TOL_BF16, 1e-5, TOL_BF16, TOL_BF16, TOL_BF16, TOL_BF16};
    char what[160];
    snprintf(what, sizeof(what), "flash attention on tensor cores (bf16) B %d T %d NH %d NKV %d hd %d%s", B, T, NH, NKV, hd,
             bias_name(alpha, NB));
    report(what, names, errs, NB ? 6 : 5, tols);
}

// ---- the bf16 build's flash attention, each variant of the forward and of the backward
// (flash_*_variant_for picks what runs): v1 (WMMA) and v2 (mma.sync, FA2-class: emu.h's PTX
// layouts, cp.async done only at its wait) against double precision from the same bf16
// inputs; y, dq, dk, dv at TOL_BF16, lse at 1e-5; each backward from its own forward ----
static void test_flash_variants(int B, int T, int NH, int NKV, int hd, float alpha, int NB = 0) {
    size_t nq = (size_t)B * T * NH * hd, nk = (size_t)B * T * NKV * hd, nl = (size_t)B * NH * T;
    std::vector<float> q = randn(nq, 2.0f), k = randn(nk), v = randn(nk), dy = randn(nq);
    for (std::vector<float> *x : {&q, &k, &v, &dy}) round_bf16(*x);
    TestBias tb = test_bias(NH, T, alpha, NB);
    AttnBias ab = tb.ab();
    AttRef ref = attention_reference(q, k, v, dy, B, T, NH, NKV, hd, tb);
    std::vector<__nv_bfloat16> qb = to_bf16(q), kb = to_bf16(k), vb = to_bf16(v), dyb = to_bf16(dy);
    for (int variant = 1; variant <= 2; variant++) {
        std::vector<__nv_bfloat16> y(nq, BF16_NAN), dq(nq, BF16_NAN), dk(nk, BF16_NAN), dv(nk, BF16_NAN);
        std::vector<float> lse(nl, NAN), D(nl, NAN);
        int fwd = bf16::flash_forward_variant_for(variant, hd, y.data(), qb.data(), kb.data(), vb.data());
        int bwd = bf16::flash_backward_variant_for(variant, hd, dq.data(), dk.data(), dv.data(), dyb.data(), qb.data(),
                                                   kb.data(), vb.data());
        bf16::flash_forward_tensor_cores(y.data(), lse.data(), qb.data(), kb.data(), vb.data(), B, T, NH, NKV, hd, ab,
                                         variant);
        bf16::flash_backward_tensor_cores(dq.data(), dk.data(), dv.data(), D.data(), dyb.data(), y.data(), lse.data(),
                                          qb.data(), kb.data(), vb.data(), B, T, NH, NKV, hd, ab, variant);
        const char *names[5] = {"y", "lse", "dq", "dk", "dv"};
        double errs[5] = {rel(from_bf16(y), ref.y), rel(lse, ref.lse), rel(from_bf16(dq), ref.dq),
                          rel(from_bf16(dk), ref.dk), rel(from_bf16(dv), ref.dv)};
        double tols[5] = {TOL_BF16, 1e-5, TOL_BF16, TOL_BF16, TOL_BF16};
        char what[200];
        snprintf(what, sizeof(what), "flash attention v%d (ran forward v%d, backward v%d; bf16) B %d T %d NH %d NKV %d hd %d%s",
                 variant, fwd, bwd, B, T, NH, NKV, hd, bias_name(alpha, NB));
        report(what, names, errs, 5, tols);
    }
}

// ---- which forward and backward run: v2 only for hd 32, 64, 128 with 16-byte aligned tensors ----
static void test_flash_forward_fallbacks() {
    alignas(16) static __nv_bfloat16 buf[64];
    const void *a = buf, *off = buf + 4;  // 8 bytes off
    struct { int v, hd; const void *y; int want; const char *what; } cases[] = {
        {2, 64, a, 2, "hd 64 aligned"}, {2, 128, a, 2, "hd 128"}, {2, 32, a, 2, "hd 32"}, {2, 48, a, 1, "hd 48"},
        {2, 16, a, 1, "hd 16"}, {2, 64, off, 1, "one tensor 8 bytes off"}, {1, 64, a, 1, "v1 asked"}};
    for (auto &c : cases) {
        int got = bf16::flash_forward_variant_for(c.v, c.hd, c.y, a, a, a);
        int gotb = bf16::flash_backward_variant_for(c.v, c.hd, a, a, a, a, a, a, c.y);  // the last: v
        bool ok = got == c.want && gotb == c.want;
        printf("%s: flash fallback (%s): v%d asked, forward v%d and backward v%d run (want v%d)\n", ok ? "PASS" : "FAIL",
               c.what, c.v, got, gotb, c.want);
        (ok ? n_pass : n_fail)++;
    }
}

// ---- RMSNorm backward: dx (accumulating or not) and the deterministic dw ----
static void test_rmsnorm(int N, int C, int accumulate) {
    std::vector<float> x = randn((size_t)N * C), g = randn((size_t)N * C), w = randn(C), r(N), dx0 = randn((size_t)N * C);
    std::vector<float> dx = accumulate ? dx0 : std::vector<float>((size_t)N * C, NAN), dw = randn(C);
    std::vector<double> rdx((size_t)N * C), rdw(dw.begin(), dw.end());
    for (int i = 0; i < N; i++) {
        double ss = 0, dot = 0;
        for (int c = 0; c < C; c++) ss += (double)x[i * C + c] * x[i * C + c];
        r[i] = (float)(1.0 / sqrt(ss / C + 1e-5));
        for (int c = 0; c < C; c++) dot += (double)g[i * C + c] * w[c] * x[i * C + c] * r[i];
        dot /= C;
        for (int c = 0; c < C; c++) {
            double xh = (double)x[i * C + c] * r[i];
            rdx[i * C + c] = (accumulate ? dx0[i * C + c] : 0.0) + r[i] * (g[i * C + c] * w[c] - xh * dot);
            rdw[c] += g[i * C + c] * xh;
        }
    }
    std::vector<float> dx_in = dx, dw_in = dw;
    for (int variant = 1; variant <= 2; variant++) {  // each through the trainer's launcher
        dx = dx_in;
        dw = dw_in;
        std::vector<float> part((size_t)((N + 7) / 8) * C, NAN);
        int runs = rmsnorm_backward_variant_for(variant, C, dx.data(), g.data(), x.data(), w.data());
        rmsnorm_backward(dx.data(), dw.data(), part.data(), g.data(), x.data(), w.data(), r.data(), N, C, accumulate, variant);
        const char *names[2] = {"dx", "dw"};
        double errs[2] = {rel(dx, rdx), rel(dw, rdw)};
        char what[128];
        snprintf(what, sizeof(what), "RMSNorm backward v%d (ran v%d) N %d C %d%s", variant, runs, N, C,
                 accumulate ? ", accumulating" : "");
        report(what, names, errs, 2);
    }
}

// ---- the evaluation's attention (attention_forward_online, as gpt_forward calls it):
// KV-cache offset, window, entropy, ALiBi ----
// pair: TUPE's term of each query and key (random), read by the kernel beside the hook's others
static void test_online(int B, int Tq, int Tk, int q_offset, int NH, int NKV, int hd, int window, float alpha, int NB = 0,
                        int rel_keys = 0, int pair = 0) {
    TestBias tb = test_bias(NH, Tk, alpha, NB, rel_keys ? hd : 0);
    if (pair) {
        tb.pair = randn((size_t)NH * Tq * Tk);
        tb.n_pair = Tk;
    }
    size_t nq = (size_t)B * Tq * NH * hd, nk = (size_t)B * Tk * NKV * hd;
    std::vector<float> q = randn(nq, 2.0f), k = randn(nk), v = randn(nk), y(nq, NAN), ent_bh((size_t)B * NH * Tq, 0.0f);
    if (rel_keys) rel_scores(tb, q, B, Tq, hd);
    std::vector<double> ry(nq, 0), rent(Tq, 0);
    int group = NH / NKV;
    float ent_scale = 1.0f / (B * NH);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < Tq; t++) {
                int kvh = h / group, last = q_offset + t, first = window && last - window + 1 > 0 ? last - window + 1 : 0;
                double m = -1e300, l = 0;
                std::vector<double> x(last + 1);
                const float *qt = &q[(((size_t)b * Tq + t) * NH + h) * hd];
                for (int s = first; s <= last; s++) {
                    double d = 0;
                    for (int c = 0; c < hd; c++) d += (double)qt[c] * k[(((size_t)b * Tk + s) * NKV + kvh) * hd + c];
                    x[s] = d / sqrt((double)hd) + tb.at(h, last - s) + tb.rel(qt, last - s, hd) +
                           (pair ? (double)tb.pair[((size_t)h * Tq + t) * Tk + s] : 0.0);
                    m = std::max(m, x[s]);
                }
                for (int s = first; s <= last; s++) l += exp(x[s] - m);
                for (int s = first; s <= last; s++) {
                    double p = exp(x[s] - m) / l;
                    rent[t] -= ent_scale * p * log(p);
                    for (int c = 0; c < hd; c++)
                        ry[(((size_t)b * Tq + t) * NH + h) * hd + c] += p * v[(((size_t)b * Tk + s) * NKV + kvh) * hd + c];
                }
            }
    attention_forward_online(y.data(), q.data(), k.data(), v.data(), B, Tq, Tk, q_offset, NH, NKV, hd, window, ent_bh.data(),
                             ent_scale, tb.ab());
    std::vector<float> ent(Tq, 0.0f);  // (B,NH,Tq) summed over sequences and heads, as gpu_losses does
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < Tq; t++) ent[t] += ent_bh[(size_t)bh * Tq + t];
    const char *names[2] = {"y", "entropy"};
    double errs[2] = {rel(y, ry), rel(ent, rent)};
    char what[160];
    snprintf(what, sizeof(what), "evaluation attention B %d Tq %d Tk %d offset %d NH %d NKV %d hd %d window %d%s%s", B, Tq,
             Tk, q_offset, NH, NKV, hd, window, bias_name(alpha, NB, rel_keys), pair ? ", TUPE's term per pair" : "");
    report(what, names, errs, 2);
}

// ---- the rotary encodings (the PosAug hook): the pass's positions from llmc/schedule.h's pos_pass, fp32 angles ----
// mode 0: alpha * t + offset; 1: explicit positions, a pass from pos0 3; 2: explicit positions per sequence.
// pe: PE_ROPE (scale 1) or PE_XPOS (each pair of a query scaled by zeta_j^(p/512), of a key by
// zeta_j^(-p/512), zeta_j = (2j + 0.4 hd) / (1.4 hd), formed here in double from the formula)
static void test_rope(int B, int T, int H, int hd, float alpha, int mode, int pe = PE_ROPE, int side = ROT_QUERY) {
    PosStep ps;
    memset(&ps, 0, sizeof(ps));
    ps.pe = pe;
    for (int l = 0; l < 2; l++) ps.alpha[l] = 1.0f;
    ps.alpha[1] = alpha;  // layer 1
    ps.offset = 0.5f;
    ps.mscale = 1.25f;
    for (int j = 0; j < hd / 2; j++) ps.inv_freq[j] = powf(10000.0f, -2.0f * j / hd);
    int pos0 = mode == 1 ? 3 : 0, nseq = mode == 2 ? B : 1, np = T + pos0;
    std::vector<float> positions((size_t)nseq * np);
    for (int s = 0; s < nseq; s++)
        for (int t = 0; t < np; t++) positions[(size_t)s * np + t] = 1000.0f * t / np + 0.25f * t + 37.0f * s;
    if (mode) {
        ps.positions = positions.data();
        ps.n_positions = np;
        ps.seq_stride = mode == 2 ? np : 0;
    }
    PassPositions pp = pos_pass(&ps, 2, B, pos0, T);
    const float *p1 = pp.p + pp.layer_stride;  // layer 1's (host memory: the emulator's device)
    size_t n = (size_t)B * T * H * hd;
    std::vector<float> x0 = randn(n), x = x0;
    std::vector<double> want(n);
    for (size_t r = 0; r < n / hd; r++) {
        int t = (int)(r / H % T), b = (int)(r / H / T);
        float p = mode ? positions[(size_t)(mode == 2 ? b : 0) * np + pos0 + t] : alpha * (float)t + ps.offset;  // unfused
        for (int j = 0; j < hd / 2; j++) {
            double zeta = (2.0 * j + 0.4 * hd) / (1.4 * hd), sc = pe == PE_XPOS ? pow(zeta, (side == ROT_KEY ? -p : p) / 512.0) : 1;
            double a = (double)(p * ps.inv_freq[j]), c = cos(a) * ps.mscale * sc, s = sin(a) * ps.mscale * sc;
            double u = x0[r * hd + j], w = x0[r * hd + j + hd / 2];
            want[r * hd + j] = u * c - w * s;
            want[r * hd + j + hd / 2] = w * c + u * s;
        }
    }
    int ss = pp.seq_stride;
    std::vector<float> x1;  // v1's output: every variant gives its bits
    for (int v = 1; v <= 3; v++) {
        int runs = rope_variant_for(v, x.data(), hd, ss);
        if (runs != v) continue;  // the call takes a lower variant, tested already
        x = x0;
        ps.mscale = 1.25f;
        rope_launch(v, x.data(), B, T, H, hd, p1, ss, &ps, side, 1.0f);
        if (v == 1) x1 = x;
        double e_fwd = rel(x, want), e_bits = memcmp(x.data(), x1.data(), n * sizeof(float)) ? 1.0 : 0.0;
        ps.mscale = 1.0f;  // the backward (sign -1) of an unscaled rotation undoes it (RoPE), or is its transpose:
        std::vector<float> y = x0;  // for xPos, the forward then the backward scale each pair twice
        rope_launch(v, y.data(), B, T, H, hd, p1, ss, &ps, side, 1.0f);
        rope_launch(v, y.data(), B, T, H, hd, p1, ss, &ps, side, -1.0f);
        std::vector<double> back(x0.begin(), x0.end());
        for (size_t r = 0; r < n / hd && pe == PE_XPOS; r++) {
            int t = (int)(r / H % T), b = (int)(r / H / T);
            float p = mode ? positions[(size_t)(mode == 2 ? b : 0) * np + pos0 + t] : alpha * (float)t + ps.offset;
            for (int j = 0; j < hd / 2; j++) {
                double zeta = (2.0 * j + 0.4 * hd) / (1.4 * hd), sc = pow(zeta, (side == ROT_KEY ? -p : p) / 512.0);
                back[r * hd + j] *= sc * sc;
                back[r * hd + j + hd / 2] *= sc * sc;
            }
        }
        double e_back = rel(y, back);
        const char *names[3] = {"forward", "backward after forward", "bits differ from v1"};
        double errs[3] = {e_fwd, e_back, e_bits};
        char what[160];
        snprintf(what, sizeof(what), "%s v%d B %d T %d H %d hd %d, %s", pe == PE_XPOS ? side == ROT_KEY ? "xPos keys"
                 : "xPos queries" : "RoPE", v, B, T, H, hd,
                 mode == 1 ? "explicit positions from pos0 3" : mode == 2 ? "positions per sequence"
                 : alpha == 1 ? "alpha 1" : "alpha 8 (PosAug)");
        report(what, names, errs, 3);
    }
}

// ---- sinusoidal positions: x += (sin, cos)(p * f_k) ----
static void test_sinusoidal(int B, int T, int C, float alpha) {
    PosStep ps;
    memset(&ps, 0, sizeof(ps));
    ps.pe = PE_SINUSOIDAL;
    ps.alpha[0] = alpha;
    ps.offset = 0.0f;
    std::vector<float> freq(C / 2), x0 = randn((size_t)B * T * C), x = x0;
    for (int k = 0; k < C / 2; k++) freq[k] = powf(10000.0f, -2.0f * k / C);
    std::vector<double> want(x0.begin(), x0.end());
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int k = 0; k < C / 2; k++) {
                double a = (double)((alpha * (float)t + ps.offset) * freq[k]);
                want[((size_t)b * T + t) * C + 2 * k] += sin(a);
                want[((size_t)b * T + t) * C + 2 * k + 1] += cos(a);
            }
    size_t n = (size_t)B * T * (C / 2);
    PassPositions pp = pos_pass(&ps, 1, B, 0, T);
    emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] { sinusoidal_kernel(x.data(), B, T, C, pp.p, pp.seq_stride, freq.data()); });
    const char *names[1] = {"x"};
    double errs[1] = {rel(x, want)};
    char what[128];
    snprintf(what, sizeof(what), "sinusoidal positions B %d T %d C %d alpha %g", B, T, C, alpha);
    report(what, names, errs, 1);
}

// ---- the classifier: losses, dlogits in place (per-target weights or dloss), padding 0;
// forward only: losses, logits untouched. In the fp32 build, or in the bf16 build (inputs
// rounded to bf16 first: the reference reads what the kernel reads) ----
static void test_classifier(int N, int V, int Vp, int weighted, int bf16_build) {
    std::vector<float> logits = randn((size_t)N * Vp, 3.0f), w(N);
    std::vector<int> targets(N);
    for (int i = 0; i < N; i++) targets[i] = i == 0 ? V - 1 : (int)rng_below(&rng, (uint32_t)V), w[i] = 0.1f * (i % 3);
    for (int c = 0; c < V; c++) logits[c] = 0.01f * c;  // row 0's max grows at every column: the running sum rescales
    if (bf16_build) round_bf16(logits);
    for (int i = 0; i < N; i++)
        for (int c = V; c < Vp; c++) logits[(size_t)i * Vp + c] = NAN;  // padding: never read, written 0
    std::vector<double> want_d((size_t)N * Vp, 0.0), want_l(N);
    float dloss = 1.0f / N;
    for (int i = 0; i < N; i++) {
        const float *l = &logits[(size_t)i * Vp];
        double m = -1e300, s = 0;
        for (int c = 0; c < V; c++) m = std::max(m, (double)l[c]);
        for (int c = 0; c < V; c++) s += exp(l[c] - m);
        double lse = m + log(s), d = weighted ? w[i] : dloss;
        want_l[i] = lse - l[targets[i]];
        for (int c = 0; c < V; c++) want_d[(size_t)i * Vp + c] = (exp(l[c] - lse) - (c == targets[i])) * d;
    }
    auto run = [&](std::vector<float> &x, std::vector<float> &losses, const float *wt, int backward) {
        if (!bf16_build) {
            emu_launch(dim3(N), dim3(1024), 0, [&] { classifier_kernel(x.data(), losses.data(), targets.data(), wt, N, V, Vp, dloss, backward); });
            return;
        }
        std::vector<__nv_bfloat16> xb = to_bf16(x);
        emu_launch(dim3(N), dim3(1024), 0, [&] { bf16::classifier_kernel(xb.data(), losses.data(), targets.data(), wt, N, V, Vp, dloss, backward); });
        x = from_bf16(xb);
    };
    std::vector<float> fwd = logits, fwd_losses(N, NAN), losses(N, NAN);
    run(fwd, fwd_losses, NULL, 0);
    double changed = 0;  // forward only: every logit as it was (the padding still NaN)
    for (size_t i = 0; i < fwd.size(); i++)
        if (!(fwd[i] == logits[i] || (std::isnan(fwd[i]) && std::isnan(logits[i])))) changed = INFINITY;
    run(logits, losses, weighted ? w.data() : NULL, 1);
    const char *names[4] = {"forward-only losses", "forward-only logits changed", "losses", "dlogits"};
    double errs[4] = {rel(fwd_losses, want_l), changed, rel(losses, want_l), rel(logits, want_d)};
    double tols[4] = {1e-5, 1e-5, 1e-5, bf16_build ? TOL_BF16 : 1e-5};
    char what[128];
    snprintf(what, sizeof(what), "classifier%s N %d V %d Vp %d%s", bf16_build ? " (bf16)" : "", N, V, Vp,
             weighted ? ", per-target weights" : "");
    report(what, names, errs, 4, tols);
}

// ---- the LM head with the classifier (classifier_forward, classifier_backward), its
// variants: v1 all N rows at once, v2 `rows` rows at a time (a last chunk shorter). From x
// (N,C) and the tied wte (Vp,C), its padded rows drawn too (they must not count): losses,
// dx = dlogits wte, dwte += dlogits^T x (from a nonzero dwte: the gradient accumulates),
// against double; the padded rows of dwte unchanged to the bit; v2's losses and dx the
// bits of v1's (the emulated cuBLAS sums each element in one order), its dwte within
// rounding (the chunks' partial sums). In the bf16 build the reference reads the logits as
// the kernel does, rounded to bf16 ----
static void test_lm_head(int N, int C, int V, int Vp, int rows, int weighted, int bf16_build) {
    std::vector<float> x = randn((size_t)N * C), wte = randn((size_t)Vp * C, 3.0f / sqrtf((float)C)), w(N);
    std::vector<float> dwte0 = randn((size_t)Vp * C, 0.01f);
    std::vector<int> targets(N);
    for (int i = 0; i < N; i++) targets[i] = i == 0 ? V - 1 : i == N - 1 ? 0 : (int)rng_below(&rng, (uint32_t)V);
    for (int i = 0; i < N; i++) w[i] = 0.1f * (i % 3);  // loss masks: some targets weigh 0
    if (bf16_build) round_bf16(x), round_bf16(wte);
    float dloss = 1.0f / N;
    std::vector<double> want_l(N), want_dx((size_t)N * C, 0), want_dw((size_t)Vp * C, 0), z(V);
    for (int i = 0; i < N; i++) {
        double m = -1e300, s = 0, d = weighted ? w[i] : dloss;
        for (int c = 0; c < V; c++) {
            double t = 0;
            for (int k = 0; k < C; k++) t += (double)x[(size_t)i * C + k] * wte[(size_t)c * C + k];
            z[c] = bf16_build ? (double)__bfloat162float(__float2bfloat16((float)t)) : (double)(float)t;  // as stored
            m = std::max(m, z[c]);
        }
        for (int c = 0; c < V; c++) s += exp(z[c] - m);
        double lse = m + log(s);
        want_l[i] = lse - z[targets[i]];
        for (int c = 0; c < V; c++) {
            double g = (exp(z[c] - lse) - (c == targets[i])) * d;
            for (int k = 0; k < C; k++) {
                want_dx[(size_t)i * C + k] += g * wte[(size_t)c * C + k];
                want_dw[(size_t)c * C + k] += g * x[(size_t)i * C + k];
            }
        }
    }
    struct Out { std::vector<float> fwd_losses, losses, dx, dwte; };
    auto run = [&](int chunk) {  // chunk: the rows of logits at a time
        Out o{std::vector<float>(N, NAN), std::vector<float>(N, NAN), std::vector<float>((size_t)N * C, NAN), dwte0};
        const float *wt = weighted ? w.data() : NULL;
        if (!bf16_build) {
            std::vector<float> logits((size_t)chunk * Vp, NAN);
            classifier_forward(o.fwd_losses.data(), logits.data(), x.data(), wte.data(), targets.data(), N, C, V, Vp, chunk);
            classifier_backward(o.dx.data(), o.dwte.data(), o.losses.data(), logits.data(), x.data(), wte.data(),
                                targets.data(), wt, N, C, V, Vp, dloss, chunk);
            return o;
        }
        std::vector<__nv_bfloat16> xb = to_bf16(x), wb = to_bf16(wte), logits((size_t)chunk * Vp, BF16_NAN), dxb(o.dx.size(), BF16_NAN);
        bf16::classifier_forward(o.fwd_losses.data(), logits.data(), xb.data(), wb.data(), targets.data(), N, C, V, Vp, chunk);
        bf16::classifier_backward(dxb.data(), o.dwte.data(), o.losses.data(), logits.data(), xb.data(), wb.data(),
                                  targets.data(), wt, N, C, V, Vp, dloss, chunk);
        o.dx = from_bf16(dxb);
        return o;
    };
    Out v1 = run(N), v2 = run(rows);
    auto added = [&](const Out &o) {  // what the pass added to dwte
        std::vector<float> d(o.dwte.size());
        for (size_t i = 0; i < d.size(); i++) d[i] = (float)((double)o.dwte[i] - dwte0[i]);
        return d;
    };
    auto padded_kept = [&](const Out &o) {  // dwte's padded rows V..Vp-1 as they were, bit for bit
        return memcmp(&o.dwte[(size_t)V * C], &dwte0[(size_t)V * C], (size_t)(Vp - V) * C * sizeof(float)) ? INFINITY : 0.0;
    };
    auto same_bits = [](const std::vector<float> &a, const std::vector<float> &b) {
        return memcmp(a.data(), b.data(), a.size() * sizeof(float)) ? INFINITY : 0.0;
    };
    double xt = bf16_build ? TOL_BF16 : 1e-5;  // dx is floatX, dwte fp32 from floatX dlogits
    const char *names[7] = {"forward losses", "losses", "dx", "dwte added", "dwte padded rows changed",
                            "(losses, dx) bits not v1's", "dwte vs v1's"};
    double tols[7] = {1e-5, 1e-5, xt, xt, 1e-5, 1e-5, 1e-6};
    for (int v = 1; v <= 2; v++) {
        const Out &o = v == 1 ? v1 : v2;
        double errs[7] = {rel(o.fwd_losses, want_l), rel(o.losses, want_l), rel(o.dx, want_dx), rel(added(o), want_dw),
                          padded_kept(o),
                          same_bits(o.losses, v1.losses) + same_bits(o.fwd_losses, v1.fwd_losses) + same_bits(o.dx, v1.dx),
                          rel(o.dwte, std::vector<double>(v1.dwte.begin(), v1.dwte.end()))};
        char what[160];
        snprintf(what, sizeof(what), "LM head + classifier v%d%s N %d C %d V %d Vp %d, %d rows at a time%s", v,
                 bf16_build ? " (bf16)" : "", N, C, V, Vp, v == 1 ? N : rows, weighted ? ", per-target weights" : "");
        report(what, names, errs, v == 1 ? 5 : 7, tols);
    }
}

// ---- which classifier variant runs: v2 only when its chunks split the rows; its logits buffer ----
static void test_classifier_variants() {
    int C2 = CLASSIFIER_CHUNK;
    const char *names[1] = {"wrong choices"};
    double bad = (classifier_variant_for(1, 10 * C2) != 1) + (classifier_variant_for(2, C2) != 1) +
                 (classifier_variant_for(2, C2 + 1) != 2) + (classifier_rows(1, 10 * C2) != 10 * C2) +
                 (classifier_rows(2, 7) != 7) + (classifier_rows(2, 3 * C2 + 5) != C2);
    double errs[1] = {bad}, tols[1] = {0.5};
    report("classifier_variant_for, classifier_rows: v1 all rows, v2 chunks of CLASSIFIER_CHUNK when they split", names,
           errs, 1, tols);
}

// ---- the GRU's step: the forward against torch.nn.GRU's equations in double, the backward
// against central differences of those equations (d loss / d pre-activations, d h_{t-1}) ----
static void gru_cell(double *h, const double *gi, const double *gh, const float *bih, const float *bhh, const double *hp,
                     int B, int C) {  // gi, gh (B,3C) without biases; gh NULL: h_{t-1} = 0
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) {
            const double *x = gi + (size_t)b * 3 * C, *y = gh ? gh + (size_t)b * 3 * C : NULL;
            double r = 1 / (1 + exp(-(x[c] + bih[c] + (y ? y[c] : 0) + bhh[c])));
            double z = 1 / (1 + exp(-(x[C + c] + bih[C + c] + (y ? y[C + c] : 0) + bhh[C + c])));
            double n = tanh(x[2 * C + c] + bih[2 * C + c] + r * ((y ? y[2 * C + c] : 0) + bhh[2 * C + c]));
            h[b * C + c] = (1 - z) * n + z * (hp ? hp[b * C + c] : 0);
        }
}
static void test_gru(int B, int C) {
    std::vector<float> g = randn((size_t)B * 3 * C), gh = randn((size_t)B * 3 * C), hp = randn((size_t)B * C);
    std::vector<float> bih = randn(3 * C, 0.5f), bhh = randn(3 * C, 0.5f), dh = randn((size_t)B * C), dc = randn((size_t)B * C);
    std::vector<double> gd(g.begin(), g.end()), ghd(gh.begin(), gh.end()), hpd(hp.begin(), hp.end()), want((size_t)B * C);
    gru_cell(want.data(), gd.data(), ghd.data(), bih.data(), bhh.data(), hpd.data(), B, C);
    std::vector<float> gates = g, h((size_t)B * C, NAN), hn((size_t)B * C, NAN);
    int n = B * C;
    emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] {
        gru_step_forward_kernel(h.data(), gates.data(), hn.data(), gh.data(), hp.data(), bih.data(), bhh.data(), B, C);
    });
    double e_fwd = rel(h, want);
    // loss = sum (dh + dcarry) . h_t: its gradients by central differences, in double
    auto loss = [&](const std::vector<double> &x, const std::vector<double> &y, const std::vector<double> &p) {
        std::vector<double> hh((size_t)B * C);
        gru_cell(hh.data(), x.data(), y.data(), bih.data(), bhh.data(), p.data(), B, C);
        double s = 0;
        for (int i = 0; i < n; i++) s += ((double)dh[i] + dc[i]) * hh[i];
        return s;
    };
    auto fd = [&](std::vector<double> &v, size_t i) {
        double keep = v[i], eps = 1e-6;
        v[i] = keep + eps;
        double lp = loss(gd, ghd, hpd);
        v[i] = keep - eps;
        double lm = loss(gd, ghd, hpd);
        v[i] = keep;
        return (lp - lm) / (2 * eps);
    };
    std::vector<double> w_di((size_t)B * 3 * C), w_dr((size_t)B * 3 * C);
    for (size_t i = 0; i < w_di.size(); i++) w_di[i] = fd(gd, i), w_dr[i] = fd(ghd, i);
    std::vector<float> di((size_t)B * 3 * C, NAN), dr((size_t)B * 3 * C, NAN), dcarry = dc;
    emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] {
        gru_step_backward_kernel(di.data(), dr.data(), dcarry.data(), dh.data(), gates.data(), hn.data(), hp.data(), B, C);
    });
    // dcarry becomes the direct part of d h_{t-1} (the caller adds dgh . Whh): the difference
    // quotient in h_{t-1} with gh held
    double e_hp = 0;
    {
        double num = 0, den = 0;
        for (int i = 0; i < n; i++) {
            double q = fd(hpd, i);
            num += (dcarry[i] - q) * (dcarry[i] - q);
            den += q * q;
        }
        e_hp = sqrt(num / den);
    }
    const char *names[4] = {"h", "d input pre-activations", "d recurrent pre-activations", "d h_{t-1} direct"};
    double errs[4] = {e_fwd, rel(di, w_di), rel(dr, w_dr), e_hp};
    char what[96];
    snprintf(what, sizeof(what), "GRU step B %d C %d", B, C);
    report(what, names, errs, 4);
}

// ---- the small kernels, each against its formula in double ----
static void test_small(void) {
    double e[4];
    {  // RMSNorm forward: out = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps)
        int N = 13, C = 70;
        std::vector<float> x = randn((size_t)N * C), w = randn(C), out((size_t)N * C, NAN), rstd(N, NAN);
        std::vector<double> wo((size_t)N * C), wr(N);
        for (int i = 0; i < N; i++) {
            double ss = 0;
            for (int c = 0; c < C; c++) ss += (double)x[i * C + c] * x[i * C + c];
            wr[i] = 1 / sqrt(ss / C + 1e-5);
            for (int c = 0; c < C; c++) wo[i * C + c] = x[i * C + c] * wr[i] * w[c];
        }
        emu_launch(dim3((N + 7) / 8), dim3(256), 0, [&] { rmsnorm_forward_kernel(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f); });
        const char *names[2] = {"out", "rstd"};
        e[0] = rel(out, wo), e[1] = rel(rstd, wr);
        report("RMSNorm forward N 13 C 70", names, e, 2);
    }
    {  // the naive attention's passes: the attention-score hook (ALiBi and a table) on raw
       // scores, causal softmax in place, its backward, the diagonal sums and the table's gradient
        int B = 2, NH = 3, T = 20, rows = B * NH * T;
        float scale = 0.25f, alpha = 2.0f;
        TestBias tb = test_bias(NH, T, alpha, 4);
        std::vector<double> wdt((size_t)NH * 4, 0);
        std::vector<float> att = randn((size_t)rows * T, 3.0f), datt = randn((size_t)rows * T);
        std::vector<double> wp((size_t)rows * T, 0), wd((size_t)rows * T, 0);
        for (int r = 0; r < rows; r++) {
            int t = r % T, h = r / T % NH;
            double m = -1e300, s = 0, dot = 0;
            std::vector<double> x(t + 1);
            for (int u = 0; u <= t; u++) x[u] = att[(size_t)r * T + u] * (double)scale + tb.at(h, t - u), m = std::max(m, x[u]);
            for (int u = 0; u <= t; u++) s += exp(x[u] - m);
            for (int u = 0; u <= t; u++) wp[(size_t)r * T + u] = exp(x[u] - m) / s, dot += wp[(size_t)r * T + u] * datt[(size_t)r * T + u];
            for (int u = 0; u <= t; u++) wd[(size_t)r * T + u] = wp[(size_t)r * T + u] * (datt[(size_t)r * T + u] - dot) * scale;
            for (int u = 0; u <= t; u++) wdt[(size_t)h * 4 + tb.bucket[t - u]] += wd[(size_t)r * T + u] / scale;
        }
        size_t n = (size_t)rows * T;
        emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] { attn_bias_kernel(att.data(), NH, T, tb.ab(), scale, n); });
        emu_launch(dim3((rows + 7) / 8), dim3(256), 0, [&] { softmax_forward_kernel(att.data(), rows, T, scale); });
        std::vector<float> p = att;
        emu_launch(dim3((rows + 7) / 8), dim3(256), 0, [&] { softmax_backward_kernel(datt.data(), p.data(), rows, T, scale); });
        std::vector<float> diag(rows, NAN);
        emu_launch(dim3((rows + 255) / 256), dim3(256), 0, [&] { attn_bias_diag_kernel(diag.data(), datt.data(), B, NH, T, scale); });
        const char *names[3] = {"probabilities", "dscores", "dtable"};
        e[0] = rel(att, wp), e[1] = rel(datt, wd), e[2] = rel(table_grad(tb, diag, B, NH, T), wdt);
        report("naive attention: ALiBi and a learned table, causal softmax and its backward, T 20", names, e, 3);
    }
    // SwiGLU forward and backward, each variant of llmc/cuda/swiglu.cuh through its launcher;
    // 1003 elements: v2's and v3's scalar tail; every variant's bits equal v1's
    std::vector<float> sw_v1[3];
    for (int v = 1; v <= 3; v++) {
        size_t n = 1003;
        Rng sr = rng_make(5, 5);  // the same inputs for every variant
        std::vector<float> g(n), u(n), dh(n), h(n, NAN), dg(n, NAN), du(n, NAN);
        for (size_t i = 0; i < n; i++) g[i] = 3.0f * rng_normal(&sr), u[i] = rng_normal(&sr), dh[i] = rng_normal(&sr);
        std::vector<double> wh(n), wg(n), wu(n);
        for (size_t i = 0; i < n; i++) {
            double sg = 1 / (1 + exp(-(double)g[i]));
            wh[i] = g[i] * sg * u[i];
            wg[i] = dh[i] * u[i] * sg * (1 + g[i] * (1 - sg));
            wu[i] = dh[i] * g[i] * sg;
        }
        swiglu_forward(h.data(), g.data(), u.data(), n, v);
        swiglu_backward(dg.data(), du.data(), dh.data(), g.data(), u.data(), n, v);
        if (v == 1) sw_v1[0] = h, sw_v1[1] = dg, sw_v1[2] = du;
        bool same = memcmp(h.data(), sw_v1[0].data(), n * 4) == 0 && memcmp(dg.data(), sw_v1[1].data(), n * 4) == 0 &&
                    memcmp(du.data(), sw_v1[2].data(), n * 4) == 0;
        const char *names[4] = {"h", "dgate", "dup", "bits differ from v1"};
        e[0] = rel(h, wh), e[1] = rel(dg, wg), e[2] = rel(du, wu), e[3] = same ? 0.0 : 1.0;
        char what[96];
        snprintf(what, sizeof(what), "SwiGLU v%d forward and backward, %zu elements", v, n);
        report(what, names, e, 4);
    }
    {  // embedding: rows of wte times sqrt(C) (the sinusoids' factor), and their gradient added back (grouped
       // by token on the host; tokens repeat)
        int N = 40, C = 24, V = 7;
        float scale = sqrtf((float)C);
        std::vector<int> tok(N);
        for (int i = 0; i < N; i++) tok[i] = (int)rng_below(&rng, V);
        std::vector<float> wte = randn((size_t)V * C), x((size_t)N * C, NAN), dx = randn((size_t)N * C), dwte = randn((size_t)V * C);
        std::vector<double> wx((size_t)N * C), wdw(dwte.begin(), dwte.end());
        for (int i = 0; i < N; i++)
            for (int c = 0; c < C; c++)
                wx[i * C + c] = (double)wte[tok[i] * C + c] * scale, wdw[tok[i] * C + c] += (double)dx[i * C + c] * scale;
        size_t n = (size_t)N * C;
        emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] { encoder_forward_kernel(x.data(), tok.data(), wte.data(), N, C, scale); });
        std::vector<int> sc(SCATTER_INTS(N), -1);
        scatter_build(sc.data(), tok.data(), N, V);
        scatter_add_rows(dwte.data(), dx.data(), sc.data(), N, C, scale);
        const char *names[2] = {"x", "dwte"};
        e[0] = rel(x, wx), e[1] = rel(dwte, wdw);
        report("embedding forward and backward, repeated tokens", names, e, 2);
    }
    {  // the GRU's layout (B,T,C) <-> (T,B,C) and its bias gradients (column sums)
        int B = 3, T = 5, C = 7, rows = 11, cols = 45;
        size_t n = (size_t)B * T * C;
        std::vector<float> a = randn(n), tm(n, NAN), back(n, NAN), d = randn((size_t)rows * cols), db = randn(cols);
        std::vector<double> wtm(n), wdb(db.begin(), db.end());
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int c = 0; c < C; c++) wtm[((size_t)t * B + b) * C + c] = a[((size_t)b * T + t) * C + c];
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++) wdb[c] += d[(size_t)r * cols + c];
        emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] { transpose_bt_kernel(tm.data(), a.data(), B, T, C, 0); });
        emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] { transpose_bt_kernel(back.data(), tm.data(), B, T, C, 1); });
        emu_launch(dim3(1), dim3(256), 0, [&] { column_sum_kernel(db.data(), d.data(), (size_t)rows, cols); });
        const char *names[3] = {"time-major", "and back", "bias sums"};
        e[0] = rel(tm, wtm), e[1] = rel(back, std::vector<double>(a.begin(), a.end())), e[2] = rel(db, wdb);
        report("GRU layout transposes and bias column sums", names, e, 3);
    }
    {  // gradient norm partials (a grid-stride loop; a smaller grid than the trainer's 512 blocks), the loss sum
        size_t n = 100003;
        int nb = 8;
        std::vector<float> g = randn(n), part(nb, NAN), losses = randn(3000), w = randn(3000), acc(2, 0.5f);
        double ss = 0, sl = 0, swl = 0;
        for (size_t i = 0; i < n; i++) ss += (double)g[i] * g[i];
        for (int i = 0; i < 3000; i++) sl += losses[i], swl += (double)w[i] * losses[i];
        emu_launch(dim3(nb), dim3(512), 0, [&] { sumsq_kernel(part.data(), g.data(), n); });
        emu_launch(dim3(1), dim3(1024), 0, [&] { loss_sum_kernel(&acc[0], losses.data(), NULL, 3000, 0.25f); });
        emu_launch(dim3(1), dim3(1024), 0, [&] { loss_sum_kernel(&acc[1], losses.data(), w.data(), 3000, 1.0f); });
        double got = 0;
        for (float p : part) got += p;
        const char *names[3] = {"sum of squares", "loss sum", "weighted loss sum"};
        e[0] = fabs(got - ss) / ss, e[1] = fabs(acc[0] - (0.5 + 0.25 * sl)) / fabs(0.5 + 0.25 * sl);
        e[2] = fabs(acc[1] - (0.5 + swl)) / fabs(0.5 + swl);
        report("gradient norm partials and the loss sums", names, e, 3);
    }
    {  // learned APE: x += wpe[p_t] at the hook's positions (explicit ones from pos0), its gradient back
        int B = 2, T = 9, C = 16, rows = 40, pos0 = 4;
        PosStep ps;
        memset(&ps, 0, sizeof(ps));
        ps.pe = PE_LEARNED;
        ps.alpha[0] = 2.0f;
        ps.offset = 3.0f;
        std::vector<float> positions(T + pos0);
        for (int t = 0; t < T + pos0; t++) positions[t] = (float)((7 * t) % rows);
        std::vector<float> wpe = randn((size_t)rows * C), x0 = randn((size_t)B * T * C), x = x0, xe = x0, dx = randn((size_t)B * T * C);
        std::vector<float> dwpe(wpe.size(), 0.0f);
        std::vector<double> wx(x0.begin(), x0.end()), wxe(x0.begin(), x0.end()), wdw(wpe.size(), 0.0);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int c = 0; c < C; c++) {
                    size_t i = ((size_t)b * T + t) * C + c;
                    int p = (int)(2.0f * (float)t + 3.0f), pe = (int)positions[pos0 + t];
                    wx[i] += wpe[(size_t)p * C + c];
                    wxe[i] += wpe[(size_t)pe * C + c];
                    wdw[(size_t)p * C + c] += dx[i];
                }
        size_t n = (size_t)B * T * C;
        PassPositions pp = pos_pass(&ps, 1, B, 0, T);
        std::vector<float> pa(pp.p, pp.p + pp.n);  // alpha t + offset (the next pos_pass reuses the buffer)
        emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] { learned_forward_kernel(x.data(), wpe.data(), B, T, C, pa.data(), 0); });
        std::vector<int> key(B * T), sc(SCATTER_INTS(B * T), -1);  // the rows stage_micro groups dwpe by
        for (int i = 0; i < B * T; i++) key[i] = (int)pass_pos(&pp, 0, i / T, i % T);
        ps.positions = positions.data();
        ps.n_positions = T + pos0;
        pp = pos_pass(&ps, 1, B, pos0, T);
        emu_launch(dim3((n + 255) / 256), dim3(256), 0, [&] { learned_forward_kernel(xe.data(), wpe.data(), B, T, C, pp.p, pp.seq_stride); });
        scatter_build(sc.data(), key.data(), B * T, rows);
        scatter_add_rows(dwpe.data(), dx.data(), sc.data(), B * T, C, 1.0f);
        const char *names[3] = {"x at alpha t + offset", "x at explicit positions", "dwpe"};
        e[0] = rel(x, wx), e[1] = rel(xe, wxe), e[2] = rel(dwpe, wdw);
        report("learned APE forward and backward", names, e, 3);
    }
    {  // the residual add and the fp32-to-floatX copy
        size_t n = 999;
        std::vector<float> a = randn(n), b = randn(n), out(n, NAN), cp(n, NAN);
        std::vector<double> wo(n);
        for (size_t i = 0; i < n; i++) wo[i] = (double)a[i] + b[i];
        emu_launch(dim3(4), dim3(256), 0, [&] { residual_forward_kernel(out.data(), a.data(), b.data(), n); });
        emu_launch(dim3(4), dim3(256), 0, [&] { copy_to_x_kernel(cp.data(), a.data(), n); });
        const char *names[2] = {"a + b", "copy"};
        e[0] = rel(out, wo), e[1] = rel(cp, std::vector<double>(a.begin(), a.end()));
        report("residual add and floatX copy", names, e, 2);
    }
    {  // AdamW with the clip scale folded in, and the floatX copy, each variant through the
       // trainer's launcher: tensors of odd sizes (packs straddle them), an empty one, bounds
       // [lo, hi]: floors, ceilings, both
        const size_t numel[5] = {301, 0, 77, 398, 1};
        const float wds[5] = {0.1f, 0.1f, 0.0f, 0.1f, 0.0f}, lo[5] = {-INFINITY, 0.0f, 0.0f, -INFINITY, 0.5f},
                    hi[5] = {INFINITY, INFINITY, 0.5f, 0.0f, INFINITY};
        size_t n = 777;
        std::vector<float> p0 = randn(n), g = randn(n), m0 = randn(n, 0.1f), v0(n);
        for (float &x : v0) x = 0.01f * fabsf(rng_normal(&rng));
        std::vector<double> wp(n), wm(n), wv(n);
        float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, bc1 = 1 - powf(b1, 3), bc2 = 1 - powf(b2, 3), eps = 1e-8f, gs = 0.7f;
        for (size_t i = 0, k = 0, end = numel[0]; i < n; i++) {
            while (i >= end) end += numel[++k];
            double gi = (double)g[i] * gs;
            wm[i] = b1 * (double)m0[i] + (1 - (double)b1) * gi;
            wv[i] = b2 * (double)v0[i] + (1 - (double)b2) * gi * gi;
            wp[i] = p0[i] - lr * ((wm[i] / bc1) / (sqrt(wv[i] / bc2) + eps) + wds[k] * (double)p0[i]);
            wp[i] = std::min(std::max(wp[i], (double)lo[k]), (double)hi[k]);  // about half the bounded entries held at one
        }
        std::vector<float> p1;
        for (int variant = 1; variant <= 2; variant++) {
            std::vector<float> p = p0, m = m0, v = v0, px(n, NAN);
            adamw_update(p.data(), px.data(), g.data(), m.data(), v.data(), numel, wds, lo, hi, 5, lr, b1, b2, bc1, bc2, eps,
                         gs, variant);
            const char *names[5] = {"p", "m", "v", "px", "p differs from v1's bits"};
            if (variant == 1) p1 = p;
            double errs[5] = {rel(p, wp), rel(m, wm), rel(v, wv), rel(px, wp),
                              memcmp(p.data(), p1.data(), n * sizeof(float)) ? 1.0 : 0.0};
            char what[96];
            snprintf(what, sizeof(what), "AdamW v%d, clip scale folded in, floors and ceilings, 5 tensors (one empty)", variant);
            report(what, names, errs, 5);
        }
    }
}

// ---- the host functions around cuBLAS: the matmuls and the naive attention path ----
static void test_matmuls(int N, int IC, int OC) {
    std::vector<float> inp = randn((size_t)N * IC), w = randn((size_t)OC * IC), dout = randn((size_t)N * OC);
    std::vector<float> out((size_t)N * OC, NAN), dinp0 = randn((size_t)N * IC), dinp = dinp0, dw0 = randn((size_t)OC * IC), dw = dw0;
    std::vector<double> wo((size_t)N * OC, 0), wdi(dinp0.begin(), dinp0.end()), wdw(dw0.begin(), dw0.end());
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++)
            for (int c = 0; c < IC; c++) {
                wo[i * OC + o] += (double)inp[i * IC + c] * w[o * IC + c];
                wdi[i * IC + c] += (double)dout[i * OC + o] * w[o * IC + c];
                wdw[o * IC + c] += (double)dout[i * OC + o] * inp[i * IC + c];
            }
    matmul_forward(out.data(), inp.data(), w.data(), N, IC, OC);
    matmul_backward(dinp.data(), dw.data(), dout.data(), inp.data(), w.data(), N, IC, OC, 1);
    const char *names[3] = {"out = inp W^T", "dinp += dout W", "dW += dout^T inp"};
    double errs[3] = {rel(out, wo), rel(dinp, wdi), rel(dw, wdw)};
    char what[96];
    snprintf(what, sizeof(what), "matmuls through cuBLAS N %d IC %d OC %d", N, IC, OC);
    report(what, names, errs, 3);
}

// rel: relative keys (--pe shaw) instead of a table: their scores, and dq's share and drk
// through the row sums (rel_key_backward)
static void test_naive_attention(int B, int T, int NH, int NKV, int hd, float alpha, int NB = 0, int rel_keys = 0) {
    size_t nq = (size_t)B * T * NH * hd, nk = (size_t)B * T * NKV * hd, na = (size_t)B * NH * T * T;
    std::vector<float> q = randn(nq, 2.0f), k = randn(nk), v = randn(nk), dy = randn(nq);
    std::vector<float> y(nq, NAN), att(na, NAN), datt(na, NAN), dq(nq, NAN), dk(nk, NAN), dv(nk, NAN);
    std::vector<float> diag((size_t)B * NH * T, NAN), rowg((size_t)B * T * NH * NB, NAN), drk((size_t)NB * hd, 0.0f);
    TestBias tb = test_bias(NH, T, alpha, NB, rel_keys ? hd : 0);
    if (rel_keys) rel_scores(tb, q, B, T, hd);
    AttRef ref = attention_reference(q, k, v, dy, B, T, NH, NKV, hd, tb);
    AttnBias ab = tb.ab();
    attention_forward(y.data(), att.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, hd, ab);
    attention_backward(dq.data(), dk.data(), dv.data(), NB && !rel_keys ? diag.data() : nullptr, datt.data(), dy.data(),
                       att.data(), q.data(), k.data(), v.data(), B, T, NH, NKV, hd);
    if (rel_keys) rel_key_backward(dq.data(), drk.data(), rowg.data(), datt.data(), q.data(), tb.rk.data(), &ab, B, T, NH, hd);
    const char *names[6] = {"y", "P", "dq", "dk", "dv", rel_keys ? "drk" : "dtable"};
    double errs[6] = {rel(y, ref.y), rel(att, ref.P), rel(dq, ref.dq), rel(dk, ref.dk), rel(dv, ref.dv),
                      rel_keys ? rel(drk, ref.drk) : NB ? rel(table_grad(tb, diag, B, NH, T), ref.dtable) : 0};
    char what[160];
    snprintf(what, sizeof(what), "naive attention (cuBLAS + kernels) B %d T %d NH %d NKV %d hd %d%s", B, T, NH, NKV, hd,
             bias_name(alpha, NB, rel_keys));
    report(what, names, errs, NB ? 6 : 5);
}

// T-PE's function (--pe tpe): the keys of n distances from fp32 weights, and the weights'
// gradients from the keys' (tpe_keys, tpe_backward), against float64
static void test_tpe(int n, int hd, float alpha) {
    const int H = TPE_HIDDEN;
    std::vector<float> w1 = randn(H), b1 = randn(H), w2 = randn((size_t)hd * H, 0.02f), u(n), drk = randn((size_t)n * hd);
    for (int d = 0; d < n; d++) u[d] = log1pf(alpha * (float)d);
    std::vector<float> rk((size_t)n * hd, NAN), dw1(H, 0.0f), db1(H, 0.0f), dw2((size_t)hd * H, 0.0f);
    std::vector<double> wrk((size_t)n * hd, 0), wdw1(H, 0), wdb1(H, 0), wdw2((size_t)hd * H, 0);
    for (int d = 0; d < n; d++)
        for (int j = 0; j < H; j++) {
            double a = tanh((double)w1[j] * u[d] + b1[j]), da = 0;
            for (int c = 0; c < hd; c++) {
                wrk[(size_t)d * hd + c] += (double)w2[c * H + j] * a;
                wdw2[c * H + j] += (double)drk[(size_t)d * hd + c] * a;
                da += (double)w2[c * H + j] * drk[(size_t)d * hd + c];
            }
            wdw1[j] += da * (1 - a * a) * u[d];
            wdb1[j] += da * (1 - a * a);
        }
    tpe_keys(rk.data(), u.data(), w1.data(), b1.data(), w2.data(), n, hd);
    tpe_backward(dw1.data(), db1.data(), dw2.data(), drk.data(), u.data(), w1.data(), b1.data(), w2.data(), n, hd);
    const char *names[4] = {"keys", "dw1", "db1", "dw2"};
    double errs[4] = {rel(rk, wrk), rel(dw1, wdw1), rel(db1, wdb1), rel(dw2, wdw2)};
    char what[96];
    snprintf(what, sizeof(what), "T-PE's function: %d distances at alpha %g, hd %d", n, alpha, hd);
    report(what, names, errs, 4);
}

// TUPE (--pe tupe): the LayerNorm of the position rows, the projected positions, their term
// (after a cache of q_offset keys), the queries' scale, and the backward (dX summed over b,
// the projections', their bias's, the LayerNorm's and wpe's gradients), against float64
static void test_tupe(int B, int NH, int hd, int C, int Tq, int q_offset) {
    int QD = NH * hd, n = q_offset + Tq;
    double sc = 1.0 / sqrt((double)hd), qs = 1.0 / sqrt(2.0);
    std::vector<float> wpe = randn((size_t)n * C), uq = randn((size_t)QD * C, 0.2f), uk = randn((size_t)QD * C, 0.2f);
    std::vector<float> lnw = randn(C, 0.3f), lnb = randn(C, 0.3f), bq = randn(QD, 0.5f);
    for (float &v : lnw) v += 1.0f;
    TupeWeights w = {wpe.data(), lnw.data(), lnb.data(), uq.data(), uk.data(), bq.data()};
    std::vector<float> pq((size_t)n * QD, NAN), pk((size_t)n * QD, NAN), pair((size_t)NH * Tq * n, NAN);
    std::vector<float> p((size_t)n * C, NAN), mr((size_t)2 * n, NAN);
    std::vector<double> wp((size_t)n * C), xh((size_t)n * C), rs(n), wpq((size_t)n * QD, 0), wpk((size_t)n * QD, 0),
        wpair((size_t)NH * Tq * n, 0);
    for (int t = 0; t < n; t++) {  // the LayerNorm in float64
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += wpe[(size_t)t * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (wpe[(size_t)t * C + c] - m) * (wpe[(size_t)t * C + c] - m);
        rs[t] = 1.0 / sqrt(v / C + TUPE_LN_EPS);
        for (int c = 0; c < C; c++) {
            xh[(size_t)t * C + c] = (wpe[(size_t)t * C + c] - m) * rs[t];
            wp[(size_t)t * C + c] = xh[(size_t)t * C + c] * lnw[c] + lnb[c];
        }
    }
    for (int t = 0; t < n; t++)
        for (int o = 0; o < QD; o++) {
            for (int c = 0; c < C; c++) {
                wpq[(size_t)t * QD + o] += wp[(size_t)t * C + c] * uq[(size_t)o * C + c];
                wpk[(size_t)t * QD + o] += wp[(size_t)t * C + c] * uk[(size_t)o * C + c];
            }
            wpq[(size_t)t * QD + o] = (wpq[(size_t)t * QD + o] + bq[o]) * qs;
        }
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < Tq; t++)
            for (int s = 0; s <= q_offset + t; s++)
                for (int c = 0; c < hd; c++)
                    wpair[((size_t)h * Tq + t) * n + s] +=
                        wpq[(size_t)(q_offset + t) * QD + h * hd + c] * wpk[(size_t)s * QD + h * hd + c] * sc;
    tupe_project(pq.data(), pk.data(), p.data(), mr.data(), w, n, C, QD);
    tupe_pair(pair.data(), pq.data(), pk.data(), NH, Tq, n, q_offset, hd);
    std::vector<float> x = randn(100), x0 = x;
    scale_array(x.data(), TUPE_QSCALE, x.size());
    std::vector<double> wx(x0.begin(), x0.end());
    for (double &v : wx) v *= qs;
    // the backward at T = n (training: no cache)
    size_t nn = (size_t)NH * n * n;
    std::vector<float> ds = randn((size_t)B * nn), D = randn(nn), dpq((size_t)n * QD), dpk((size_t)n * QD);
    std::vector<float> dp((size_t)n * C);
    std::vector<double> wD(D.begin(), D.end());
    for (size_t i = 0; i < nn; i++)
        if ((int)(i % n) <= (int)((i / n) % n))
            for (int b = 0; b < B; b++) wD[i] += (double)ds[(size_t)b * nn + i] / sc;
    tupe_pair_grad(D.data(), ds.data(), B, NH, n, hd);
    std::vector<float> dwpe = randn((size_t)n * C), duq = randn((size_t)QD * C), duk = randn((size_t)QD * C);
    std::vector<float> dlnw = randn(C), dlnb = randn(C), dbq = randn(QD);
    std::vector<double> wdwpe(dwpe.begin(), dwpe.end()), wduq(duq.begin(), duq.end()), wduk(duk.begin(), duk.end());
    std::vector<double> wdlnw(dlnw.begin(), dlnw.end()), wdlnb(dlnb.begin(), dlnb.end()), wdbq(dbq.begin(), dbq.end());
    std::vector<double> gq((size_t)n * QD, 0), gk((size_t)n * QD, 0), gp((size_t)n * C, 0);
    for (int t = 0; t < n; t++)
        for (int o = 0; o < QD; o++)
            for (int s = 0; s <= t; s++) {
                double d = D[((size_t)(o / hd) * n + t) * n + s];  // the kernel's own D: this step alone
                gq[(size_t)t * QD + o] += d * pk[(size_t)s * QD + o] * sc * qs;
                gk[(size_t)s * QD + o] += d * pq[(size_t)t * QD + o] * sc;
            }
    for (int t = 0; t < n; t++)
        for (int o = 0; o < QD; o++) {
            wdbq[o] += gq[(size_t)t * QD + o];
            for (int c = 0; c < C; c++) {
                wduq[(size_t)o * C + c] += gq[(size_t)t * QD + o] * wp[(size_t)t * C + c];
                wduk[(size_t)o * C + c] += gk[(size_t)t * QD + o] * wp[(size_t)t * C + c];
                gp[(size_t)t * C + c] +=
                    gq[(size_t)t * QD + o] * uq[(size_t)o * C + c] + gk[(size_t)t * QD + o] * uk[(size_t)o * C + c];
            }
        }
    for (int t = 0; t < n; t++) {  // through the LayerNorm
        double mg = 0, mgx = 0;
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)t * C + c;
            wdlnw[c] += gp[i] * xh[i];
            wdlnb[c] += gp[i];
            mg += gp[i] * lnw[c] / C;
            mgx += gp[i] * lnw[c] * xh[i] / C;
        }
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)t * C + c;
            wdwpe[i] += rs[t] * (gp[i] * lnw[c] - mg - xh[i] * mgx);
        }
    }
    TupeGrads g = {dwpe.data(), dlnw.data(), dlnb.data(), duq.data(), duk.data(), dbq.data()};
    tupe_backward(g, dpq.data(), dpk.data(), dp.data(), D.data(), pq.data(), pk.data(), p.data(), mr.data(), w, n, NH, hd,
                  C);
    const char *names[11] = {"p", "pq", "pk", "pair", "scale", "D", "duq", "duk", "dbq", "dln", "dwpe"};
    double errs[11] = {rel(p, wp), rel(pq, wpq), rel(pk, wpk), rel(pair, wpair), rel(x, wx), rel(D, wD), rel(duq, wduq),
                       rel(duk, wduk), rel(dbq, wdbq), std::max(rel(dlnw, wdlnw), rel(dlnb, wdlnb)), rel(dwpe, wdwpe)};
    char what[128];
    snprintf(what, sizeof(what), "TUPE's untied positions: B %d NH %d hd %d C %d, %d queries after %d keys", B, NH, hd, C, Tq,
             q_offset);
    report(what, names, errs, 11);
}

// A learned bias (llmc/attn_bias.h's BIAS_FN_TABLE) through the generic kernels: its term
// (bias_fn_fill) against the encoding's function called on the host, and its gradient
// (bias_fn_backward: chunks into partial rows, rows summed in order) from a random term
// gradient against each element's own gradient (the function's, at dy = 1) summed in
// double. The tensors at the trainer's init (llmc/checkpoint.h), one that starts at 0 drawn N(0,1);
// Tq queries after q_offset keys for the term, training's shape (T = n) for the gradient.
static void test_bias_fn(int pe, int NH, int n, int Tq, int q_offset, float alpha, int B) {
    Config c;
    config_defaults(&c);
    c.V = 50, c.Vp = 128, c.C = 8 * NH, c.L = 1, c.NH = NH, c.NKV = NH, c.F = 16, c.T = n, c.pe = pe;
    c.rel_clip = 5, c.t5_buckets = 8, c.t5_max_distance = 40;
    Shape shapes[NP];
    param_shapes(&c, shapes);
    std::vector<std::vector<float>> w(NP), dw(NP);
    const float *wp[NP];
    float *dwp[NP];
    for (int i = 0; i < NP; i++) w[i].resize(shapes[i].numel + 1), dw[i].assign(shapes[i].numel + 1, 0.0f);
    for (int i = 0; i < NP; i++) wp[i] = w[i].data(), dwp[i] = dw[i].data();
    param_init(&c, (float *const *)wp, 5);
    for (int k = 0; k < BP_N; k++)  // a tensor that starts at 0 (eRPE's, T5's table) drawn N(0, 1)
        if (shapes[P_BIAS0 + k].numel && w[P_BIAS0 + k][0] == 0.0f)
            for (float &x : w[P_BIAS0 + k]) x = rng_normal(&rng);
    if (pe == PE_FIRE)  // L = m * 512 among the queries' positions (not on one), so both sides of max(L, i) run
        w[P_FIRE_L_MULT][0] = alpha * (q_offset + Tq / 2 + 0.25f) / FIRE_LENGTH;
    BiasPass bp;
    memset(&bp, 0, sizeof(bp));
    bp.pe = pe, bp.fn = 1, bp.rs = rel_shape_of(&c), bp.alpha[0] = alpha;
    BiasFn f = bias_fn_layer(&bp, 0, &c, shapes, wp, dwp);
    int per_query = f.per_query, Tk = q_offset + Tq;
    size_t nt = (size_t)NH * Tk * (per_query ? Tq : 1);
    std::vector<float> term(nt, NAN);
    std::vector<double> wterm(nt);
    for (size_t i = 0; i < nt; i++) wterm[i] = bias_fn_fill_at(&f, i, Tq, Tk, q_offset);
    bias_fn_fill(term.data(), &f, Tq, Tk, q_offset);
    // the gradient at T = n: dterm (B, NH, n) per distance, or (NH, n, n) per query and key
    std::vector<float> dterm = randn(per_query ? (size_t)NH * n * n : (size_t)B * NH * n);
    std::vector<double> want(f.P, 0.0);
    std::vector<float> one(f.P);
    float *g[BP_N];
    for (int k = 0; k < BP_N; k++) g[k] = f.w[k] ? one.data() + f.off[k] : NULL;
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < (per_query ? n : 1); t++)
            for (int s = 0; s < n && (!per_query || s <= t); s++) {
                double dy = 0;
                if (per_query) dy = dterm[((size_t)h * n + t) * n + s];
                else for (int b = 0; b < B; b++) dy += dterm[((size_t)b * NH + h) * n + s];
                std::fill(one.begin(), one.end(), 0.0f);
                bias_fn_grad(&f, h, f.alpha * (float)t, f.alpha * (float)(per_query ? t - s : s), 1.0f, g);
                for (int p = 0; p < f.P; p++) want[p] += dy * one[p];
            }
    bias_fn_backward(&f, dterm.data(), per_query ? 1 : B, n, n);
    std::vector<float> got;
    for (int k = 0; k < BP_N; k++)
        if (f.w[k]) got.insert(got.end(), f.dw[k], f.dw[k] + f.n_w[k]);
    const char *names[2] = {"term", "gradient"};
    double errs[2] = {rel(term, wterm), rel(got, want)};
    char what[160];
    snprintf(what, sizeof(what), "learned bias --pe %s: term and gradient, NH %d n %d (%d queries after %d), alpha %g, B %d",
             PE_NAMES[pe], NH, n, Tq, q_offset, alpha, B);
    report(what, names, errs, 2);
}

int main() {
    test_flash(2, 100, 6, 2, 16, 0.0f);  // GQA, T off the tile sizes
    test_flash(1, 130, 4, 4, 64, 1.0f);  // ALiBi, hd 64
    test_flash(1, 70, 4, 1, 128, 0.0f);  // MQA, hd 128
    test_flash(2, 64, 2, 2, 8, 8.0f);    // ALiBi at alpha 8, one block
    test_flash(1, 1, 2, 1, 32, 0.0f);    // T 1
    test_flash(1, 200, 8, 2, 48, 0.0f);  // hd 48 (the deep preset), several blocks
    test_flash(2, 90, 4, 2, 16, 2.0f, 6);  // ALiBi and a learned table (the attention-score hook)
    test_flash_tc(2, 100, 6, 2, 16, 0.0f);  // the same shapes in bf16 on tensor cores
    test_flash_tc(1, 130, 4, 4, 64, 1.0f);
    test_flash_tc(1, 70, 4, 1, 128, 0.0f);
    test_flash_tc(2, 64, 2, 2, 8, 8.0f);
    test_flash_tc(1, 1, 2, 1, 32, 0.0f);
    test_flash_tc(1, 200, 8, 2, 48, 0.0f);
    test_flash_tc(1, 90, 2, 1, 20, 0.0f);  // hd 20: rows not 16-byte aligned, element loads
    test_flash_tc(2, 90, 4, 2, 16, 0.0f, 6);  // a learned table
    test_flash_variants(2, 200, 6, 2, 64, 0.0f);  // GQA, four query tiles, the last one partial
    test_flash_variants(1, 130, 4, 4, 64, 1.0f);  // ALiBi
    test_flash_variants(1, 100, 2, 1, 128, 0.0f);  // MQA, hd 128
    test_flash_variants(2, 90, 4, 2, 32, 2.0f, 6);  // ALiBi and a learned table, hd 32
    test_flash_variants(1, 64, 2, 2, 32, 8.0f);  // one tile, ALiBi at alpha 8
    test_flash_forward_fallbacks();
    test_rmsnorm(37, 100, 1);
    test_rmsnorm(13, 33, 0);
    test_rmsnorm(8, 384, 1);
    test_rmsnorm(150, 64, 0);   // three blocks of v2's 64 rows, the last partial
    test_rmsnorm(200, 384, 1);  // the 10m width over four blocks
    test_online(2, 50, 50, 0, 4, 2, 32, 0, 0.0f);     // whole sequences, GQA, 4 blocks of rows
    test_online(1, 1, 77, 76, 4, 2, 64, 0, 0.0f);     // one token against a KV cache
    test_online(1, 20, 70, 50, 2, 1, 48, 0, 0.0f);    // a chunk of 20 after 50 cached keys
    test_online(1, 100, 100, 0, 2, 1, 16, 40, 1.0f);  // a band of 40 (tiles skipped before it), ALiBi
    test_online(1, 40, 40, 0, 2, 2, 256, 0, 0.0f);    // hd 256 (ATT_MAX_HD: 8 accumulators per lane and row)
    test_online(1, 10, 60, 50, 4, 2, 32, 0, 0.5f, 5);  // a chunk after a cache, ALiBi and a learned table
    test_online(2, 30, 30, 0, 4, 2, 16, 0, 0.0f, 7, 1);  // relative keys (each query's scores)
    test_online(1, 10, 60, 50, 4, 2, 32, 0, 0.0f, 5, 1);  // relative keys, a chunk after a cache
    test_online(1, 12, 70, 58, 4, 2, 16, 0, 0.0f, 6, 0, 1);  // TUPE's per-pair term with T5's table, after a cache
    test_online(1, 40, 40, 0, 2, 1, 32, 16, 0.0f, 0, 0, 1);  // the per-pair term alone, whole, a band of 16
    test_rope(2, 37, 3, 16, 1.0f, 0);
    test_rope(1, 300, 2, 64, 8.0f, 0);  // angles to 2400 rad
    test_rope(2, 20, 2, 32, 1.0f, 1);
    test_rope(3, 20, 2, 32, 1.0f, 2);
    test_rope(2, 37, 3, 16, 8.0f, 0, PE_XPOS, ROT_QUERY);  // a rotary variant: the same kernels, its row's scale
    test_rope(2, 37, 3, 32, 8.0f, 0, PE_XPOS, ROT_KEY);
    test_rope(3, 20, 2, 32, 1.0f, 2, PE_XPOS, ROT_KEY);
    test_sinusoidal(2, 50, 64, 4.0f);
    test_classifier(5, 257, 384, 0, 0);
    test_classifier(4, 1000, 1024, 1, 0);
    test_classifier(2, 50277, 50304, 0, 0);  // the GPT-2/NeoX vocabulary, V ending mid-pack
    test_classifier(3, 257, 384, 1, 1);      // bf16: packs of 8
    test_classifier(2, 50277, 50304, 0, 1);
    test_lm_head(13, 32, 257, 384, 5, 1, 0);  // chunks of 5, 5, 3; loss masks
    test_lm_head(12, 16, 1000, 1024, 4, 0, 0);  // chunks that divide the rows
    test_lm_head(3, 16, 50277, 50304, 2, 0, 0);  // the GPT-2/NeoX vocabulary: 27 padded rows
    test_lm_head(9, 32, 257, 384, 4, 1, 1);  // bf16: chunks of 4, 4, 1
    test_classifier_variants();
    test_gru(3, 40);
    test_small();
    test_matmuls(7, 5, 3);
    test_matmuls(33, 64, 96);
    test_naive_attention(2, 24, 6, 2, 16, 0.0f);  // GQA: the group's heads summed by beta = 1
    test_naive_attention(1, 40, 4, 4, 32, 2.0f);  // ALiBi
    test_naive_attention(2, 30, 4, 2, 16, 0.0f, 5);  // a learned table: its gradient through the diagonal sums
    test_naive_attention(2, 30, 4, 2, 16, 1.0f, 6, 1);  // ALiBi and relative keys: dq's share and drk by row sums
    test_tpe(70, 16, 2.5f);  // T-PE's keys from its function, and the function's gradients
    test_tpe(300, 64, 0.125f);
    test_tupe(2, 4, 16, 64, 40, 0);  // TUPE's term and backward, training's shape
    test_tupe(1, 2, 32, 48, 6, 64);  // the term of 6 queries after a cache of 64 keys
    test_bias_fn(PE_ERPE, 4, 150, 150, 0, 1.5f, 2);  // a table's buckets: several chunks, a part one
    test_bias_fn(PE_T5, 3, 70, 10, 60, 2.0f, 3);      // T5's log buckets, 10 queries after 60 keys
    test_bias_fn(PE_KERPLE, 4, 130, 130, 0, 2.5f, 2);  // learned scalars per head
    test_bias_fn(PE_FIRE, 3, 40, 40, 0, 1.5f, 1);      // per query and key: training's shape, L = 30.375 among the queries
    test_bias_fn(PE_FIRE, 2, 50, 8, 42, 1.0f, 1);      // the term of 8 queries after 42 keys, L = 46.25 among them
    printf("%d passed, %d failed, 0 skipped\n", n_pass, n_fail);
    return n_fail != 0;
}
