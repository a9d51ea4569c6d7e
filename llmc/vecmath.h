// Vectorized exp, sum and max over float arrays, for the CPU trainer's softmaxes and SiLU
// (libm's scalar expf took about a tenth of a training step), and the AdamW update. Every
// result is independent of the thread count and the same from run to run: sums use 16
// partial sums in a fixed pattern, then add them in order.
//
// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two so r is
// exact to ~3e-10), |r| <= ln(2)/2; exp(r) by its Taylor polynomial of degree 7 (the
// truncation error r^8/8! < 5e-9 is 0.04 of an ulp), evaluated with fused multiply-adds.
// Against double-precision exp on 10M random points of [-104, 89] (test_gpt): within
// 1 ulp of the true value for x in [-87.3, 88.7] (0.92 ulp measured, in the AVX-512, AVX2
// and portable builds alike, which agree bit for bit); below, gradual underflow to 0 (an
// absolute error under 1.5e-45); above 88.7228, inf. exp(-inf) = 0, NaN gives NaN.
#pragma once
#include "utils.h"
#include <math.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#define EXP_LN2_HI 0.693115234375f         // ln 2 = HI + LO (+1.6e-12): HI has 12 significant bits,
#define EXP_LN2_LO 3.194618329871446e-05f  // so n * HI is exact for |n| < 2^12
#define EXP_LOG2E 1.44269504088896341f
// exp(r)'s Taylor coefficients 1/k!, from k = 7 down to 0: the Horner order of every form below
static const float EXP_POLY[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

// The scalar form (the array's tail, and the portable build): the same steps in the same order.
static inline float exp_scalar(float x) {
    if (!(x > -104.0f)) return x != x ? x : 0.0f;  // NaN, or below the smallest denormal
    if (x > 88.7228f) return INFINITY;
    float n = rintf(x * EXP_LOG2E), r = fmaf(-n, EXP_LN2_LO, fmaf(-n, EXP_LN2_HI, x));
    float p = EXP_POLY[0];
    for (int k = 1; k < 8; k++) p = fmaf(p, r, EXP_POLY[k]);
    return ldexpf(p, (int)n);
}

#if defined(__AVX512F__)
static inline __m512 exp_v16(__m512 x) {
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_LO), _mm512_fnmadd_ps(n, _mm512_set1_ps(EXP_LN2_HI), x));
    __m512 p = _mm512_set1_ps(EXP_POLY[0]);
#pragma GCC unroll 8
    for (int k = 1; k < 8; k++) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(EXP_POLY[k]));
    __m512 y = _mm512_scalef_ps(p, n);  // p * 2^n, with overflow to inf and gradual underflow
    __mmask16 lo = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_LE_OQ);   // exp -> 0
    __mmask16 hi = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.7228f), _CMP_GT_OQ);  // exp -> inf
    y = _mm512_mask_blend_ps(lo, y, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(hi, y, _mm512_set1_ps(INFINITY));
}
#endif

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
static inline __m256 exp_v8(__m256 x) {
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_LO), _mm256_fnmadd_ps(n, _mm256_set1_ps(EXP_LN2_HI), x));
    __m256 p = _mm256_set1_ps(EXP_POLY[0]);
#pragma GCC unroll 8
    for (int k = 1; k < 8; k++) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_POLY[k]));
    // p * 2^n as p * 2^n1 * 2^n2, n1 = n / 2: both factors normal, one rounding (like ldexpf)
    __m256i ni = _mm256_cvtps_epi32(_mm256_max_ps(_mm256_min_ps(n, _mm256_set1_ps(200.0f)), _mm256_set1_ps(-200.0f)));
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1), bias = _mm256_set1_epi32(127);
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23))),
                             _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23)));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LE_OQ));
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(88.7228f), _CMP_GT_OQ));
}
#endif

// y[i] = exp(a * x[i] + b), the argument formed with one rounding (fmaf); y may be x. The
// vector builds take the tail as a masked vector too (attention's rows are rarely a
// multiple of 16 long; the scalar form's ldexpf was most of their cost).
static inline void exp_array(float *y, const float *x, float a, float b, size_t n) {
    size_t i = 0;
#if defined(__AVX512F__)
    __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp_v16(_mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), vb)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, exp_v16(_mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), vb)));
    }
    return;
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_v8(_mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), vb)));
    if (i < n) {
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y + i, m, exp_v8(_mm256_fmadd_ps(va, _mm256_maskload_ps(x + i, m), vb)));
    }
    return;
#endif
    for (; i < n; i++) y[i] = exp_scalar(fmaf(a, x[i], b));
}

// the 16 partial sums added in order: the last step of sum_array and exp_sum_array
static inline double sum_parts(const double part[16]) {
    double s = 0;
    for (int j = 0; j < 16; j++) s += part[j];
    return s;
}

// sum of x[0..n) in double: 16 partial sums (x[i] goes to sum i % 16), then added in order
static inline double sum_array(const float *x, size_t n) {
    double part[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) part[j] += (double)x[i + j];
    for (int j = 0; i < n; i++, j++) part[j] += (double)x[i];
    return sum_parts(part);
}

// max of x[0..n) (n >= 1); exact in any order. The vector builds keep the 16 partial maxima
// in one or two vectors, their tail masked, and reduce them in the scalar form's order.
static inline float max_array(const float *x, size_t n) {
    float part[16];
    size_t i = 0;
#if defined(__AVX512F__)
    __m512 vm = _mm512_set1_ps(x[0]);
    for (; i + 16 <= n; i += 16) vm = _mm512_max_ps(_mm512_loadu_ps(x + i), vm);  // x > part ? x : part
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        vm = _mm512_mask_max_ps(vm, m, _mm512_maskz_loadu_ps(m, x + i), vm);
    }
    _mm512_storeu_ps(part, vm);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 vm0 = _mm256_set1_ps(x[0]), vm1 = vm0;  // partial maxima 0..7, 8..15
    for (; i + 16 <= n; i += 16) {
        vm0 = _mm256_max_ps(_mm256_loadu_ps(x + i), vm0);  // x > part ? x : part
        vm1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), vm1);
    }
    if (i < n) {
        __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), rem = _mm256_set1_epi32((int)(n - i));
        __m256i m0 = _mm256_cmpgt_epi32(rem, lane), m1 = _mm256_cmpgt_epi32(rem, _mm256_add_epi32(lane, _mm256_set1_epi32(8)));
        vm0 = _mm256_blendv_ps(vm0, _mm256_max_ps(_mm256_maskload_ps(x + i, m0), vm0), _mm256_castsi256_ps(m0));
        vm1 = _mm256_blendv_ps(vm1, _mm256_max_ps(_mm256_maskload_ps(x + i + 8, m1), vm1), _mm256_castsi256_ps(m1));
    }
    _mm256_storeu_ps(part, vm0);
    _mm256_storeu_ps(part + 8, vm1);
#else
    for (int j = 0; j < 16; j++) part[j] = x[0];
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) part[j] = x[i + j] > part[j] ? x[i + j] : part[j];
    for (int j = 0; i < n; i++, j++) part[j] = x[i] > part[j] ? x[i] : part[j];
#endif
    float m = part[0];
    for (int j = 1; j < 16; j++) m = part[j] > m ? part[j] : m;
    return m;
}

// y[i] = exp(x[i] + b), returning sum_array(y, n): the softmax's two passes in one, with the
// same bits (the vector builds add each 16 values into 16 double partial sums, a masked tail
// adding +0 to the partial sums past it, which leaves them as they are).
static inline double exp_sum_array(float *y, const float *x, float b, size_t n) {
#if defined(__AVX512F__)
    __m512 one = _mm512_set1_ps(1.0f), vb = _mm512_set1_ps(b);
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();  // partial sums 0..7, 8..15
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 e = _mm512_maskz_mov_ps(m, exp_v16(_mm512_fmadd_ps(one, _mm512_maskz_loadu_ps(m, x + i), vb)));
        _mm512_mask_storeu_ps(y + i, m, e);
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    double part[16];
    _mm512_storeu_pd(part, lo);
    _mm512_storeu_pd(part + 8, hi);
    return sum_parts(part);
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 one = _mm256_set1_ps(1.0f), vb = _mm256_set1_ps(b);
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};  // sums 0..3, .., 12..15
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t i = 0; i < n; i += 8) {
        int h = (i / 8) % 2;  // which half of the 16 partial sums
        __m256 e;
        if (i + 8 <= n) {
            e = exp_v8(_mm256_fmadd_ps(one, _mm256_loadu_ps(x + i), vb));
            _mm256_storeu_ps(y + i, e);
        } else {
            __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - i)), lane);
            e = _mm256_and_ps(exp_v8(_mm256_fmadd_ps(one, _mm256_maskload_ps(x + i, m), vb)), _mm256_castsi256_ps(m));
            _mm256_maskstore_ps(y + i, m, e);
        }
        acc[2 * h] = _mm256_add_pd(acc[2 * h], _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        acc[2 * h + 1] = _mm256_add_pd(acc[2 * h + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double part[16];
    for (int q = 0; q < 4; q++) _mm256_storeu_pd(part + 4 * q, acc[q]);
    return sum_parts(part);
#else
    exp_array(y, x, 1.0f, b, n);
    return sum_array(y, n);
#endif
}

// AdamW on n elements (train_gpt_cpu.c's adamw_update): with g = grad * clip,
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;  p -= lr (m / bc1 / (sqrt(v / bc2) + eps) + wd p)
// every operation rounded in this order (the vector builds do the same operations lane by
// lane: the same bits). Written out because a compiler does not vectorize sqrtf itself (it
// may set errno), and the scalar loop was 2% of the tiny model's step.
typedef struct {
    float clip, b1, b2, one_b1, one_b2, bc1, bc2, lr, eps, wd;  // one_b1 = 1 - b1, one_b2 = 1 - b2
} AdamWArgs;

// The vector loop over whole vectors of W lanes, for the vector type V whose intrinsics are
// named P##_op_ps (P = _mm512 or _mm256): the same operations in the same order as the
// scalar form below
#define ADAMW_VECTORS(V, P, W)                                                                                  \
    V clip = P##_set1_ps(k.clip), b1 = P##_set1_ps(k.b1), b2 = P##_set1_ps(k.b2);                              \
    V ob1 = P##_set1_ps(k.one_b1), ob2 = P##_set1_ps(k.one_b2), bc1 = P##_set1_ps(k.bc1);                      \
    V bc2 = P##_set1_ps(k.bc2), lr = P##_set1_ps(k.lr), eps = P##_set1_ps(k.eps), wd = P##_set1_ps(k.wd);      \
    for (; i + W <= n; i += W) {                                                                                \
        V g = P##_mul_ps(P##_loadu_ps(grad + i), clip);                                                         \
        V mi = P##_add_ps(P##_mul_ps(b1, P##_loadu_ps(m + i)), P##_mul_ps(ob1, g));                             \
        V vi = P##_add_ps(P##_mul_ps(b2, P##_loadu_ps(v + i)), P##_mul_ps(P##_mul_ps(ob2, g), g));              \
        P##_storeu_ps(m + i, mi);                                                                               \
        P##_storeu_ps(v + i, vi);                                                                               \
        V mhat = P##_div_ps(mi, bc1), vhat = P##_div_ps(vi, bc2), pi = P##_loadu_ps(p + i);                     \
        V step = P##_add_ps(P##_div_ps(mhat, P##_add_ps(P##_sqrt_ps(vhat), eps)), P##_mul_ps(wd, pi));          \
        P##_storeu_ps(p + i, P##_sub_ps(pi, P##_mul_ps(lr, step)));                                             \
    }

static inline void adamw_array(float *p, const float *grad, float *m, float *v, size_t n, AdamWArgs k) {
    size_t i = 0;
#if defined(__AVX512F__)
    ADAMW_VECTORS(__m512, _mm512, 16)
#elif defined(__AVX2__) && defined(__FMA__)
    ADAMW_VECTORS(__m256, _mm256, 8)
#endif
    for (; i < n; i++) {
        float g = grad[i] * k.clip;
        m[i] = k.b1 * m[i] + k.one_b1 * g;
        v[i] = k.b2 * v[i] + k.one_b2 * g * g;
        float mhat = m[i] / k.bc1, vhat = v[i] / k.bc2;
        p[i] -= k.lr * (mhat / (sqrtf(vhat) + k.eps) + k.wd * p[i]);
    }
}
