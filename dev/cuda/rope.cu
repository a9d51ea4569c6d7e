// dev/cuda/rope.cu: RoPE, rotate-half layout (element j pairs with j + hd/2), in place on
// x (B,T,H,hd). THE POSAUG HOOK: angle = p[b][t] * inv_freq[j] in fp32 from the pass's
// positions (the host fills them, p_t = alpha * t + offset in the cases below, without fused
// multiply-add), then an accurate sincosf (never __sinf/__cosf: wrong on unreduced angles
// of 1e5 rad).
// cos and sin are scaled by mscale; sign -1 is the backward (rotation by -angle).
//
//   v1  one thread per (b,t,h,j) pair, a sincosf per pair
//   v2  one thread per (b,t, VEC consecutive j): VEC sincosf reused across all H heads;
//       128-bit loads/stores (bf16x8 / float4) of both halves
//   v3  one block per TT=4 positions: the cos/sin table of those positions computed once
//       into shared memory (sincosf per (t,j), shared by every sequence and head), then
//       the block streams (b, t, h, VEC-group) items with 128-bit loads/stores; positions
//       shared by the sequences only
// All three live in llmc/cuda/positions.cuh; nothing here is a copy.
//
// Validation (on fresh random inputs, CPU reference = rope_rotate of train_gpt_cpu.c):
// training shapes at alpha 1, large angles at alpha 8 over T = 16384 (angles up to 131064
// rad), the backward (sign -1) with offset, mscale 1.2 and hd 128, and positions of each
// sequence its own (an offset per sequence).
// Benchmark: q of the 10M preset, B=16 T=2048 NH=6 hd=64, at alpha 1 and alpha 8.
//
// usage: ./rope_bin [VERSION] [--no-bench]
#include "common.h"
#include "../../llmc/cuda/positions.cuh"

// ----------------------------------------------------------------------------
// CPU reference: rope_rotate of train_gpt_cpu.c (serial). Built with -ffp-contract=off so
// p and the angle round exactly as on the device.
static void rope_cpu(float *x, int B, int T, int H, int hd, const float *p, int seq_stride, const float *inv_freq,
                     float mscale, float sign) {
    int half = hd / 2, nb = seq_stride ? B : 1;
    std::vector<float> cs((size_t)nb * T * half * 2);  // (nb, T, half, {cos,sin})
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < T; t++) {
            float *c = cs.data() + ((size_t)b * T + t) * half * 2;
            for (int j = 0; j < half; j++) {
                float angle = p[(size_t)b * seq_stride + t] * inv_freq[j];  // libm sinf/cosf reduce large angles exactly
                c[2 * j + 0] = cosf(angle) * mscale;
                c[2 * j + 1] = sign * sinf(angle) * mscale;
            }
        }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *c = cs.data() + ((size_t)(seq_stride ? b : 0) * T + t) * half * 2;
            for (int h = 0; h < H; h++) {
                float *v = x + (((size_t)b * T + t) * H + h) * hd;
                for (int j = 0; j < half; j++) {
                    float x0 = v[j], x1 = v[j + half], co = c[2 * j], si = c[2 * j + 1];
                    v[j] = x0 * co - x1 * si;
                    v[j + half] = x1 * co + x0 * si;
                }
            }
        }
}

// ----------------------------------------------------------------------------
// the versions: llmc/cuda/positions.cuh's variants (ROPE_VARIANT is the trainer's),
// launched by its rope_launch

#define NV 3
static const char *const VERSIONS[NV + 1] = {
    "", "one thread per pair, sincosf per (b,t,h,j)",
    "one thread per (b,t,8 pairs): sincosf once per (b,t,j) for all heads, 128-bit loads/stores",
    "block per 4 positions: cos/sin table in shared memory (sincosf once per (t,j)), 128-bit loads/stores"};

// whether version v itself runs a rotation of x (rope_launch would run a lower one otherwise)
static bool supported(int v, const floatX *x, int hd, int seq_stride) {
    return hd % 2 == 0 && hd / 2 <= MAX_HALF_HD && rope_variant_for(v, x, hd, seq_stride) == v;
}

static PosStep make_pos(int hd, float mscale) {
    PosStep ps;
    memset(&ps, 0, sizeof(ps));
    ps.mscale = mscale;
    pos_inv_freq(ps.inv_freq, hd, 10000.0);
    return ps;
}

typedef struct {
    const char *name;
    int B, T, H, hd;
    float alpha, offset, mscale, sign;
    float seq_offset;  // sequence b's positions start at b * seq_offset (0: one row shared by all)
} RopeCase;

// the positions of a case: alpha * t + offset (+ b * seq_offset), rounded as llmc/schedule.h's pos_pass
static std::vector<float> case_positions(const RopeCase &c, int *seq_stride) {
    int nb = c.seq_offset != 0.0f ? c.B : 1;
    *seq_stride = nb > 1 ? c.T : 0;
    std::vector<float> p((size_t)nb * c.T);
    for (int b = 0; b < nb; b++)
        for (int t = 0; t < c.T; t++) p[(size_t)b * c.T + t] = c.alpha * (float)t + (c.offset + (float)b * c.seq_offset);
    return p;
}

int main(int argc, char **argv) {
    Args args = parse_args(argc, argv, "rope", VERSIONS, NV);
    device_init(argv[0]);
    int first = args.version ? args.version : 1, last = args.version ? args.version : NV;
    Verdicts vd;
    memset(&vd, 0, sizeof(vd));

    const RopeCase cases[] = {
        {"train alpha 1", 4, 2048, 6, 64, 1.0f, 0.0f, 1.0f, 1.0f, 0.0f},
        {"alpha 8, T 16384", 1, 16384, 6, 64, 8.0f, 0.5f, 1.0f, 1.0f, 0.0f},  // angles up to 131064.5 rad
        {"backward hd 128", 2, 512, 2, 128, 2.5f, 3.0f, 1.2f, -1.0f, 0.0f},
        {"an offset per sequence", 3, 300, 4, 64, 1.0f, 0.0f, 1.0f, 1.0f, 977.0f},
    };
    Rng rng = rng_make(1337, 1);
    printf("validation (tolerance: norm rel %.0e for %s outputs)\n", FX_TOL, PRECISION_NAME);
    for (const RopeCase &c : cases) {
        size_t n = (size_t)c.B * c.T * c.H * c.hd;
        PosStep ps = make_pos(c.hd, c.mscale);
        int ss;
        std::vector<float> pos = case_positions(c, &ss);
        std::vector<float> x(n);
        fill_normal(x, 0.0f, 1.0f, &rng);
        round_to_x(x);
        std::vector<float> ref = x;
        rope_cpu(ref.data(), c.B, c.T, c.H, c.hd, pos.data(), ss, ps.inv_freq, c.mscale, c.sign);
        floatX *d = dalloc<floatX>(n);
        float *dpos = dalloc<float>(pos.size());
        cudaCheck(cudaMemcpy(dpos, pos.data(), pos.size() * sizeof(float), cudaMemcpyHostToDevice));
        printf("  case %s: B=%d T=%d H=%d hd=%d alpha=%g offset=%g mscale=%g sign=%+g (max angle %.0f rad)\n", c.name,
               c.B, c.T, c.H, c.hd, c.alpha, c.offset, c.mscale, c.sign, pos.back() * ps.inv_freq[0]);
        for (int v = first; v <= last; v++) {
            if (!supported(v, d, c.hd, ss)) {
                printf("   v%d: not supported for hd=%d%s\n", v, c.hd, ss ? " with positions per sequence" : "");
                vd.skipped[v] = 1;
                continue;
            }
            printf("   v%d:\n", v);
            upload_x(d, x);  // in place: the kernel overwrites its input
            rope_launch(v, d, c.B, c.T, c.H, c.hd, dpos, ss, &ps, ROT_QUERY, c.sign);
            cudaCheck(cudaDeviceSynchronize());
            vd.ran[v] = 1;
            if (!ran_variant(VF_ROPE, v) || !check_close("x", download_x(d, n), ref, FX_TOL)) vd.failed[v] = 1;
        }
        cudaCheck(cudaFree(d));
        cudaCheck(cudaFree(dpos));
    }
    for (int v = first; v <= last; v++) verdict_print("rope", v, &vd);

    if (args.bench) {
        int B = 16, T = 2048, H = 6, hd = 64;  // q of the 10M preset
        size_t n = (size_t)B * T * H * hd;
        printf("benchmark: B=%d T=%d H=%d hd=%d (%.1f MiB in place), median of 50 runs, L2 flushed\n", B, T, H, hd,
               n * sizeof(floatX) / 1048576.0);
        measured_copy_gbps();
        std::vector<float> x(n);
        fill_normal(x, 0.0f, 1.0f, &rng);
        floatX *d = dalloc<floatX>(n);
        upload_x(d, x);
        double bytes = 2.0 * n * sizeof(floatX);  // read + write
        float *dpos = dalloc<float>(T);
        for (float alpha : {1.0f, 8.0f}) {
            PosStep ps = make_pos(hd, 1.0f);
            RopeCase bc = {"bench", B, T, H, hd, alpha, 0.0f, 1.0f, 1.0f, 0.0f};
            int ss;
            std::vector<float> pos = case_positions(bc, &ss);
            cudaCheck(cudaMemcpy(dpos, pos.data(), T * sizeof(float), cudaMemcpyHostToDevice));
            for (int v = first; v <= last; v++) {
                if (vd.failed[v] || !supported(v, d, hd, 0)) continue;
                float us = bench_us([&] { rope_launch(v, d, B, T, H, hd, dpos, 0, &ps, ROT_QUERY, 1.0f); });
                char label[32];
                snprintf(label, sizeof(label), " (alpha %g)", alpha);
                report_bandwidth("rope", v, label, us, bytes);
            }
        }
        cudaCheck(cudaFree(d));
        cudaCheck(cudaFree(dpos));
    }
    return verdict_exit("rope", first, last, &vd);
}
