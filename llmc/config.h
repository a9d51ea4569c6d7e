// Run configuration: model presets, command-line flags (shared by both trainers),
// and the checks that turn a nonsense flag into one clear message.
#pragma once
#include "utils.h"
#include <ctype.h>
#include <stddef.h>
#include "attn_bias.h"
#include "tensorfile.h"

typedef struct {
    // model
    int arch;                            // ARCH_TRANSFORMER, or ARCH_GRU (Table 15's recurrent baseline)
    int V, Vp, C, L, NH, NKV, F, T;
    float rope_base, rms_eps;
    // position scheme (the hook)
    int pos_scheme, pe, drope_step, qk_norm;
    float alpha_min, alpha_max;
    char alpha_set[256];                 // discrete, cycle
    int rpe_layers, rpe_eval;
    int pose_scaling;                    // PoSE's interpolation (POSE_SCALING_NAMES)
    int rel_clip;                        // eRPE's and Shaw's clip distance (0: the encoding's default)
    int t5_buckets, t5_max_distance;     // T5's bucket count and the distance its log buckets reach
    int learned_rows;                    // --pe learned: wpe's rows (0: the positions training reaches)
    float ckpt_embed_scale;              // --resume's token-embedding factor (meta.embed_scale); 0: embed_scale's own
    int pos_layers, curriculum_dist;
    POS_PARAM_TABLE(POS_PARAM_FIELD)     // the schemes' numeric parameters (llmc/schedule.h)
    // optimization
    int B, total_batch, steps, warmup;
    float lr, min_lr, weight_decay, beta1, beta2, adam_eps, grad_clip;
    long long seed;
    // data and files
    char model[32], train_data[512], val_data[512], out_dir[512], resume[512], init_from[512], tokenizer[512];
    int ckpt_every, val_every, val_batches, stop_after, overwrite;
    // evaluation
    int eval_len, eval_n, indist_start, eval_only;
    int scaling, yarn_temperature;       // evaluation-time RoPE scaling (llmc/schedule.h)
    float scale_factor, yarn_beta_fast, yarn_beta_slow;
    int gain_window, gain_chunk;         // context gain G(C): the short-context baseline
    char gain_lengths[256];              // C list, comma separated
    char passkey_lengths[256], passkey_prompts[512];
    int passkey_n, passkey_digits;
    char ruler_lengths[256], ruler_prompts[512];  // RULER's single needle
    int ruler_n;
    char hellaswag[512];
    int hellaswag_n;
    char task_eval[512];  // a length-generalization test file (data/rfs_tasks.py)
    char baseline[512], eval_tag[64];
    // generation
    int generate;
    char prompt[512];
    float temperature;
    int threads;
    float max_memory;  // GiB of host memory this run may use; 0: what the machine has available
    int attention;     // train_gpt's training attention: ATTN_NAIVE or ATTN_FLASH (the CPU has one path)
    // the run's flags as a checkpoint keeps them (meta.flags): "name\tvalue\n" per flag given
    // on the command line or adopted from --resume's checkpoint (parse_args)
    char run_flags[8192];
    int scheme_changed;  // --resume given a position-scheme flag that differs from its checkpoint's
    int out_dir_default; // no --out_dir: runs/<model>_<pos>, numbered on when an earlier run holds it
} Config;

enum { ARCH_TRANSFORMER, ARCH_GRU, ARCH_N };
static const char *ARCH_NAMES[ARCH_N] = {"transformer", "gru"};
enum { ATTN_NAIVE, ATTN_FLASH, ATTN_N };
static const char *ATTN_NAMES[ATTN_N] = {"naive", "flash"};
#define FLASH_MAX_HD 128  // the flash kernels' largest head size

typedef struct {
    const char *name;
    int C, L, NH, NKV, F, T, total_batch, warmup, steps;
    float lr, min_lr;
    const char *what;
    int arch;  // GRU presets: hidden size C, L layers (NH, NKV, F unused)
} Preset;

// Paper sizes (PosAug paper Tables 1 and 16; Deep/Wide/33.6M shapes). Batch in sequences.
static const Preset PRESETS[] = {
    {"tiny", 128, 4, 4, 2, 384, 128, 16, 30, 600, 3e-3f, 3e-4f, "laptop default for the built-in corpus (~0.8M params)", ARCH_TRANSFORMER},
    {"10m", 384, 6, 6, 6, 1024, 2048, 128, 500, 1907, 6e-4f, 6e-5f, "10.6M, the ablation model", ARCH_TRANSFORMER},
    {"42m", 768, 6, 12, 12, 2048, 2048, 128, 1000, 3242, 6e-4f, 6e-5f, "42.5M", ARCH_TRANSFORMER},
    {"113m", 768, 12, 12, 12, 3072, 2048, 128, 1000, 8773, 3e-4f, 3e-5f, "113M", ARCH_TRANSFORMER},
    {"425m", 1280, 24, 20, 4, 3584, 2048, 32, 500, 7629, 2e-4f, 2e-5f, "425M, GQA", ARCH_TRANSFORMER},
    {"1b", 2048, 24, 32, 8, 5632, 2048, 32, 500, 7629, 2e-4f, 2e-5f, "1.08B, GQA", ARCH_TRANSFORMER},
    {"deep", 288, 12, 6, 6, 1024, 2048, 128, 500, 1907, 6e-4f, 6e-5f, "Deep 15.3M (Table 9)", ARCH_TRANSFORMER},
    {"wide", 448, 3, 7, 7, 1024, 2048, 128, 500, 1907, 6e-4f, 6e-5f, "Wide 7.6M (Table 9)", ARCH_TRANSFORMER},
    {"33m", 512, 8, 8, 8, 2048, 2048, 128, 500, 1907, 6e-4f, 6e-5f, "33.6M, F = 4C", ARCH_TRANSFORMER},
    {"gru-tiny", 256, 2, 4, 4, 384, 128, 16, 30, 600, 3e-3f, 3e-4f, "GRU, 0.79M without embedding (as tiny)", ARCH_GRU},
    {"gru", 512, 6, 8, 8, 1024, 2048, 128, 500, 1907, 6e-4f, 6e-5f, "GRU, 9.5M without embedding", ARCH_GRU},
    {"gru42m", 768, 12, 12, 12, 2048, 2048, 128, 1000, 3242, 6e-4f, 6e-5f, "GRU, 42.5M without embedding (Table 15's size)", ARCH_GRU},
};
#define N_PRESETS ((int)(sizeof(PRESETS) / sizeof(PRESETS[0])))

static inline void apply_preset(Config *c, const Preset *p) {
    snprintf(c->model, sizeof(c->model), "%s", p->name);
    c->arch = p->arch;
    c->C = p->C; c->L = p->L; c->NH = p->NH; c->NKV = p->NKV; c->F = p->F; c->T = p->T;
    c->total_batch = p->total_batch; c->warmup = p->warmup; c->steps = p->steps;
    c->lr = p->lr; c->min_lr = p->min_lr;
    c->B = p->total_batch < 16 ? p->total_batch : 16;
    if (p->T >= 2048) c->B = 4;
    c->eval_len = 8 * p->T < 16384 ? 8 * p->T : 16384;
}

static inline void config_defaults(Config *c) {
    memset(c, 0, sizeof(*c));
    c->V = 257;  // the byte tokenizer: 256 bytes + end-of-text
    c->rope_base = 10000.0f; c->rms_eps = 1e-5f;
    c->pos_scheme = POS_ROPE; c->alpha_min = 0.125f; c->alpha_max = 8.0f;
    snprintf(c->alpha_set, sizeof(c->alpha_set), "1,2,4,8");
#define POS_PARAM_DEFAULT(field, ctype, argtype, flag, def, scheme, check, must, help) c->field = def;
    POS_PARAM_TABLE(POS_PARAM_DEFAULT)
#undef POS_PARAM_DEFAULT
    c->weight_decay = 0.1f; c->beta1 = 0.9f; c->beta2 = 0.95f; c->adam_eps = 1e-8f; c->grad_clip = 1.0f;
    c->seed = 42;
    snprintf(c->train_data, sizeof(c->train_data), "data/builtin/train.bin");
    snprintf(c->val_data, sizeof(c->val_data), "data/builtin/val.bin");
    c->ckpt_every = 0; c->val_every = 100; c->val_batches = 4;
    c->eval_n = 20; c->indist_start = 64;
    c->yarn_beta_fast = 32.0f; c->yarn_beta_slow = 1.0f;
    c->t5_buckets = 32; c->t5_max_distance = 128;  // T5's (Raffel et al. 2020)
    c->gain_window = -1; c->passkey_n = 100;  // gain_window -1: min(512, T/4)
    c->ruler_n = 50;  // the PosAug paper's 50 examples
    c->temperature = 0.0f;
    c->threads = 0;
    apply_preset(c, &PRESETS[0]);
}

enum { ARG_INT, ARG_FLOAT, ARG_STR, ARG_FLAG, ARG_CHOICE, ARG_RANGE, ARG_I64 };
// What a checkpoint keeps of a flag given to its run (meta.flags), and when --resume adopts
// it: RUN_TRAIN flags when training continues, RUN_SCHEME flags (the position scheme) also
// when the checkpoint is evaluated or sampled. The model's shape comes from meta.config_i.
enum { RUN_NO, RUN_TRAIN, RUN_SCHEME };
typedef struct {
    const char *name;
    int type;
    size_t offset, size;
    const char *help;
    const char *const *choices;  // ARG_CHOICE: the names, stored as their index
    int n_choices;
    int run;                         // RUN_NO, RUN_TRAIN or RUN_SCHEME
    const char *const *choice_help;  // ARG_CHOICE from a table: what each one does (--help), or NULL
} ArgSpec;

static const char *YARN_TEMP_NAMES[2] = {"hf", "paper"};
static const char *RPE_LAYERS_NAMES[2] = {"shared", "independent"};
static const char *RPE_EVAL_NAMES[2] = {"standard", "random"};
#define ARG(name, type, field, help, run) \
    {name, type, offsetof(Config, field), sizeof(((Config *)0)->field), help, NULL, 0, run, NULL}
#define A(name, type, field, help) ARG(name, type, field, help, RUN_NO)
#define S(name, type, field, help) ARG(name, type, field, help, RUN_TRAIN)
#define P(name, type, field, help) ARG(name, type, field, help, RUN_SCHEME)
#define CHOICE(name, field, names, n, help, run) {name, ARG_CHOICE, offsetof(Config, field), sizeof(int), help, names, n, run, NULL}
// a choice from a table of llmc/schedule.h: --help lists each name with what it does
#define TABLE_CHOICE(name, field, names, what, n, help) \
    {name, ARG_CHOICE, offsetof(Config, field), sizeof(int), help, names, n, RUN_SCHEME, what}
static const ArgSpec ARGS[] = {
    S("--model", ARG_STR, model, "preset: tiny (default), 10m, 42m, 113m, 425m, 1b, deep, wide, 33m, gru-tiny, gru, gru42m"),
    CHOICE("--arch", arch, ARCH_NAMES, ARCH_N, "transformer (default) or gru: a stacked GRU (hidden size --n_embd, --n_layer layers), no positions", RUN_NO),
    A("--vocab_size", ARG_INT, V, "real vocab size V (default 257: bytes + end-of-text)"),
    A("--n_embd", ARG_INT, C, "model width C"),
    A("--n_layer", ARG_INT, L, "layers L"),
    A("--n_head", ARG_INT, NH, "query heads NH"),
    A("--n_kv_head", ARG_INT, NKV, "key/value heads NKV (NH % NKV == 0)"),
    A("--ffn_hidden", ARG_INT, F, "SwiGLU hidden size F"),
    A("--seq_len", ARG_INT, T, "training window T (= w)"),
    A("--rope_base", ARG_FLOAT, rope_base, "RoPE base B (10000)"),
    TABLE_CHOICE("--pos", pos_scheme, POS_SCHEME_NAMES, POS_SCHEME_WHAT, POS_N_SCHEMES,
                 "the positions p_t of each training step (doc/schemes.md):"),
    TABLE_CHOICE("--pe", pe, PE_NAMES, PE_WHAT, PE_N, "the position encoding:"),
    P("--drope_step", ARG_INT, drope_step, "DroPE: from this step on, no positional encoding (0: never)"),
    P("--qk_norm", ARG_FLAG, qk_norm, "RMSNorm with gains over the whole q and k projections, before RoPE (DroPE's option)"),
    P("--alpha_range", ARG_RANGE, alpha_min, "PosAug range a,b with 0 < a <= b (default 0.125,8)"),
#define POS_PARAM_ARG(field, ctype, argtype, flag, def, scheme, check, must, help) P(flag, argtype, field, help),
    POS_PARAM_TABLE(POS_PARAM_ARG)
#undef POS_PARAM_ARG
    P("--rel_clip", ARG_INT, rel_clip, "eRPE, Shaw: distances from this one on share one bias or key (default: eRPE "
      "--seq_len - 1, Shaw 16 as in Shaw et al.)"),
    P("--t5_buckets", ARG_INT, t5_buckets, "T5: buckets per head, the first half one per distance (default 32, T5's)"),
    P("--t5_max_distance", ARG_INT, t5_max_distance, "T5: the distance its log-spaced buckets reach; longer ones share "
      "the last (default 128, T5's)"),
    P("--wpe_rows", ARG_INT, learned_rows, "learned: wpe's rows (default: the positions training reaches; the PE survey's "
      "choice is --eval_len: rows training never reaches get no gradient, only weight decay)"),
    P("--alpha_set", ARG_STR, alpha_set, "alphas of --pos discrete and cycle (default 1,2,4,8)"),
    CHOICE("--rpe_layers", rpe_layers, RPE_LAYERS_NAMES, 2, "RPE: one draw for all layers (shared, default) or one per layer (independent)", RUN_SCHEME),
    CHOICE("--rpe_eval", rpe_eval, RPE_EVAL_NAMES, 2, "RPE at evaluation: standard positions p_t = t (default) or random sorted positions", RUN_TRAIN),
    CHOICE("--pose_scaling", pose_scaling, POSE_SCALING_NAMES, POSE_SCALING_N, "PoSE: the RoPE interpolation its skips "
           "train and evaluate with, factor --pose_target / --seq_len: none (default; this project's from-scratch "
           "variant), linear, ntk, yarn (PoSE's three; its yarn is its revised YaRN, --scaling revised-yarn)", RUN_SCHEME),
    CHOICE("--pos_layers", pos_layers, POS_LAYERS_NAMES, LAYERS_N, "layers that get alpha: all (default), bottom, top, independent", RUN_SCHEME),
    CHOICE("--curriculum_dist", curriculum_dist, DIST_NAMES, 2, "curriculum schemes draw alpha uniform (default) or log-uniform", RUN_SCHEME),
    S("--batch_size", ARG_INT, B, "micro-batch size in sequences"),
    S("--total_batch", ARG_INT, total_batch, "sequences per optimizer step (multiple of --batch_size)"),
    S("--steps", ARG_INT, steps, "optimizer steps"),
    S("--warmup", ARG_INT, warmup, "linear warmup steps"),
    S("--lr", ARG_FLOAT, lr, "peak learning rate"),
    S("--min_lr", ARG_FLOAT, min_lr, "final learning rate of the cosine"),
    S("--weight_decay", ARG_FLOAT, weight_decay, "AdamW weight decay on matrices (0.1)"),
    S("--beta2", ARG_FLOAT, beta2, "AdamW beta2 (0.95; the DroPE paper: 0.999)"),
    S("--grad_clip", ARG_FLOAT, grad_clip, "global-norm clip (1.0; 0 disables)"),
    S("--seed", ARG_I64, seed, "seed for init, data order and the position schedule (42)"),
    S("--train_data", ARG_STR, train_data, "glob of training shards"),
    S("--val_data", ARG_STR, val_data, "glob of validation shards"),
    S("--tokenizer", ARG_STR, tokenizer, "tokenizer.bin of a BPE vocab (decode only; default: bytes)"),
    A("--out_dir", ARG_STR, out_dir, "run folder: log, checkpoint, evaluation (default runs/<model>_<pos>; with --resume the checkpoint's folder)"),
    A("--overwrite", ARG_FLAG, overwrite, "a new run in a folder holding another run's files: remove them first (checkpoint.bin, log.jsonl, eval_*)"),
    S("--ckpt_every", ARG_INT, ckpt_every, "checkpoint every N steps (0: only at the end)"),
    S("--val_every", ARG_INT, val_every, "validation loss every N steps (0: never)"),
    S("--val_batches", ARG_INT, val_batches, "micro-batches per validation loss"),
    A("--stop_after", ARG_INT, stop_after, "stop (with a checkpoint) after this step; --resume continues"),
    A("--resume", ARG_STR, resume, "checkpoint to resume training from (or to evaluate / generate with)"),
    A("--init_from", ARG_STR, init_from, "start from a checkpoint's weights: step 0, new optimizer and schedule (DroPE recalibration)"),
    S("--eval_len", ARG_INT, eval_len, "L_eval of the final per-position evaluation (default 8*T, 0: skip)"),
    S("--eval_n", ARG_INT, eval_n, "validation sequences in the evaluation (20)"),
    S("--indist_start", ARG_INT, indist_start, "first position of the in-distribution mean (64; T/2 for a window T <= 64)"),
    A("--eval_only", ARG_FLAG, eval_only, "evaluate --resume and exit"),
    CHOICE("--scaling", scaling, SCALE_NAMES, SCALE_N, "evaluation-time RoPE scaling: none, pi, ntk, dynamic-ntk, ntk-by-parts, yarn, revised-yarn (PoSE's YaRN)", RUN_TRAIN),
    S("--scale_factor", ARG_FLOAT, scale_factor, "scaling factor s (default L_eval / seq_len)"),
    S("--yarn_beta_fast", ARG_FLOAT, yarn_beta_fast, "YaRN ramp beta_fast (32)"),
    S("--yarn_beta_slow", ARG_FLOAT, yarn_beta_slow, "YaRN ramp beta_slow (1)"),
    CHOICE("--yarn_temperature", yarn_temperature, YARN_TEMP_NAMES, 2, "YaRN factor on cos and sin: hf (0.1 ln s + 1) or paper (sqrt(1 + 0.1 ln s))", RUN_TRAIN),
    S("--gain_window", ARG_INT, gain_window, "context gain G(C): the short window W (default min(512, T/4); 0 skips G)"),
    S("--gain_chunk", ARG_INT, gain_chunk, "chunk size of the paper's KV-cache approximation (default W)"),
    S("--gain_lengths", ARG_STR, gain_lengths, "C values of G(C), e.g. 2048,4096 (default 2w, 4w, ... up to L_eval)"),
    S("--passkey_lengths", ARG_STR, passkey_lengths, "passkey retrieval at these prompt lengths, e.g. 128,256,512 (default: none)"),
    S("--passkey_n", ARG_INT, passkey_n, "passkey examples per length (100)"),
    S("--passkey_digits", ARG_INT, passkey_digits, "0: keys in [1, 50000]; 5: five-digit keys"),
    S("--passkey_prompts", ARG_STR, passkey_prompts, "pre-tokenized prompts for BPE vocabularies (data/passkey_prompts.py)"),
    S("--ruler_lengths", ARG_STR, ruler_lengths, "RULER's single needle at these prompt lengths, e.g. 256,512 (default: none)"),
    S("--ruler_n", ARG_INT, ruler_n, "RULER examples per length (50)"),
    S("--ruler_prompts", ARG_STR, ruler_prompts, "pre-tokenized RULER prompts for BPE vocabularies (data/passkey_prompts.py --task ruler)"),
    S("--hellaswag", ARG_STR, hellaswag, "HellaSwag from a tokenized file (data/hellaswag.py): acc and acc_norm"),
    S("--hellaswag_n", ARG_INT, hellaswag_n, "HellaSwag: the first N examples (0: all)"),
    S("--task_eval", ARG_STR, task_eval, "exact-match accuracy by length on a task's test file (data/rfs_tasks.py; runs with --eval_len 0 too)"),
    S("--baseline", ARG_STR, baseline, "a baseline run's eval JSON: adds the in-distribution penalty"),
    S("--eval_tag", ARG_STR, eval_tag, "name of the evaluation's files (default eval_L<len>[_<scaling>])"),
    A("--generate", ARG_INT, generate, "generate N tokens from --resume after training and exit"),
    A("--prompt", ARG_STR, prompt, "prompt text for --generate"),
    A("--temperature", ARG_FLOAT, temperature, "sampling temperature (0: greedy)"),
    A("--threads", ARG_INT, threads, "OpenMP threads (default: all cores)"),
    A("--max_memory", ARG_FLOAT, max_memory, "GiB of host memory this run may use (default: what the machine has available)"),
    CHOICE("--attention", attention, ATTN_NAMES, ATTN_N, "train_gpt's training attention: naive (cuBLAS scores, default, faster) or flash (no T x T matrix, less memory); the CPU trainer has one path", RUN_NO),
};
#undef A
#undef S
#undef P
#undef ARG
#define N_ARGS ((int)(sizeof(ARGS) / sizeof(ARGS[0])))

static inline void print_help(const char *prog) {
    printf("usage: %s [flags]\n\nTrains a Llama-style GPT with hand-written forward and backward passes,\n"
           "then evaluates per-position loss past the training window (the cliff). A flag given\n"
           "twice takes its last value (a note names it).\n\n", prog);
    for (int i = 0; i < N_ARGS; i++) {
        printf("  %-16s %s\n", ARGS[i].name, ARGS[i].help);
        for (int k = 0; ARGS[i].choice_help && k < ARGS[i].n_choices; k++)
            printf("  %-16s   %-17s %s\n", "", ARGS[i].choices[k], ARGS[i].choice_help[k]);
    }
    printf("  %-16s %s\n", "--describe", "the schemes, encodings, their parameters and the tensors as JSON");
    printf("  %-16s %s\n\npresets:\n", "--help", "this text");
    for (int i = 0; i < N_PRESETS; i++) {
        const Preset *p = &PRESETS[i];
        if (p->arch == ARCH_GRU)
            printf("  %-8s C=%-4d L=%-2d %19s T=%-4d batch=%-3d lr=%g  %s\n", p->name, p->C, p->L, "", p->T,
                   p->total_batch, p->lr, p->what);
        else
            printf("  %-8s C=%-4d L=%-2d NH=%-2d NKV=%-2d F=%-4d T=%-4d batch=%-3d lr=%g  %s\n", p->name, p->C, p->L,
                   p->NH, p->NKV, p->F, p->T, p->total_batch, p->lr, p->what);
    }
}

// "512,1024" -> {512, 1024}; returns the count; fails naming the flag on anything else.
static inline int parse_int_list(const char *s, int *out, int max, const char *flag) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0 || v > 1 << 30 || (*end && *end != ','))
            fail("%s expects positive integers separated by commas, got '%s'", flag, s);
        if (n == max) fail("%s: at most %d values", flag, max);
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return n;
}

// "1,2,4,8" -> {1, 2, 4, 8}, each > 0; returns the count.
static inline int parse_float_list(const char *s, float *out, int max, const char *flag) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        float v = strtof(p, &end);
        if (end == p || !(v > 0) || !isfinite(v) || (*end && *end != ','))
            fail("%s expects positive numbers separated by commas, got '%s'", flag, s);
        if (n == max) fail("%s: at most %d values", flag, max);
        out[n++] = v;
        p = *end ? end + 1 : end;
    }
    return n;
}

static inline float parse_float_or_fail(const char *flag, const char *s) {
    char *end;
    float v = strtof(s, &end);
    if (*s == 0 || *end != 0 || !isfinite(v)) fail("%s expects a number, got '%s'", flag, s);
    return v;
}

static inline void set_arg(Config *c, const ArgSpec *a, const char *val) {
    char *dst = (char *)c + a->offset;
    switch (a->type) {
    case ARG_INT: *(int *)dst = (int)parse_int_in(a->name, val, -2147483647LL, 2147483647LL); break;
    case ARG_I64: *(long long *)dst = parse_int_in(a->name, val, INT64_MIN, INT64_MAX); break;
    case ARG_FLOAT: *(float *)dst = parse_float_or_fail(a->name, val); break;
    case ARG_STR:
        if (strlen(val) >= a->size) fail("%s: value is too long", a->name);
        snprintf(dst, a->size, "%s", val);
        break;
    case ARG_CHOICE: {
        int found = -1;
        char list[512] = "";
        for (int i = 0; i < a->n_choices; i++) {
            if (strcmp(val, a->choices[i]) == 0) found = i;
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", a->choices[i]);
        }
        if (found < 0) fail("%s: unknown value '%s' (%s)", a->name, val, list);
        *(int *)dst = found;
        break;
    }
    case ARG_RANGE: {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", val);
        char *comma = strchr(buf, ',');
        if (!comma) fail("%s expects a,b (for example 0.125,8), got '%s'", a->name, val);
        *comma = 0;
        c->alpha_min = parse_float_or_fail(a->name, buf);
        c->alpha_max = parse_float_or_fail(a->name, comma + 1);
        break;
    }
    default: break;
    }
}

static inline const ArgSpec *find_arg(const char *name) {
    for (int i = 0; i < N_ARGS; i++)
        if (strcmp(ARGS[i].name, name) == 0) return &ARGS[i];
    return NULL;
}

// The largest value of --alpha_set (a list checked by validate_config)
static inline float alpha_set_max(const Config *c) {
    float set[MAX_ALPHA_SET], m = 0.0f;
    int n = parse_float_list(c->alpha_set, set, MAX_ALPHA_SET, "--alpha_set");
    for (int i = 0; i < n; i++) m = fmaxf(m, set[i]);
    return m;
}

// The largest position the run's training reaches (POS_TABLE's reach)
static inline float pos_train_reach(const Config *c) {
    switch (c->pos_scheme) {
#define POS_REACH(e, name, what, show, props, reach, alpha_fn, step_fn, infer_fn) \
    case e: return reach;
        POS_TABLE(POS_REACH)
#undef POS_REACH
    }
    return 0.0f;
}

// Rows of the learned position table (--pe learned, tupe): the integer positions training
// can reach, or --wpe_rows.
static inline int wpe_rows(const Config *c) {
    if (!pe_has_wpe(c->pe)) return 0;
    return c->learned_rows ? c->learned_rows : pos_is(c->pos_scheme, POSF_INTEGER) ? (int)pos_train_reach(c) + 1 : c->T;
}

// The default of --rel_clip of encoding pe (PE_TABLE's clip; 0: it does not read the flag)
static inline int rel_clip_default(const Config *c, int pe) {
    switch (pe) {
#define PE_CLIP(e, name, what, props, clip) \
    case e: return clip;
        PE_TABLE(PE_CLIP)
#undef PE_CLIP
    }
    return 0;
}

// eRPE's and Shaw's clip distance: --rel_clip, or the encoding's default (eRPE's last
// distance of the training window, Shaw's k = 16 as Shaw et al. 2018)
static inline int rel_clip_of(const Config *c) { return c->rel_clip ? c->rel_clip : rel_clip_default(c, c->pe); }

// "t5, tupe": the names of a table's rows (n of them) whose properties hold f, for a message
// (four calls' lists stay valid at once)
static inline const char *names_with(const char *const *names, const int *props, int n, int f) {
    static char lists[4][256];
    static int next;
    char *list = lists[next++ % 4];
    list[0] = 0;
    for (int i = 0; i < n; i++)
        if (props[i] & f) snprintf(list + strlen(list), sizeof(lists[0]) - strlen(list), "%s%s", list[0] ? ", " : "", names[i]);
    return list;
}
#define pe_names_with(f) names_with(PE_NAMES, PE_PROPS, PE_N, f)                    // PEF_*
#define pos_names_with(f) names_with(POS_SCHEME_NAMES, POS_PROPS, POS_N_SCHEMES, f)  // POSF_*

// The largest position any pass of the run reaches: training's, the evaluation's (--eval_len
// and its prompts: passkey and RULER with their generated tokens), and generation's.
static inline float run_position_reach(const Config *c) {
    float reach = fmaxf(pos_train_reach(c), (float)(c->eval_len - 1));
    int list[64];
    int n = parse_int_list(c->passkey_lengths, list, 64, "--passkey_lengths");
    for (int i = 0; i < n; i++) reach = fmaxf(reach, (float)(list[i] + 10 - 1));
    n = parse_int_list(c->ruler_lengths, list, 64, "--ruler_lengths");
    for (int i = 0; i < n; i++) reach = fmaxf(reach, (float)(list[i] + 12 - 1));
    return fmaxf(reach, (float)((int)strlen(c->prompt) + c->generate - 1));
}

// the learned relative encodings' buckets from the flags
static inline RelShape rel_shape_of(const Config *c) {
    RelShape rs = {rel_clip_of(c), c->t5_buckets, c->t5_max_distance};
    return rs;
}

// Vp: V rounded up to a multiple of 128 (V <= MAX_VOCAB, checked first)
static inline void round_vocab(Config *c) { c->Vp = (c->V + 127) / 128 * 128; }

// Limits that keep every size computation in range (and positions exact in fp32)
#define MAX_VOCAB (1 << 24)
#define MAX_SEQ (1 << 20)
#define MAX_POSITION (1 << 24)
#define MAX_THREADS 1024

#define REQUIRE(cond, ...) do { if (!(cond)) fail(__VA_ARGS__); } while (0)
// The model's shape and batch (from flags, a checkpoint's header or a case file): every
// size positive and within the limits, so no size computation overflows.
static inline void validate_model(const Config *c) {
    REQUIRE(c->V >= 2 && c->V <= MAX_VOCAB, "--vocab_size must lie in [2, %d], got %d", MAX_VOCAB, c->V);
    REQUIRE(c->C > 0 && c->L > 0 && c->NH > 0 && c->NKV > 0 && c->F > 0 && c->T > 0,
            "sizes must be positive (--n_embd %d --n_layer %d --n_head %d --n_kv_head %d --ffn_hidden %d --seq_len %d)",
            c->C, c->L, c->NH, c->NKV, c->F, c->T);
    REQUIRE(c->T <= MAX_SEQ && c->F <= MAX_SEQ, "--seq_len and --ffn_hidden must be at most %d (got %d, %d)", MAX_SEQ, c->T, c->F);
    REQUIRE(c->L <= MAX_LAYERS, "--n_layer %d exceeds the maximum %d", c->L, MAX_LAYERS);
    REQUIRE(c->C % c->NH == 0, "--n_embd %d must be divisible by --n_head %d", c->C, c->NH);
    REQUIRE(c->NH % c->NKV == 0, "--n_head %d must be divisible by --n_kv_head %d", c->NH, c->NKV);
    int hd = c->C / c->NH;
    REQUIRE(hd % 2 == 0, "head dim C/NH = %d must be even for RoPE", hd);
    REQUIRE(hd / 2 <= MAX_HALF_HD, "head dim %d exceeds the maximum %d", hd, 2 * MAX_HALF_HD);
    REQUIRE(c->B > 0, "--batch_size must be positive, got %d", c->B);
    REQUIRE(c->total_batch > 0 && c->total_batch % c->B == 0, "--total_batch %d must be a positive multiple of --batch_size %d", c->total_batch, c->B);
    REQUIRE((long)c->B * c->T <= 2147483647L && (long)c->total_batch * (c->T + 1) <= 2147483647L,
            "--batch_size %d / --total_batch %d x --seq_len %d is more than 2^31 tokens", c->B, c->total_batch, c->T);
}

static inline void validate_config(Config *c) {
    REQUIRE(c->V >= 2 && c->V <= MAX_VOCAB, "--vocab_size must lie in [2, %d], got %d", MAX_VOCAB, c->V);
    round_vocab(c);
    validate_model(c);
    REQUIRE(c->eval_len <= MAX_POSITION && c->rpe_max <= MAX_POSITION,
            "--eval_len and --rpe_max must be at most %d, where fp32 positions stop being exact integers (got %d, %d)",
            MAX_POSITION, c->eval_len, c->rpe_max);
    REQUIRE(c->threads >= 0 && c->threads <= MAX_THREADS, "--threads must lie in [0, %d] (0: all cores), got %d", MAX_THREADS, c->threads);
    REQUIRE(c->max_memory >= 0, "--max_memory must be >= 0 GiB (0: what the machine has), got %g", c->max_memory);
    REQUIRE(c->rope_base > 1.0f, "--rope_base must be > 1, got %g", c->rope_base);
    REQUIRE(c->alpha_min > 0 && c->alpha_min <= c->alpha_max, "--alpha_range needs 0 < a <= b, got %g,%g", c->alpha_min, c->alpha_max);
#define POS_PARAM_CHECK(field, ctype, argtype, flag, def, scheme, check, must, help) \
    {                                                                                 \
        ctype v = c->field;                                                           \
        REQUIRE(check, "%s must %s, got %g", flag, must, (double)v);                  \
    }
    POS_PARAM_TABLE(POS_PARAM_CHECK)
#undef POS_PARAM_CHECK
    float set[MAX_ALPHA_SET];
    int ns = parse_float_list(c->alpha_set, set, MAX_ALPHA_SET, "--alpha_set");
    REQUIRE(ns > 0, "--alpha_set needs at least one value");
    REQUIRE(c->NH <= MAX_HEADS, "--n_head %d exceeds the maximum %d", c->NH, MAX_HEADS);
    if (c->rpe_max == 0) c->rpe_max = 8 * c->T;
    REQUIRE(c->drope_step >= 0, "--drope_step must be >= 0");
    REQUIRE(c->rpe_max >= c->T, "--rpe_max %d must be at least --seq_len %d", c->rpe_max, c->T);
    REQUIRE(!(c->rpe_eval && c->eval_len > c->rpe_max), "--rpe_eval random draws --eval_len %d positions from [0, --rpe_max %d): too few",
            c->eval_len, c->rpe_max);
    REQUIRE(c->steps >= 0, "--steps must be >= 0, got %d", c->steps);
    REQUIRE(c->warmup >= 0, "--warmup must be >= 0, got %d", c->warmup);
    REQUIRE(c->lr > 0 && c->min_lr >= 0 && c->min_lr <= c->lr, "need 0 <= --min_lr <= --lr and --lr > 0 (got %g, %g)", c->min_lr, c->lr);
    REQUIRE(c->weight_decay >= 0, "--weight_decay must be >= 0");
    REQUIRE(c->beta2 > 0 && c->beta2 < 1, "--beta2 must lie in (0, 1), got %g", c->beta2);
    REQUIRE(!(c->resume[0] && c->init_from[0]), "--resume continues a run, --init_from starts one from its weights: pass one of them");
    // combinations in which a flag would silently do nothing
    int s = c->pos_scheme;
    REQUIRE(pe_is(c->pe, PEF_POSITIONS) || pos_is(s, POSF_STANDARD), "--pe %s has no positional signal: --pos %s would "
            "change nothing (use --pos %s)", PE_NAMES[c->pe], POS_SCHEME_NAMES[s], pos_names_with(POSF_STANDARD));
    REQUIRE(!pos_is(s, POSF_DRAWS_BASE) || pe_is(c->pe, PEF_BASE_DRAWN), "--pos %s draws the rotary base: it needs "
            "--pe %s, got --pe %s", POS_SCHEME_NAMES[s], pe_names_with(PEF_BASE_DRAWN), PE_NAMES[c->pe]);
    REQUIRE(!c->pose_scaling || (pos_is(s, POSF_POSE_SCALING) && pe_is(c->pe, PEF_FREQ_SCALES)),
            "--pose_scaling %s interpolates the rotary frequencies under PoSE's skips: it needs --pos %s and --pe %s, got "
            "--pos %s --pe %s", POSE_SCALING_NAMES[c->pose_scaling], pos_names_with(POSF_POSE_SCALING),
            pe_names_with(PEF_FREQ_SCALES), POS_SCHEME_NAMES[s], PE_NAMES[c->pe]);
    if (!c->eval_only) scaling_check(c->scaling, pe_after_drop(c->pe, c->drope_step, c->steps), c->pose_scaling);  // eval-only: the checkpoint's
    REQUIRE(!pe_reads_distances(c->pe) || !pos_is(s, POSF_EXPLICIT),
            "--pe %s biases by alpha * (i - j), not by explicit positions: --pos %s needs an encoding that reads "
            "positions (rotary or absolute)", PE_NAMES[c->pe], POS_SCHEME_NAMES[s]);
    REQUIRE(c->rel_clip >= 0 && c->rel_clip <= MAX_POSITION && c->learned_rows >= 0,
            "--rel_clip must lie in [0, %d] and --wpe_rows be >= 0 (0: the default)", MAX_POSITION);
    REQUIRE(c->t5_buckets >= 2 && c->t5_buckets <= 4096, "--t5_buckets %d must lie in [2, 4096]", c->t5_buckets);
    REQUIRE(c->t5_max_distance > c->t5_buckets / 2 && c->t5_max_distance <= MAX_POSITION,
            "--t5_max_distance %d must exceed the %d distances of --t5_buckets %d's exact half (and be at most %d)",
            c->t5_max_distance, c->t5_buckets / 2, c->t5_buckets, MAX_POSITION);
    if (c->pose_target == 0) c->pose_target = 8 * c->T;  // as --rpe_max
    REQUIRE(c->pose_target >= c->T && c->pose_target <= MAX_POSITION, "--pose_target %d must lie in [--seq_len %d, %d]",
            c->pose_target, c->T, MAX_POSITION);
    REQUIRE(run_position_reach(c) <= pe_position_limit(c->pe), "--pe %s takes positions up to %g (ROTARY_TABLE: its "
            "scale's range); this run reaches %g (training %g, --eval_len %d, and the passkey, RULER and --generate "
            "lengths): shorten them", PE_NAMES[c->pe], pe_position_limit(c->pe), run_position_reach(c), pos_train_reach(c),
            c->eval_len);
    if (pe_has_wpe(c->pe)) {
        const char *pe = PE_NAMES[c->pe];
        int added = pe_is(c->pe, PEF_WPE_ADDED);  // rows at any integer positions; untied ones: 0..T-1
        int reach = pos_is(s, POSF_INTEGER) ? (int)pos_train_reach(c) + 1 : c->T;
        REQUIRE(!c->learned_rows || (c->learned_rows >= reach && c->learned_rows <= MAX_POSITION),
                "--wpe_rows %d must cover the positions training reaches (%d) and be at most %d", c->learned_rows, reach, MAX_POSITION);
        REQUIRE(added ? pos_is(s, POSF_INTEGER) : pos_is(s, POSF_STANDARD), "--pe %s needs integer positions: --pos %s, "
                "got --pos %s", pe, pos_names_with(added ? POSF_INTEGER : POSF_STANDARD), POS_SCHEME_NAMES[s]);
        REQUIRE(!c->drope_step, "--drope_step drops RoPE; with --pe %s there is none to drop", pe);
        REQUIRE(c->eval_len <= wpe_rows(c), "--pe %s: wpe has rows for positions 0..%d only, so --eval_len %d cannot be "
                "evaluated (pass --eval_len 0, give the table more rows with --wpe_rows%s)", pe, wpe_rows(c) - 1, c->eval_len,
                added ? ", or train with --pos rpe, whose table reaches --rpe_max" : "");
    }
    REQUIRE(c->attention != ATTN_FLASH || !pe_is(c->pe, PEF_UNTIED), "--attention flash does not take --pe %s's untied "
            "positions yet: use --attention naive", PE_NAMES[c->pe]);
    REQUIRE(c->attention != ATTN_FLASH || !pe_bias_keys(c->pe), "--attention flash does not take --pe %s's "
            "relative keys yet: use --attention naive", PE_NAMES[c->pe]);
    REQUIRE(c->attention != ATTN_FLASH || !pe_bias_per_query(c->pe), "--attention flash does not take --pe %s's "
            "bias of each query and key yet: use --attention naive", PE_NAMES[c->pe]);
    REQUIRE(c->attention != ATTN_FLASH || c->C / c->NH <= FLASH_MAX_HD, "--attention flash takes head sizes up to %d; "
            "this model's is %d (use --attention naive)", FLASH_MAX_HD, c->C / c->NH);
    REQUIRE(c->grad_clip >= 0, "--grad_clip must be >= 0");
    REQUIRE(c->ckpt_every >= 0 && c->val_every >= 0 && c->val_batches > 0, "--ckpt_every/--val_every must be >= 0, --val_batches > 0");
    REQUIRE(c->stop_after >= 0, "--stop_after must be >= 0");
    REQUIRE(c->eval_len >= 0, "--eval_len must be >= 0");
    REQUIRE(c->eval_len == 0 || c->eval_len > c->T, "--eval_len %d must exceed the training window --seq_len %d (or be 0)", c->eval_len, c->T);
    REQUIRE(c->eval_n > 0, "--eval_n must be positive");
    REQUIRE(c->eval_len == 0 || (c->indist_start >= 0 && c->indist_start < c->T), "--indist_start %d must lie in [0, --seq_len %d)", c->indist_start, c->T);
    REQUIRE(c->scale_factor == 0 || c->scale_factor >= 1, "--scale_factor must be >= 1, got %g", c->scale_factor);
    REQUIRE(c->yarn_beta_fast > c->yarn_beta_slow && c->yarn_beta_slow > 0, "need --yarn_beta_fast > --yarn_beta_slow > 0");
    if (c->arch == ARCH_GRU) {  // a recurrence carries order itself: no position mechanism, nothing banded
        Config d;
        config_defaults(&d);
        REQUIRE(c->pos_scheme == d.pos_scheme && c->pe == d.pe && !c->qk_norm && !c->drope_step && !c->scaling,
                "--arch gru has no positional encoding: --pos, --pe, --qk_norm, --drope_step and --scaling do not apply");
        REQUIRE(c->gain_window <= 0, "--arch gru: the context gain's banded and chunked passes are attention's; pass --gain_window 0");
        c->gain_window = 0;
    }
    if (c->gain_window < 0) c->gain_window = c->T / 4 < 512 ? c->T / 4 : 512;
    REQUIRE(c->gain_window >= 0 && c->gain_chunk >= 0, "--gain_window and --gain_chunk must be >= 0");
    REQUIRE(c->eval_len == 0 || c->gain_window < c->eval_len, "--gain_window %d must be below --eval_len %d", c->gain_window, c->eval_len);
    int list[64];
    int nl = parse_int_list(c->gain_lengths, list, 64, "--gain_lengths");
    for (int i = 0; i < nl; i++)
        REQUIRE(list[i] > c->gain_window && list[i] <= c->eval_len, "--gain_lengths: %d must lie in (--gain_window %d, --eval_len %d]",
                list[i], c->gain_window, c->eval_len);
    nl = parse_int_list(c->passkey_lengths, list, 64, "--passkey_lengths");
    for (int i = 0; i < nl; i++)
        REQUIRE(list[i] <= MAX_POSITION - 16, "--passkey_lengths: %d is past the last exact fp32 position %d", list[i], MAX_POSITION);
    for (int i = 0; i < nl && c->rpe_eval; i++)  // the prompt and 10 generated tokens
        REQUIRE(list[i] + 10 <= c->rpe_max, "--rpe_eval random draws %d passkey positions (--passkey_lengths %d + 10) from [0, --rpe_max %d): too few",
                list[i] + 10, list[i], c->rpe_max);
    REQUIRE(c->passkey_n > 0, "--passkey_n must be positive");
    nl = parse_int_list(c->ruler_lengths, list, 64, "--ruler_lengths");
    for (int i = 0; i < nl; i++) {
        REQUIRE(list[i] <= MAX_POSITION - 16, "--ruler_lengths: %d is past the last exact fp32 position %d", list[i], MAX_POSITION);
        REQUIRE(!c->rpe_eval || list[i] + 12 <= c->rpe_max,
                "--rpe_eval random draws %d RULER positions (--ruler_lengths %d + 12) from [0, --rpe_max %d): too few",
                list[i] + 12, list[i], c->rpe_max);
    }
    REQUIRE(c->ruler_n > 0, "--ruler_n must be positive");
    REQUIRE(c->hellaswag_n >= 0, "--hellaswag_n must be >= 0 (0: all)");
    REQUIRE(c->passkey_digits == 0 || c->passkey_digits == 5, "--passkey_digits must be 0 or 5, got %d", c->passkey_digits);
    REQUIRE(c->generate >= 0 && c->generate <= MAX_POSITION - 1 - (int)strlen(c->prompt),
            "--generate must lie in [0, %d]: the prompt and the new tokens must fit %d positions, got %d",
            MAX_POSITION - 1 - (int)strlen(c->prompt), MAX_POSITION, c->generate);
    REQUIRE(c->temperature >= 0, "--temperature must be >= 0");
    REQUIRE(!c->eval_only || c->resume[0], "--eval_only needs --resume CHECKPOINT");
    REQUIRE(!strchr(c->eval_tag, '/') && strcmp(c->eval_tag, ".") != 0 && strcmp(c->eval_tag, "..") != 0,
            "--eval_tag names the evaluation's files in --out_dir: a name without '/', got '%s'", c->eval_tag);
    REQUIRE(c->steps > 0 || c->resume[0] || c->init_from[0] || c->eval_only,
            "--steps 0 trains nothing: evaluate a checkpoint with --eval_only --resume CHECKPOINT");
    REQUIRE(!c->generate || c->resume[0] || c->steps > 0, "--generate needs --resume CHECKPOINT or training steps");
}
#undef REQUIRE

// A checkpoint's header (llmc/checkpoint.h): meta.config_i holds the model shape
// [V, Vp, C, L, NH, NKV, F, T] (CKI_V..CKI_T), then the scheme; meta.config_f holds
// [rope_base, rms_eps, alpha_min, alpha_max, alpha_fixed].
// Checkpoints written before the GRU have no arch entry (12 values; 10 before QK-norm
// and learned APE): they are transformers.
enum { CKI_V, CKI_VP, CKI_C, CKI_L, CKI_NH, CKI_NKV, CKI_F, CKI_T, CKI_POS, CKI_PE, CKI_QK, CKI_WPE, CKI_ARCH, CKI_N };
static const char *CKI_NAMES[CKI_POS] = {"--vocab_size", "padded vocab", "--n_embd", "--n_layer", "--n_head",
                                         "--n_kv_head", "--ffn_hidden", "--seq_len"};
enum { MODEL_ROPE_BASE = CKI_POS, MODEL_ARCH, MODEL_N };  // the fields a run adopts: the shape, RoPE base, arch

// meta.config_i of a checkpoint, its length checked and padded with zeros to CKI_N values (its
// values: checkpoint_header_check).
static inline void checkpoint_config_i(const TensorFile *tf, int32_t ci[CKI_N]) {
    const TensorEntry *e = tf_find(tf, "meta.config_i");
    if (!e || e->dtype != TF_I32 || (e->numel != CKI_N && e->numel != CKI_ARCH && e->numel != CKI_QK))
        fail("'%s' has no valid meta.config_i (%d int32 values): not a checkpoint of this project", tf->path, CKI_N);
    memset(ci, 0, CKI_N * sizeof(int32_t));
    memcpy(ci, e->data, e->numel * sizeof(int32_t));
}

// --resume and --init_from: the model is the checkpoint's (shape, RoPE base, RMSNorm eps),
// so a checkpoint of any shape needs no shape flag. set_by[i] names what set field i on the
// command line (a flag, or "--model NAME" for a preset's shape), NULL if nothing did; such
// a value must agree with the checkpoint.
static inline void adopt_checkpoint_model(Config *c, const TensorFile *tf, const char *const set_by[MODEL_N]) {
    const char *path = tf->path;
    int32_t ci[CKI_N];
    checkpoint_config_i(tf, ci);
    if (set_by[MODEL_ARCH] && c->arch != ci[CKI_ARCH])
        fail("checkpoint '%s' is a %s, this run asks for a %s (%s; without it the checkpoint's model is used)", path,
             ARCH_NAMES[ci[CKI_ARCH]], ARCH_NAMES[c->arch], set_by[MODEL_ARCH]);
    c->arch = ci[CKI_ARCH];
    const float *cf = (const float *)tf_get(tf, "meta.config_f", TF_F32, 5);
    int *field[CKI_POS] = {&c->V, &c->Vp, &c->C, &c->L, &c->NH, &c->NKV, &c->F, &c->T};
    for (int i = 0; i < CKI_POS; i++) {
        if (set_by[i] && *field[i] != ci[i])
            fail("checkpoint '%s' is of another config: it has %s %d, this run has %d (%s; without it the checkpoint's model is used)",
                 path, CKI_NAMES[i], ci[i], *field[i], set_by[i]);
        *field[i] = ci[i];
    }
    if (set_by[MODEL_ROPE_BASE] && c->rope_base != cf[0])
        fail("checkpoint '%s' was trained with --rope_base %g, this run has %g (without the flag the checkpoint's base is used)",
             path, cf[0], c->rope_base);
    c->rope_base = cf[0];
    c->rms_eps = cf[1];
}

// The token embedding's factor: the residual stream starts as wte[token] * embed_scale plus
// the position terms. The sinusoids' papers scale the (tied) embedding by sqrt(C), so that the
// unit-amplitude table does not drown it (Vaswani et al. 2017, Sec. 3.4); every other encoding
// adds no table to it: 1. A resumed checkpoint keeps the factor it was trained with.
static inline float embed_scale(const Config *c) {
    if (c->ckpt_embed_scale > 0) return c->ckpt_embed_scale;
    return c->arch != ARCH_GRU && pe_sinusoidal(c->pe) ? sqrtf((float)c->C) : 1.0f;
}

// The factor a checkpoint was trained with (meta.embed_scale, checked by
// checkpoint_header_check): 1 when it has none, written before the sinusoids scaled the
// embedding (it is then evaluated and resumed as trained).
static inline float checkpoint_embed_scale(const TensorFile *tf) {
    const TensorEntry *e = tf_find(tf, "meta.embed_scale");
    return e ? ((const float *)e->data)[0] : 1.0f;
}

// The --scaling a checkpoint's --pose_scaling was trained as (meta.pose_scaling, SCALE_*,
// checked by checkpoint_header_check), or `absent` when it has none (written before it was kept)
static inline int checkpoint_pose_scaling(const TensorFile *tf, int absent) {
    const TensorEntry *e = tf_find(tf, "meta.pose_scaling");
    return e ? ((const int32_t *)e->data)[0] : absent;
}

// A kept --pose_scaling as this build computes it must be what the checkpoint was trained
// as. One written before meta.pose_scaling trained --pose_scaling yarn as YaRN's own
// frequency blend (--scaling yarn), which is now PoSE's revised YaRN (--scaling
// revised-yarn): refused, so that no model is evaluated or resumed under an interpolation it
// was not trained with.
static inline void check_kept_pose_scaling(const TensorFile *tf, const char *value) {
    int now = SCALE_NONE;
    for (int i = 0; i < POSE_SCALING_N; i++)
        if (strcmp(POSE_SCALING_NAMES[i], value) == 0) now = POSE_SCALING_METHOD[i];
    int kept = checkpoint_pose_scaling(tf, -1), then = kept >= 0 ? kept : now == SCALE_REVISED_YARN ? SCALE_YARN : now;
    if (then != now)
        fail("'%s' was trained with --pose_scaling %s as --scaling %s%s; this build's --pose_scaling %s is --scaling %s, so "
             "the model cannot be evaluated or resumed as it was trained: train it again with this version", tf->path,
             value, SCALE_NAMES[then], kept >= 0 ? "" : " (before --pose_scaling yarn became PoSE's revised YaRN)", value,
             SCALE_NAMES[now]);
}

// The flags a checkpoint keeps (meta.flags: "name\tvalue\n" lines, one byte per int32) into
// text. A checkpoint from before they were kept gets the scheme its header holds
// (meta.config_i/f: --pos, --pe, --qk_norm, --alpha_range, --alpha); returns 0 then.
// The kept flags' text as a checkpoint stores it, meta.flags: one int32 per byte, any byte a
// command line holds but NUL (a UTF-8 path's too), and back (text: n bytes, path the file's).
static inline int32_t *flags_to_ints(const char *text, size_t *numel) {
    *numel = strlen(text);
    int32_t *v = (int32_t *)xmalloc((*numel + 1) * sizeof(int32_t));
    for (size_t i = 0; i < *numel; i++) v[i] = (unsigned char)text[i];
    return v;
}
static inline void flags_of_ints(char *text, size_t n, const int32_t *v, size_t numel, const char *path) {
    if (numel >= n) fail("'%s' is corrupt: meta.flags is not a text of under %zu bytes", path, n);
    for (size_t i = 0; i < numel; i++) {
        if (v[i] < 1 || v[i] > 255) fail("'%s' is corrupt: meta.flags[%zu] is %d, not a byte of text", path, i, v[i]);
        text[i] = (char)(unsigned char)v[i];
    }
    text[numel] = 0;
}

// ---- a checkpoint's header, every field checked for the values it can take ----
// A field damaged on disk (with its checksum rewritten) is refused as corrupt, naming it; a
// value this build has no name for (an encoding, a scheme, an architecture, a flag, a tensor
// past the ones it knows) as made by a newer build, naming the checkpoint, not a flag. The
// tensors of the header: name, dtype, the element counts each can have (more: a newer
// build's), and whether a checkpoint must have it (meta.config_i: 10, 12 or 13 values,
// checkpoint_config_i; meta.flags: kept_flags' text).
static const struct {
    const char *name;
    int dtype;
    size_t lo, hi;
    int required;
} CKPT_META[] = {
    {"meta.config_i", TF_I32, CKI_QK, CKI_N, 1}, {"meta.config_f", TF_F32, 5, 5, 1}, {"meta.state", TF_U64, 5, 5, 1},
    {"meta.flags", TF_I32, 0, SIZE_MAX, 0},       {"meta.embed_scale", TF_F32, 1, 1, 0}, {"meta.pose_scaling", TF_I32, 1, 1, 0},
};
#define CKPT_META_N (int)(sizeof(CKPT_META) / sizeof(CKPT_META[0]))

typedef struct {
    int32_t ci[CKI_N];     // meta.config_i, padded as checkpoint_config_i pads an old one
    float cf[5], embed_scale;  // meta.config_f; meta.embed_scale (1 when absent)
    int32_t pose_scaling;  // meta.pose_scaling (SCALE_NONE when absent)
    uint64_t state[5];     // meta.state
} CkptHeader;

// What a field can be, for a message (built only when one is refused): fmt with one number
static inline const char *ck_text(const char *fmt, double a) {
    static char buf[128];
    snprintf(buf, sizeof(buf), fmt, a);
    return buf;
}
static inline const char *ck_range(double lo, double hi) {
    static char buf[64];
    snprintf(buf, sizeof(buf), "in [%.9g, %.9g]", lo, hi);
    return buf;
}

// Each value of the header: its name, its value (h: the header), the condition it must meet
// (a row reads only fields of the rows above it), what it can be, and when a value that
// fails is a newer build's. The limits are the trainers' (validate_model, validate_config).
#define CKPT_FIELD_TABLE(X)                                                                                                  \
    X("meta.config_i V", h->ci[CKI_V], v >= 2 && v <= MAX_VOCAB, ck_range(2, MAX_VOCAB), 0)                                  \
    X("meta.config_i Vp", h->ci[CKI_VP], v == (h->ci[CKI_V] + 127) / 128 * 128, "V rounded up to a multiple of 128", 0)      \
    X("meta.config_i NH", h->ci[CKI_NH], v >= 1 && v <= MAX_HEADS, ck_range(1, MAX_HEADS), 0)                                \
    X("meta.config_i NKV", h->ci[CKI_NKV], v >= 1 && h->ci[CKI_NH] % h->ci[CKI_NKV] == 0, "a divisor of NH", 0)              \
    X("meta.config_i C", h->ci[CKI_C],                                                                                       \
      v >= 1 && h->ci[CKI_C] % (2 * h->ci[CKI_NH]) == 0 && h->ci[CKI_C] / h->ci[CKI_NH] <= 2 * MAX_HALF_HD,                  \
      ck_text("NH times an even head size of at most %.9g", 2 * MAX_HALF_HD), 0)                                             \
    X("meta.config_i L", h->ci[CKI_L], v >= 1 && v <= MAX_LAYERS, ck_range(1, MAX_LAYERS), 0)                                \
    X("meta.config_i F", h->ci[CKI_F], v >= 1 && v <= MAX_SEQ, ck_range(1, MAX_SEQ), 0)                                      \
    X("meta.config_i T", h->ci[CKI_T], v >= 1 && v <= MAX_SEQ, ck_range(1, MAX_SEQ), 0)                                      \
    X("meta.config_i arch", h->ci[CKI_ARCH], v >= 0 && v < (int)ARCH_N, ck_range(0, ARCH_N - 1), v >= (int)ARCH_N)           \
    X("meta.config_i pos_scheme", h->ci[CKI_POS], v >= 0 && v < (int)POS_N_SCHEMES && (v == 0 || h->ci[CKI_ARCH] != ARCH_GRU), \
      ck_text("in [0, %.9g] (0 for a GRU)", POS_N_SCHEMES - 1), v >= (int)POS_N_SCHEMES)                                     \
    X("meta.config_i pe", h->ci[CKI_PE], v >= 0 && v < (int)PE_N && (v == 0 || h->ci[CKI_ARCH] != ARCH_GRU),                 \
      ck_text("in [0, %.9g] (0 for a GRU)", PE_N - 1), v >= (int)PE_N)                                                       \
    X("meta.config_i qk_norm", h->ci[CKI_QK], v == 0 || (v == 1 && h->ci[CKI_ARCH] != ARCH_GRU), "0 or 1 (0 for a GRU)", 0)  \
    X("meta.config_i wpe_rows", h->ci[CKI_WPE], pe_has_wpe(h->ci[CKI_PE]) ? v >= h->ci[CKI_T] && v <= MAX_POSITION : v == 0, \
      ck_text("0 without a learned table, else in [T, %.9g]", MAX_POSITION), 0)                                              \
    X("meta.config_f rope_base", h->cf[0], v > 1 && v < INFINITY, "a finite number above 1", 0)                              \
    X("meta.config_f rms_eps", h->cf[1], v > 0 && v < 1, "in (0, 1)", 0)                                                     \
    X("meta.config_f alpha_min", h->cf[2], v > 0 && v < INFINITY, "a finite number above 0", 0)                              \
    X("meta.config_f alpha_max", h->cf[3], v >= h->cf[2] && v < INFINITY, "a finite number of at least alpha_min", 0)        \
    X("meta.config_f alpha_fixed", h->cf[4], v > 0 && v < INFINITY, "a finite number above 0", 0)                            \
    X("meta.state step", h->state[0], v <= INT32_MAX, "below 2^31", 0)                                                       \
    X("meta.state data_epoch", h->state[2], v <= INT32_MAX, "below 2^31", 0)                                                 \
    X("meta.state data_shard", h->state[3], v <= INT32_MAX, "below 2^31", 0)                                                 \
    X("meta.state data_sample", h->state[4], v <= INT32_MAX, "below 2^31", 0)                                                \
    X("meta.embed_scale", h->embed_scale, v == 1 || v == sqrtf((float)h->ci[CKI_C]),                                         \
      ck_text("1 or sqrt(C) = %.9g", sqrtf((float)h->ci[CKI_C])), 0)                                                      \
    X("meta.pose_scaling", h->pose_scaling, v >= 0 && v < (int)SCALE_N, ck_range(0, SCALE_N - 1), v >= (int)SCALE_N)

// A value as a message shows it: an integer whole, anything else to float precision
static inline const char *ck_value(double v) {
    static char buf[64];
    snprintf(buf, sizeof(buf), v == floor(v) && fabs(v) < 1e15 ? "%.0f" : "%.9g", v);
    return buf;
}

__attribute__((noreturn)) static inline void ck_newer(const char *path, const char *what) {
    fail("'%s' was made by a newer build of this project (%s: this build does not know it); read it with that build "
         "or a newer one", path, what);
}

// The value of a kept flag is one its type can hold (a choice's name is checked by the caller)
static inline int flag_value_ok(const ArgSpec *a, const char *v) {
    char *end;
    long long x;
    switch (a->type) {
    case ARG_FLAG: return !*v;
    case ARG_INT: return text_int(v, &x) == 1 && x >= -2147483647LL && x <= 2147483647LL;
    case ARG_I64: return text_int(v, &x) == 1;
    case ARG_FLOAT: return *v && isfinite(strtof(v, &end)) && !*end;
    case ARG_RANGE: {
        float a0 = strtof(v, &end);
        const char *b = end + 1;
        return end != v && *end == ',' && isfinite(a0) && isfinite(strtof(b, &end)) && end != b && !*end;
    }
    case ARG_STR: return strlen(v) < a->size;
    default: return 1;
    }
}

// meta.flags: lines "name\tvalue\n", each a flag this build has, with a value of its type
static inline void checkpoint_flags_check(const TensorFile *tf) {
    const TensorEntry *e = tf_find(tf, "meta.flags");
    if (!e) return;
    static char text[sizeof(((Config *)0)->run_flags)];
    char what[640];
    flags_of_ints(text, sizeof(text), (const int32_t *)e->data, e->numel, tf->path);
    for (char *line = text, *next; *line; line = next) {
        if (!(next = strchr(line, '\n'))) fail("'%s' is corrupt: meta.flags ends inside a line ('%.80s')", tf->path, line);
        *next++ = 0;
        char *value = strchr(line, '\t');
        if (!value) fail("'%s' is corrupt: meta.flags line '%.80s' has no value", tf->path, line);
        *value++ = 0;
        const ArgSpec *a = find_arg(line);
        snprintf(what, sizeof(what), "its run's flag %.80s", line);
        if (!a) ck_newer(tf->path, what);
        int known = a->type != ARG_CHOICE;
        for (int k = 0; k < a->n_choices; k++) known |= strcmp(value, a->choices[k]) == 0;
        snprintf(what, sizeof(what), "its run's %.80s is '%.200s'", line, value);
        if (!known) ck_newer(tf->path, what);
        if (!flag_value_ok(a, value)) fail("'%s' is corrupt: meta.flags holds %s '%.200s', not a value of that flag", tf->path, line, value);
    }
}

// The checkpoint's header, every field checked (the table above); h may be NULL.
static inline void checkpoint_header_check(const TensorFile *tf, CkptHeader *h_out) {
    for (int i = 0; i < tf->n; i++) {  // a header tensor this build does not know is a newer build's
        int known = strncmp(tf->t[i].name, "meta.", 5) != 0;
        for (int k = 0; k < CKPT_META_N; k++) known |= strcmp(tf->t[i].name, CKPT_META[k].name) == 0;
        char what[200];
        snprintf(what, sizeof(what), "it holds the tensor %.100s", tf->t[i].name);
        if (!known) ck_newer(tf->path, what);
    }
    for (int k = 0; k < CKPT_META_N; k++) {
        const TensorEntry *e = tf_find(tf, CKPT_META[k].name);
        if (!e && CKPT_META[k].required)
            fail("'%s' has no %s: not a checkpoint of this project", tf->path, CKPT_META[k].name);
        if (!e) continue;
        char what[200];
        snprintf(what, sizeof(what), "its %s has %zu values", CKPT_META[k].name, e->numel);
        if (e->dtype == CKPT_META[k].dtype && e->numel > CKPT_META[k].hi) ck_newer(tf->path, what);
        if (e->dtype != CKPT_META[k].dtype || e->numel < CKPT_META[k].lo)
            fail("'%s' is corrupt: %s is %zu %s values, not %zu %s", tf->path, CKPT_META[k].name, e->numel,
                 tf_dtype_name(e->dtype), CKPT_META[k].lo, tf_dtype_name(CKPT_META[k].dtype));
    }
    CkptHeader hd, *h = &hd;
    checkpoint_config_i(tf, h->ci);
    memcpy(h->cf, tf_find(tf, "meta.config_f")->data, sizeof(h->cf));
    memcpy(h->state, tf_find(tf, "meta.state")->data, sizeof(h->state));
    h->embed_scale = checkpoint_embed_scale(tf);
    h->pose_scaling = checkpoint_pose_scaling(tf, SCALE_NONE);
#define CKPT_FIELD_CHECK(name, value, cond, what, newer)                                                                  \
    {                                                                                                                      \
        double v = (double)(value);                                                                                        \
        char text[300];                                                                                                    \
        snprintf(text, sizeof(text), "its %s is %s", name, ck_value(v));                                                      \
        if (!(cond) && (newer)) ck_newer(tf->path, text);                                                                 \
        if (!(cond)) fail("'%s' is corrupt: %s is %s; it can be %s", tf->path, name, ck_value(v), what);                 \
    }
    CKPT_FIELD_TABLE(CKPT_FIELD_CHECK)
#undef CKPT_FIELD_CHECK
    checkpoint_flags_check(tf);
    if (h_out) *h_out = hd;
}

static inline int checkpoint_flags(const TensorFile *tf, char *text, size_t n) {
    const TensorEntry *e = tf_find(tf, "meta.flags");
    if (!e) {
        CkptHeader h;
        checkpoint_header_check(tf, &h);
        snprintf(text, n, "--pos\t%s\n--pe\t%s\n--alpha_range\t%.9g,%.9g\n--alpha\t%.9g\n%s", POS_SCHEME_NAMES[h.ci[CKI_POS]],
                 PE_NAMES[h.ci[CKI_PE]], h.cf[2], h.cf[3], h.cf[4], h.ci[CKI_QK] ? "--qk_norm\t\n" : "");
        return 0;
    }
    if (e->dtype != TF_I32) fail("'%s' is corrupt: meta.flags is not int32", tf->path);
    flags_of_ints(text, n, (const int32_t *)e->data, e->numel, tf->path);
    return 1;
}

// Whether two values of one flag set the same configuration.
static inline int same_flag_value(const ArgSpec *a, const char *x, const char *y) {
    if (a->type == ARG_FLAG) return 1;
    Config cx, cy;
    memset(&cx, 0, sizeof(cx));
    memset(&cy, 0, sizeof(cy));
    set_arg(&cx, a, x);
    set_arg(&cy, a, y);
    if (a->type == ARG_RANGE) return cx.alpha_min == cy.alpha_min && cx.alpha_max == cy.alpha_max;
    return memcmp((char *)&cx + a->offset, (char *)&cy + a->offset, a->size) == 0;
}

// What the command line itself gives: each flag's last value ("" for a switch), NULL when
// absent; a value given twice is printed, since only the last counts. Values are skipped,
// so a value is never taken for a flag ("--prompt -h"); --help is answered here.
static inline void command_line_values(int argc, char **argv, const char *cli[N_ARGS]) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            print_help(argv[0]);
            exit(0);
        }
        const ArgSpec *a = find_arg(argv[i]);
        if (!a) continue;  // refused by parse_args
        if (cli[a - ARGS] && a->type != ARG_FLAG && i + 1 < argc && strcmp(cli[a - ARGS], argv[i + 1]) != 0)
            printf("note: %s is given twice; the last value counts (%s, not %s)\n", a->name, argv[i + 1], cli[a - ARGS]);
        if (a->type == ARG_FLAG) cli[a - ARGS] = "";
        else if (i + 1 < argc) cli[a - ARGS] = argv[++i];
    }
}
#define FLAG_VALUE(values, name) (values)[find_arg(name) - ARGS]

// A flag the run would silently ignore is a mistake: refused, naming what it belongs to
// (cli: the command line's own values, not adopted ones).
static inline void check_ignored_flags(const Config *c, const char *const cli[N_ARGS]) {
    if (FLAG_VALUE(cli, "--prompt") && !c->generate) fail("--prompt is the start of --generate's text: give --generate N too");
    if (c->eval_only) return;  // the checkpoint's scheme is evaluated, whatever the flags say
    int s = c->pos_scheme;
    const char *pos = POS_SCHEME_NAMES[s];
    if (FLAG_VALUE(cli, "--alpha_range") && POS_SCHEME_SHOW[s] != SHOW_RANGE)
        fail("--alpha_range is the range of --pos posaug, posaug-log and the curriculum schemes; --pos %s draws no alpha from it",
             pos);
#define POS_PARAM_IGNORED(field, ctype, argtype, flag, def, scheme, check, must, help)                                    \
    if (FLAG_VALUE(cli, flag) && s != scheme)                                                                              \
        fail("%s is a parameter of --pos %s; --pos %s does not use it", flag, POS_SCHEME_NAMES[scheme], pos);
    POS_PARAM_TABLE(POS_PARAM_IGNORED)
#undef POS_PARAM_IGNORED
    if (FLAG_VALUE(cli, "--rel_clip") && !rel_clip_default(c, c->pe))
        fail("--rel_clip is a parameter of --pe erpe and shaw; --pe %s does not use it", PE_NAMES[c->pe]);
    if ((FLAG_VALUE(cli, "--t5_buckets") || FLAG_VALUE(cli, "--t5_max_distance")) && !pe_is(c->pe, PEF_T5))
        fail("--t5_buckets and --t5_max_distance are parameters of --pe %s; --pe %s does not use them", pe_names_with(PEF_T5),
             PE_NAMES[c->pe]);
    if (FLAG_VALUE(cli, "--wpe_rows") && !pe_has_wpe(c->pe))
        fail("--wpe_rows is the size of --pe learned's and tupe's table; --pe %s has none", PE_NAMES[c->pe]);
    if (FLAG_VALUE(cli, "--alpha_set") && POS_SCHEME_SHOW[s] != SHOW_SET)
        fail("--alpha_set is the set of --pos discrete and cycle; --pos %s does not use it", pos);
}

// --resume: the flags the checkpoint keeps, as arguments into out (returns their count): to
// continue training, those the command line does not give (one it gives with another value
// is printed as a change, and a position-scheme one sets c->scheme_changed); to evaluate,
// only the scheme's, all of them (they go after the command line's, so they win).
static inline int kept_flags(Config *c, const TensorFile *tf, const char *const cli[N_ARGS], int eval_only, const char **out) {
    static char kept[sizeof(c->run_flags)];  // out points into it
    char adopted[2048] = "", changed[2048] = "";
    int has = checkpoint_flags(tf, kept, sizeof(kept)), n = 0;
    for (char *line = kept, *next; *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        else next = line + strlen(line);
        char *value = strchr(line, '\t');  // every line has one (checkpoint_flags_check)
        *value++ = 0;
        const ArgSpec *a = find_arg(line);
        if (a->run == RUN_NO) {
            printf("note: checkpoint flag %s is not one this build keeps; ignored\n", line);
            continue;
        }
        if (strcmp(a->name, "--pose_scaling") == 0) check_kept_pose_scaling(tf, value);
        const char *now = cli[a - ARGS];
        // an evaluation takes the run's scheme, and its validation data unless given another
        int val = strcmp(a->name, "--val_data") == 0;
        if (eval_only && a->run != RUN_SCHEME && !(val && !now)) continue;
        int differs = now && !same_flag_value(a, value, now);
        if (now && !eval_only) {  // the command line's value
            if (differs)
                snprintf(changed + strlen(changed), sizeof(changed) - strlen(changed), " %s %s (checkpoint: %s)", a->name, now,
                         value);
            c->scheme_changed |= differs && a->run == RUN_SCHEME;
            continue;
        }
        if (differs) printf("note: --eval_only evaluates the checkpoint with its own %s %s, not %s\n", a->name, value, now);
        out[n++] = a->name;
        if (a->type != ARG_FLAG) out[n++] = value;
        if (!now)
            snprintf(adopted + strlen(adopted), sizeof(adopted) - strlen(adopted), " %s%s%s", a->name,
                     a->type == ARG_FLAG ? "" : " ", value);
    }
    if (adopted[0]) printf("--resume: the checkpoint's flags%s\n", adopted);
    if (!has && !eval_only)
        printf("note: '%s' keeps no flags (written before they were kept, or by dev/import_hf.py): its scheme comes from "
               "its header; give any other flag of its run again\n", tf->path);
    if (changed[0]) printf("--resume with changes:%s\n", changed);
    return n;
}

// The flags of a run: with --resume, the checkpoint's kept flags (kept_flags) around the
// command line's, so a resumed run continues the same experiment. Then two passes: --model
// first (the preset), then every other flag overrides it. With --resume or --init_from, the
// checkpoint's model replaces the preset's.
static inline void parse_args(Config *c, int argc, char **argv) {
    config_defaults(c);
    const char *cli[N_ARGS] = {NULL};
    command_line_values(argc, argv, cli);
    const char *resume = FLAG_VALUE(cli, "--resume"), *ckpt = resume ? resume : FLAG_VALUE(cli, "--init_from");
    int eval_only = FLAG_VALUE(cli, "--eval_only") != NULL;
    TensorFile tf;
    if (ckpt && ckpt[0]) {
        tf_load(&tf, ckpt, TF_KIND_CHECKPOINT);
        checkpoint_header_check(&tf, NULL);  // a damaged or a newer build's field named before any flag is read from it
    }
    // the arguments: the checkpoint's kept flags before the command line's (after, to evaluate)
    const char **args = (const char **)xmalloc((size_t)(argc + 2 * N_ARGS) * sizeof(char *)), *kept[2 * N_ARGS];
    int n_kept = resume && resume[0] ? kept_flags(c, &tf, cli, eval_only, kept) : 0, n = 0, first_cli = eval_only ? 0 : n_kept;
    if (!eval_only)
        for (int i = 0; i < n_kept; i++) args[n++] = kept[i];
    for (int i = 1; i < argc; i++) args[n++] = argv[i];
    if (eval_only)
        for (int i = 0; i < n_kept; i++) args[n++] = kept[i];

    const char *set_by[MODEL_N] = {NULL};
    char model_flag[48] = "";
    for (int i = 0; i < n; i++) {
        if (strcmp(args[i], "--model") == 0 && i + 1 < n) {
            int found = 0;
            for (int p = 0; p < N_PRESETS; p++)
                if (strcmp(args[i + 1], PRESETS[p].name) == 0) { apply_preset(c, &PRESETS[p]); found = 1; }
            if (!found) fail("--model: unknown preset '%s' (see --help)", args[i + 1]);
            if (i < first_cli) continue;  // a kept --model: the checkpoint's model is the model
            snprintf(model_flag, sizeof(model_flag), "--model %s", args[i + 1]);
            for (int f = CKI_C; f <= CKI_T; f++) set_by[f] = model_flag;
            set_by[MODEL_ARCH] = model_flag;
        }
    }
    static const size_t MODEL_FIELDS[MODEL_N] = {offsetof(Config, V), offsetof(Config, Vp), offsetof(Config, C),
                                                 offsetof(Config, L), offsetof(Config, NH), offsetof(Config, NKV),
                                                 offsetof(Config, F), offsetof(Config, T), offsetof(Config, rope_base),
                                                 offsetof(Config, arch)};
    const char *last[N_ARGS] = {NULL};  // the value each flag ends with ("" for a switch)
    for (int i = 0; i < n; i++) {
        const ArgSpec *a = find_arg(args[i]);
        if (!a) fail("unknown flag '%s' (see --help)", args[i]);
        if (a->type == ARG_FLAG) {
            *(int *)((char *)c + a->offset) = 1;
            last[a - ARGS] = "";
            continue;
        }
        if (i + 1 >= n) fail("%s needs a value", args[i]);
        if (strcmp(a->name, "--out_dir") == 0 && !args[i + 1][0]) fail("--out_dir must not be empty");
        for (int f = 0; f < MODEL_N; f++)
            if (a->offset == MODEL_FIELDS[f]) set_by[f] = a->name;
        if (strcmp(a->name, "--model") != 0) set_arg(c, a, args[i + 1]);
        last[a - ARGS] = args[++i];
    }
    free(args);
    check_ignored_flags(c, cli);
    size_t used = 0;
    for (int k = 0; k < N_ARGS; k++) {  // what this run's checkpoints keep
        if (!last[k] || ARGS[k].run == RUN_NO) continue;
        if (strchr(last[k], '\n') || strchr(last[k], '\t')) fail("%s: a value with a tab or newline", ARGS[k].name);
        int w = snprintf(c->run_flags + used, sizeof(c->run_flags) - used, "%s\t%s\n", ARGS[k].name, last[k]);
        if (w < 0 || (size_t)w >= sizeof(c->run_flags) - used) fail("the flags' values are too long to keep in a checkpoint");
        used += (size_t)w;
    }
    if (ckpt && ckpt[0]) {
        adopt_checkpoint_model(c, &tf, set_by);
        if (resume && resume[0]) {
            float own = embed_scale(c);  // the encoding's factor (ckpt_embed_scale is not set yet)
            c->ckpt_embed_scale = checkpoint_embed_scale(&tf);
            if (!tf_find(&tf, "meta.embed_scale") && own != 1.0f)
                printf("note: '%s' was trained before --pe %s scaled the token embedding by sqrt(n_embd) (the papers' "
                       "form): it keeps the factor 1 it was trained with; a new run gets sqrt(n_embd)\n", resume, PE_NAMES[c->pe]);
        }
        tf_free(&tf);
    }
    if (!FLAG_VALUE(last, "--eval_len")) c->eval_len = c->T > 0 && c->T < 2048 ? 8 * c->T : 16384;  // a bad T is refused below
    if (!FLAG_VALUE(last, "--indist_start") && c->T <= 64) c->indist_start = c->T / 2;  // the default 64 needs a longer window
    validate_config(c);
    if (!c->out_dir[0] && c->resume[0]) {  // a resumed run, or its evaluation, stays in the checkpoint's folder
        snprintf(c->out_dir, sizeof(c->out_dir), "%s", c->resume);
        char *slash = strrchr(c->out_dir, '/');
        if (slash) *slash = 0; else snprintf(c->out_dir, sizeof(c->out_dir), ".");
    }
    if (!c->out_dir[0]) {
        snprintf(c->out_dir, sizeof(c->out_dir), "runs/%s_%s%s%s%s", c->model, c->pe ? PE_NAMES[c->pe] : "",
                 c->pe ? "_" : "", POS_SCHEME_NAMES[c->pos_scheme], c->qk_norm ? "_qknorm" : "");
        c->out_dir_default = 1;
    }
    if (!c->eval_tag[0])
        snprintf(c->eval_tag, sizeof(c->eval_tag), "eval_L%d%s%s", c->eval_len, c->scaling ? "_" : "", c->scaling ? SCALE_NAMES[c->scaling] : "");
}
#undef FLAG_VALUE

static inline PosConfig pos_config_of(const Config *c) {
    PosConfig p;
    memset(&p, 0, sizeof(p));
    p.scheme = c->pos_scheme;
    p.pe = c->pe;
    p.drope_step = c->drope_step;
    p.alpha_min = c->alpha_min;
    p.alpha_max = c->alpha_max;
    p.rope_base = c->rope_base;
    p.head_dim = c->C / c->NH;
    p.n_layer = c->L;
    p.n_head = c->NH;
    p.seed = (uint64_t)c->seed;
    p.n_alpha_set = parse_float_list(c->alpha_set, p.alpha_set, MAX_ALPHA_SET, "--alpha_set");
    p.layers = c->pos_layers;
    p.curriculum_log = c->curriculum_dist;
    p.total_steps = c->steps;
    p.seq_len = c->T;
    p.step_seqs = c->total_batch;
    p.rpe_per_layer = c->rpe_layers;
    p.rpe_eval_random = c->rpe_eval;
    p.rel = rel_shape_of(c);
    p.ape_scale = pe_is(c->pe, PEF_WINDOW_FREQS) ? (float)c->C / (float)c->T : 1.0f;
    p.pose_scaling = c->pose_scaling;
#define POS_PARAM_COPY(field, ctype, argtype, flag, def, scheme, check, must, help) p.field = c->field;
    POS_PARAM_TABLE(POS_PARAM_COPY)
#undef POS_PARAM_COPY
    return p;
}
