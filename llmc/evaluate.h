// The paper's evaluation (PosAug paper, Section 3), driven the same way by both trainers
// through the three functions of an EvalModel:
//   per-position loss of n contiguous validation sequences of length L_eval (offsets 0,
//   L_eval, 2 L_eval, ...), one full causal pass each -> in-dist, OOD, cliff, penalty;
//   the attention entropy of each query position -> entropy ratio;
//   the same sequences with a W-token context, in two variants -> G(C):
//     banded:  every query sees exactly the previous W tokens at their true positions;
//     chunked: the paper's approximation: chunks of `chunk` tokens, the KV cache cut to the
//              last W entries after each chunk, the next chunk's positions starting at the
//              cache size, cached keys keeping their old rotation;
//   passkey retrieval and RULER's single needle at lists of prompt lengths (greedy
//   decoding, KV cache).
// Evaluation-time RoPE scaling (--scaling) applies to every pass.
//   HellaSwag (llmc/hellaswag.h) from a tokenized file.
// Writes <tag>.csv (one row per position), <tag>.json (the summary), <tag>_passkey.csv,
// <tag>_ruler.csv, <tag>_hellaswag.csv.
#pragma once
#include "utils.h"
#include <unistd.h>
#include "config.h"
#include "dataloader.h"
#include "hellaswag.h"
#include "metrics.h"
#include "passkey.h"
#include "runfolder.h"
#include "schedule.h"
#include "tasks.h"
#include "tokenizer.h"

typedef struct {
    void *ctx;
    // losses[i] = loss of tokens[i+1] at position i (i < L); window 0: full causal context,
    // W > 0: the last W tokens (banded). entropy (L), when given: the mean attention entropy
    // over heads and layers of each query position is added.
    void (*losses)(void *ctx, const int *tokens, int L, const PosStep *ps, int window, float *losses, float *entropy);
    // the chunked KV-cache approximation (see above)
    void (*losses_chunked)(void *ctx, const int *tokens, int L, const PosStep *ps, int window, int chunk, float *losses);
    // greedy decoding: out[0..n_new) continues prompt[0..n)
    void (*greedy)(void *ctx, const int *prompt, int n, int n_new, const PosStep *ps, int *out);
} EvalModel;

static inline EvalScaling eval_scaling_of(const Config *c) {
    EvalScaling es = {c->scaling, c->scale_factor > 0 ? c->scale_factor : (float)c->eval_len / c->T,
                      c->yarn_beta_fast, c->yarn_beta_slow, c->yarn_temperature, c->T};
    return es;
}

// The default C list of G(C): 2w, 4w, ... up to L_eval (and L_eval itself), all above W.
static inline int gain_lengths(const Config *c, int *out, int max) {
    int n = parse_int_list(c->gain_lengths, out, max, "--gain_lengths");
    if (n) return n;
    for (long C = 2L * c->T; C < c->eval_len && n < max - 1; C *= 2)
        if (C > c->gain_window) out[n++] = (int)C;
    out[n++] = c->eval_len;
    return n;
}

// A terminal picture of loss(i): mean loss in 16 equal position buckets, as bars on a
// fixed scale (full width = ln V, the loss of a uniform guess) so runs compare by eye. A
// bucket that the window's end falls inside is split there: each row is all "in" or all OOD.
static inline void print_loss_bars(const double *loss, int L_eval, int w, int V) {
    enum { WIDTH = 50 };
    int NB = L_eval < 16 ? L_eval : 16;  // rows of at least one position
    double top = log((double)V);
    printf("loss by position (the training window ends at %d):\n", w);
    for (int k = 0; k < NB; k++) {
        int lo = (int)((long)L_eval * k / NB), end = (int)((long)L_eval * (k + 1) / NB);
        for (int hi = lo < w && w < end ? w : end; lo < end; lo = hi, hi = end) {
            double m = mean_range(loss, lo, hi);
            int n = (int)(WIDTH * fmin(m / top, 1.0) + 0.5);
            printf("  %6d-%-6d %s ", lo, hi - 1, lo < w ? "in " : "OOD");
            for (int i = 0; i < n; i++) fputs("#", stdout);
            printf(" %.3f\n", m);
        }
    }
}

// Progress of long work on stderr, as training prints its steps: the amount done, the rate
// and the time left. On a terminal one line rewritten in place; in a log, a line every
// PROGRESS_EVERY seconds (30 unless that variable says otherwise), so short work adds none.
typedef struct {
    const char *what, *unit;
    double n, t0, shown, every;
    int tty;
} Progress;

static inline double progress_every(void) {
    const char *env = getenv("PROGRESS_EVERY");
    return env && *env ? parse_number_in("PROGRESS_EVERY (seconds between progress lines)", env, 0, 1e9) : 30.0;
}

static inline Progress progress_begin(const char *what, const char *unit, double n) {
    Progress p = {what, unit, n, wall_time(), 0.0, progress_every(), isatty(2)};
    p.shown = p.t0;
    return p;
}

static inline void progress_at(Progress *p, double done) {
    double now = wall_time(), dt = now - p->t0;
    int end = done >= p->n, logged = p->shown > p->t0;
    if (!p->tty && !(now - p->shown >= p->every || (end && logged))) return;
    char eta[32];
    format_duration(done > 0 ? dt / done * (p->n - done) : 0, eta, sizeof(eta));
    fprintf(stderr, "%s%s: %.0f/%.0f %s (%.1f%%) | %.0f %s/s | ETA %s%s", p->tty ? "\r" : "", p->what, done, p->n, p->unit,
            100 * done / p->n, dt > 0 ? done / dt : 0, p->unit, eta, p->tty && !end ? "   " : "\n");
    p->shown = now;
}

// Needle retrieval through greedy decoding: passkey, or RULER's single needle.
enum { TASK_PASSKEY, TASK_RULER };
typedef struct {
    int kind;
    const char *name, *lengths, *prompts;  // "passkey"/"ruler"; --<name>_lengths, --<name>_prompts
    char lengths_flag[32], prompts_flag[32];
    int n, n_new, digits;                  // examples per length, tokens decoded, passkey digits
} Retrieval;

static inline Retrieval retrieval_of(const Config *c, int kind) {
    Retrieval t;
    memset(&t, 0, sizeof(t));
    t.kind = kind;
    t.name = kind == TASK_PASSKEY ? "passkey" : "ruler";
    t.lengths = kind == TASK_PASSKEY ? c->passkey_lengths : c->ruler_lengths;
    t.prompts = kind == TASK_PASSKEY ? c->passkey_prompts : c->ruler_prompts;
    t.n = kind == TASK_PASSKEY ? c->passkey_n : c->ruler_n;
    t.n_new = kind == TASK_PASSKEY ? 10 : 12;  // RULER: " 1234567." and room
    t.digits = c->passkey_digits;
    snprintf(t.lengths_flag, sizeof(t.lengths_flag), "--%s_lengths", t.name);
    snprintf(t.prompts_flag, sizeof(t.prompts_flag), "--%s_prompts", t.name);
    return t;
}

static inline int retrieval_on(const Retrieval *t) { return t->lengths[0] || t->prompts[0]; }

// A byte prompt of at most max_bytes: draws the example from r, returns its length (or
// -1 when even the prompt without filler is longer), the answer, and the depth.
static inline int retrieval_build(const Retrieval *t, Rng *r, char *buf, int max_bytes, long *answer, double *depth) {
    if (t->kind == TASK_PASSKEY) {
        *answer = passkey_draw_key(r, t->digits);
        return passkey_build_text(buf, max_bytes, (int)*answer, rng_f32(r), depth);
    }
    char key[32];
    *answer = ruler_draw(r, key);
    return ruler_build_text(buf, max_bytes, key, *answer, rng_f32(r), depth);
}

typedef struct {
    int n;                   // lengths
    int lengths[64], correct[64], total[64];
} PasskeyResult;

// One retrieval task at its lengths; per-example rows go to csv.
static inline PasskeyResult run_retrieval(const Retrieval *t, const Config *c, const EvalModel *m, const Tokenizer *tok,
                                          const PosConfig *pc, const EvalScaling *es, FILE *csv) {
    PasskeyResult r;
    memset(&r, 0, sizeof(r));
    enum { MAX_NEW = 16 };
    int out[MAX_NEW];
    char text[MAX_NEW * 256 + 1];
    fprintf(csv, "length,depth,%s,correct,output\n", t->kind == TASK_PASSKEY ? "key" : "value");
    PasskeyPrompts pp;
    int pretokenized = t->prompts[0] != 0;
    if (pretokenized) {
        passkey_prompts_load(&pp, t->prompts, c->V, t->prompts_flag);
        for (int i = 0; i < pp.n; i++) {  // the file's distinct lengths, in order
            int k = 0;
            while (k < r.n && r.lengths[k] != pp.lengths[i]) k++;
            if (k == r.n && r.n < 64) r.lengths[r.n++] = pp.lengths[i];
        }
    } else {
        if (tok->pieces) fail("%s prompts for a BPE vocabulary come from data/passkey_prompts.py: pass %s", t->name, t->prompts_flag);
        r.n = parse_int_list(t->lengths, r.lengths, 64, t->lengths_flag);
    }
    double total = 0, done = 0;  // positions decoded through, all lengths: the long prompts take the time
    for (int li = 0; li < r.n; li++) {
        int count = pretokenized ? 0 : t->n;
        for (int i = 0; pretokenized && i < pp.n; i++) count += pp.lengths[i] == r.lengths[li];
        total += (double)count * (r.lengths[li] + t->n_new);
    }
    Progress pr = progress_begin(t->name, "positions", total);
    for (int li = 0; li < r.n; li++) {
        int len = r.lengths[li];
        PosStep ps = pos_eval_step(pc, es, len + t->n_new);
        uint64_t stream = (t->kind == TASK_PASSKEY ? 0x9A55ULL : 0x2D1EULL) * 1000003ULL + (uint64_t)len;
        Rng rng = rng_make((uint64_t)c->seed, stream);
        int count = pretokenized ? 0 : t->n;
        if (pretokenized)
            for (int i = 0; i < pp.n; i++) count += pp.lengths[i] == len;
        int *prompt = (int *)xmalloc((size_t)(len + 1) * sizeof(int));
        char *buf = (char *)xmalloc((size_t)len + 1);
        for (int e = 0, i = 0; e < count; e++) {
            int n;
            long answer;
            double depth;
            if (pretokenized) {
                while (pp.lengths[i] != len) i++;
                n = pp.offsets[i + 1] - pp.offsets[i];
                memcpy(prompt, pp.tokens + pp.offsets[i], n * sizeof(int));
                answer = pp.keys[i];
                depth = pp.depths[i];
                i++;
            } else {
                int nb = retrieval_build(t, &rng, buf, len - 1, &answer, &depth);
                if (nb < 0) fail("%s: %d tokens cannot hold the %s prompt", t->lengths_flag, len, t->name);
                prompt[0] = tok->eot;
                for (int j = 0; j < nb; j++) prompt[1 + j] = (unsigned char)buf[j];
                n = nb + 1;
            }
            m->greedy(m->ctx, prompt, n, t->n_new, &ps, out);
            int tl = 0;
            for (int j = 0; j < t->n_new; j++) {
                if (out[j] == tok->eot) break;
                if (!tok->pieces) text[tl++] = (char)out[j];
                else if (out[j] >= 0 && out[j] < tok->vocab_size) {
                    memcpy(text + tl, tok->pieces[out[j]], tok->lens[out[j]]);
                    tl += tok->lens[out[j]];
                }
            }
            text[tl] = 0;
            int ok = t->kind == TASK_PASSKEY ? passkey_first_integer(text) == answer : ruler_found(text, answer);
            r.correct[li] += ok;
            r.total[li]++;
            for (int j = 0; j < tl; j++)  // keep the CSV field on one line
                if (text[j] == '\n' || text[j] == '\r' || text[j] == ',' || text[j] == '"') text[j] = ' ';
            fprintf(csv, "%d,%.4f,%ld,%d,\"%s\"\n", len, depth, answer, ok, text);
            progress_at(&pr, done += len + t->n_new);
        }
        free(prompt);
        free(buf);
    }
    if (pretokenized) tf_free(&pp.tf);
    return r;
}

// The longest retrieval prompt of the run (passkey and RULER: lengths or prompt files), 0 for none.
static inline int passkey_longest(const Config *c) {
    int longest = 0;
    for (int kind = TASK_PASSKEY; kind <= TASK_RULER; kind++) {
        Retrieval t = retrieval_of(c, kind);
        int lens[64], n = parse_int_list(t.lengths, lens, 64, t.lengths_flag);
        for (int i = 0; i < n; i++) longest = lens[i] > longest ? lens[i] : longest;
        if (t.prompts[0]) {
            PasskeyPrompts pp;
            passkey_prompts_load(&pp, t.prompts, c->V, t.prompts_flag);
            for (int i = 0; i < pp.n; i++) longest = pp.lengths[i] > longest ? pp.lengths[i] : longest;
            tf_free(&pp.tf);
        }
    }
    return longest;
}

// The number after "key": in a JSON's text (the first one), or NAN.
static inline double json_text_number(const char *text, const char *key) {
    char pat[128];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = strstr(text, pat);
    char *end;
    double v = p ? strtod(p + strlen(pat), &end) : NAN;
    return p && end != p + strlen(pat) ? v : NAN;
}

// An evaluation the folder already holds under this tag, made on other validation data, is
// not replaced without --overwrite: the two would be read as one experiment. The data is its
// content, whatever its files are called: the JSON's val_data records the tokens of the files
// and the CRC-32 of the n_sequences x L_eval + 1 tokens it evaluated; the same token count and
// the same CRC of as many tokens here is the same data. (A summary from before val_data was
// recorded cannot tell, and is replaced.)
static inline void eval_data_check(const Config *c) {
    if (c->out_dir_default && !c->resume[0]) return;  // a new run's folder: numbered on past an earlier run's
    char path[1200], tag[256], files[1024];
    static char buf[65536];
    snprintf(path, sizeof(path), "%s/%s.json", c->out_dir, c->eval_tag);
    if (c->overwrite || !eval_json_tag(path, tag, sizeof(tag))) return;
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    const char *lead = "\"val_data\": {\"files\": \"", *p = strstr(buf, lead), *crc_at = strstr(buf, "\"evaluated_crc32\": \"");
    unsigned crc;
    if (!p || !crc_at || sscanf(crc_at + 20, "%8x", &crc) != 1) return;
    size_t k = 0;
    for (p += strlen(lead); *p && *p != '"' && k + 1 < sizeof(files); p++) {  // json_string's escapes undone
        unsigned u;
        if (p[0] == '\\' && p[1] == 'u' && sscanf(p + 2, "%4x", &u) == 1) files[k++] = (char)u, p += 5;
        else files[k++] = *p == '\\' && p[1] ? *++p : *p;
    }
    files[k] = 0;
    double tokens = json_text_number(p, "tokens"), evaluated = json_text_number(buf, "n_sequences") * json_text_number(buf, "L_eval") + 1;
    long n_val;
    unsigned char *mask = NULL;
    int *val = val_stream_load(c->val_data, c->V, &n_val, &mask);
    int fits = evaluated >= 1 && evaluated <= n_val;
    unsigned here = fits ? (unsigned)crc32_update(0, val, (size_t)evaluated * sizeof(int)) : 0;
    free(val);
    free(mask);
    if (tokens != (double)n_val || !fits || here != crc)
        fail("'%s' is an evaluation of other validation data (%s: %.0f tokens, CRC-32 %08x of the %.0f it evaluated; this "
             "one reads %s: %ld tokens, CRC-32 %08x of as many): give this evaluation its own --eval_tag, or pass --overwrite "
             "to replace it", path, files, tokens, crc, evaluated, c->val_data, n_val, here);
}

// What the evaluation at the end of a run needs, checked before the run starts (so a
// mistake is not found hours later): enough validation tokens, a readable baseline,
// retrieval prompts that load and fit, its data the data of the folder's evaluation it replaces.
static inline void run_preflight(const Config *c, const Tokenizer *tok) {
    progress_every();  // a bad PROGRESS_EVERY refused now, not when the evaluation begins
    int trains = !c->eval_only && c->steps > 0;
    double t0 = wall_time(), n_train = 0, n_val = 0;
    if (trains) n_train = shards_check(c->train_data, "--train_data", c->V);
    if ((trains && c->val_every) || (!c->generate && c->eval_len)) n_val = shards_check(c->val_data, "--val_data", c->V);
    if (n_train || n_val)
        printf("data: %.0f training and %.0f validation tokens checked against the vocab size %d in %.2fs\n", n_train, n_val,
               c->V, wall_time() - t0);
    if (c->generate) {  // positions 0 .. n - 1 for the end-of-text, the prompt and every new token but the last
        int n = 1 + (tok->pieces ? 0 : (int)strlen(c->prompt)) + c->generate - 1;
        if (pe_has_wpe(c->pe) && n > wpe_rows(c))
            fail("--generate %d: the end-of-text, the prompt and the new tokens reach position %d, but --pe %s's "
                 "table has rows for positions 0..%d only: generate at most %d tokens (or a shorter --prompt)",
                 c->generate, n - 1, PE_NAMES[c->pe], wpe_rows(c) - 1, c->generate - (n - wpe_rows(c)));
        return;
    }
    if (c->task_eval[0]) {
        TaskFile t;
        task_file_load(&t, c->task_eval, c->V);
        tf_free(&t.tf);
    }
    if (!c->eval_len) return;
    if (c->eval_only) scaling_check(c->scaling, c->pe, c->pose_scaling);  // the checkpoint's encoding (run_prepare adopted it)
    double largest, total;
    shard_token_counts(c->val_data, &largest, &total);
    if (total == 0) shards_glob(c->val_data, "--val_data");  // names a missing file
    if ((double)c->eval_n * c->eval_len + 1 > total)
        fail("--val_data has %.0f tokens; the evaluation needs %.0f (--eval_n %d x --eval_len %d + 1)", total,
             (double)c->eval_n * c->eval_len + 1, c->eval_n, c->eval_len);
    eval_data_check(c);
    if (c->baseline[0]) read_json_number(c->baseline, "in_dist");
    if (c->hellaswag[0]) {
        HellaSwag h;
        hellaswag_load(&h, c->hellaswag, c->V);
        tf_free(&h.tf);
    }
    for (int kind = TASK_PASSKEY; kind <= TASK_RULER; kind++) {
        Retrieval t = retrieval_of(c, kind);
        if (t.prompts[0]) {
            PasskeyPrompts pp;
            passkey_prompts_load(&pp, t.prompts, c->V, t.prompts_flag);
            tf_free(&pp.tf);
        } else if (t.lengths[0]) {
            if (tok->pieces) fail("%s prompts for a BPE vocabulary come from data/passkey_prompts.py: pass %s", t.name, t.prompts_flag);
            int lens[64], n = parse_int_list(t.lengths, lens, 64, t.lengths_flag);
            for (int i = 0; i < n; i++) {
                char *buf = (char *)xmalloc((size_t)lens[i] + 1);
                double depth;
                long answer;
                Rng r = rng_make(0, 0);
                int nb = retrieval_build(&t, &r, buf, lens[i] - 1, &answer, &depth);
                free(buf);
                if (nb < 0) fail("%s: %d tokens cannot hold the %s prompt", t.lengths_flag, lens[i], t.name);
            }
        }
    }
}

typedef struct {
    int n, correct, correct_norm;  // examples; right by the loss sum, by the sum per character
} HellaSwagResult;

// HellaSwag (llmc/hellaswag.h) through the model's full causal pass over context + ending;
// one CSV row per example.
static inline HellaSwagResult run_hellaswag(const Config *c, const EvalModel *m, const PosConfig *pc,
                                            const EvalScaling *es, FILE *csv) {
    HellaSwag h;
    hellaswag_load(&h, c->hellaswag, c->V);
    HellaSwagResult r = {c->hellaswag_n && c->hellaswag_n < h.n ? c->hellaswag_n : h.n, 0, 0};
    fprintf(csv, "example,label,pred,pred_norm,loss0,loss1,loss2,loss3\n");
    int cap = 0, *seq = NULL;
    float *losses = NULL;
    Progress pr = progress_begin("hellaswag", "examples", r.n);
    for (int i = 0; i < r.n; i++) {
        int nc = h.ctx_offsets[i + 1] - h.ctx_offsets[i];
        double sum[4], norm[4];
        for (int j = 0; j < 4; j++) {
            int e = 4 * i + j, ne = h.end_offsets[e + 1] - h.end_offsets[e], L = nc + ne - 1;  // L positions predict the rest
            if (L + 1 > cap) {
                cap = L + 1;
                free(seq);
                free(losses);
                seq = (int *)xmalloc((size_t)cap * sizeof(int));
                losses = (float *)xmalloc((size_t)cap * sizeof(float));
            }
            memcpy(seq, h.ctx_tokens + h.ctx_offsets[i], nc * sizeof(int));
            memcpy(seq + nc, h.end_tokens + h.end_offsets[e], ne * sizeof(int));
            PosStep ps = pos_eval_step(pc, es, L);
            m->losses(m->ctx, seq, L, &ps, 0, losses, NULL);
            sum[j] = 0.0;
            for (int k = nc - 1; k < L; k++) sum[j] += losses[k];  // the ending's tokens seq[nc..L]
            norm[j] = sum[j] / h.end_chars[e];
        }
        int pred = hellaswag_pick(sum), pred_norm = hellaswag_pick(norm);
        r.correct += pred == h.labels[i];
        r.correct_norm += pred_norm == h.labels[i];
        fprintf(csv, "%d,%d,%d,%d,%.6f,%.6f,%.6f,%.6f\n", i, h.labels[i], pred, pred_norm, sum[0], sum[1], sum[2], sum[3]);
        progress_at(&pr, i + 1);
    }
    free(seq);
    free(losses);
    tf_free(&h.tf);
    return r;
}

// The JSON object of a retrieval result (or null).
static inline void retrieval_json(FILE *f, const Retrieval *t, const PasskeyResult *r) {
    if (!r->n) {
        fprintf(f, "null");
        return;
    }
    fprintf(f, "{\"lengths\": [");
    for (int i = 0; i < r->n; i++) fprintf(f, "%s%d", i ? ", " : "", r->lengths[i]);
    fprintf(f, "], \"n\": [");
    for (int i = 0; i < r->n; i++) fprintf(f, "%s%d", i ? ", " : "", r->total[i]);
    fprintf(f, "], \"accuracy\": [");
    for (int i = 0; i < r->n; i++) fprintf(f, "%s%.4f", i ? ", " : "", r->total[i] ? (double)r->correct[i] / r->total[i] : 0.0);
    if (t->prompts[0]) {
        fputs("], \"prompts\": ", f);
        json_string(f, t->prompts);
        fputs("}", f);
    } else if (t->kind == TASK_PASSKEY) {
        fprintf(f, "], \"digits\": %d}", t->digits);
    } else {
        fprintf(f, "]}");
    }
}

static inline void run_evaluation(const Config *c, const EvalModel *m, const Tokenizer *tok) {
    if (!c->eval_len) return;
    int L = c->eval_len, W = c->gain_window, chunk = c->gain_chunk ? c->gain_chunk : c->gain_window;
    long n_val;
    unsigned char *val_mask = NULL;  // a task's loss mask: the per-position evaluation reads every position
    int *val = val_stream_load(c->val_data, c->V, &n_val, &val_mask);
    free(val_mask);
    if ((long)c->eval_n * L + 1 > n_val)
        fail("--val_data has %ld tokens; the evaluation needs %ld (--eval_n %d x --eval_len %d + 1)", n_val,
             (long)c->eval_n * L + 1, c->eval_n, L);
    PosConfig pc = pos_config_of(c);
    EvalScaling es = eval_scaling_of(c);
    PosStep ps = pos_eval_step(&pc, &es, L);
    int pe = ps.pe;  // the trained model's encoding (NoPE after DroPE)
    scaling_check(c->scaling, pe, c->pose_scaling);
    double *loss = (double *)xcalloc(L, sizeof(double)), *ent = (double *)xcalloc(L, sizeof(double));
    double *banded = (double *)xcalloc(L, sizeof(double)), *chunked = (double *)xcalloc(L, sizeof(double));
    float *buf = (float *)xmalloc(L * sizeof(float)), *ebuf = (float *)xmalloc(L * sizeof(float));
    double t0 = wall_time();
    char what[300];
    snprintf(what, sizeof(what), "eval %s", c->eval_tag);
    Progress pr = progress_begin(what, "positions", (double)c->eval_n * L);
    for (int s = 0; s < c->eval_n; s++) {
        const int *seq = val + (long)s * L;
        memset(ebuf, 0, L * sizeof(float));
        m->losses(m->ctx, seq, L, &ps, 0, buf, ebuf);
        for (int i = 0; i < L; i++) {
            loss[i] += (double)buf[i] / c->eval_n;
            ent[i] += (double)ebuf[i] / c->eval_n;
        }
        if (W) {
            m->losses(m->ctx, seq, L, &ps, W, buf, NULL);
            for (int i = 0; i < L; i++) banded[i] += (double)buf[i] / c->eval_n;
            m->losses_chunked(m->ctx, seq, L, &ps, W, chunk, buf);
            for (int i = 0; i < L; i++) chunked[i] += (double)buf[i] / c->eval_n;
        }
        progress_at(&pr, (double)(s + 1) * L);
    }
    double t_loss = wall_time() - t0;
    CliffSummary cs = cliff_summary(loss, L, c->T, c->indist_start);
    double er = c->arch == ARCH_GRU ? NAN : entropy_ratio(ent, L, c->T, c->indist_start);  // a GRU has no attention
    double penalty = c->baseline[0] ? cs.in_dist / read_json_number(c->baseline, "in_dist") - 1.0 : NAN;
    int Cs[64], nC = W ? gain_lengths(c, Cs, 64) : 0;
    double g_chunked[64], g_banded[64];
    for (int i = 0; i < nC; i++) {
        g_chunked[i] = context_gain(chunked, loss, W, Cs[i]);
        g_banded[i] = context_gain(banded, loss, W, Cs[i]);
    }
    // the numbers first, then the files: a failing write loses no result
    print_loss_bars(loss, L, c->T, c->V);
    const char *scaled = c->scaling ? SCALE_NAMES[c->scaling] : c->pose_scaling ? POSE_SCALING_NAMES[c->pose_scaling] : "";
    printf("eval %s (%s%s%s, L_eval %d, %d sequences, %.1fs): in-dist %.4f | OOD %.4f | cliff %.4f | entropy ratio %.3f\n",
           c->eval_tag, c->arch == ARCH_GRU ? "gru" : POS_SCHEME_NAMES[c->pos_scheme], scaled[0] ? " + " : "", scaled, L,
           c->eval_n, t_loss, cs.in_dist, cs.ood, cs.cliff, er);
    if (c->baseline[0]) printf("penalty vs %s: %+.2f%%\n", c->baseline, 100 * penalty);
    for (int i = 0; i < nC; i++)
        printf("G(%d) vs a %d-token window: %+.4f (chunked, the paper's approximation) | %+.4f (exact banded)\n", Cs[i], W,
               g_chunked[i], g_banded[i]);
    char path[1200];
    OutFile o;
    snprintf(path, sizeof(path), "%s/%s.csv", c->out_dir, c->eval_tag);
    out_open(&o, path);
    FILE *f = o.f;
    fprintf(f, "position,loss%s,entropy\n", W ? ",loss_banded,loss_chunked" : "");
    for (int i = 0; i < L; i++) {
        fprintf(f, "%d,%.6f", i, loss[i]);
        if (W) fprintf(f, ",%.6f,%.6f", banded[i], chunked[i]);
        fprintf(f, ",%.6f\n", ent[i]);
    }
    eval_set_hold(&o);

    Retrieval tasks[2] = {retrieval_of(c, TASK_PASSKEY), retrieval_of(c, TASK_RULER)};
    PasskeyResult res[2];
    for (int k = 0; k < 2; k++) {
        memset(&res[k], 0, sizeof(res[k]));
        if (!retrieval_on(&tasks[k])) continue;
        double t1 = wall_time();
        snprintf(path, sizeof(path), "%s/%s_%s.csv", c->out_dir, c->eval_tag, tasks[k].name);
        out_open(&o, path);
        res[k] = run_retrieval(&tasks[k], c, m, tok, &pc, &es, o.f);
        for (int i = 0; i < res[k].n; i++)
            printf("%s at %d tokens: %d/%d correct (%.1f%%)\n", tasks[k].name, res[k].lengths[i], res[k].correct[i],
                   res[k].total[i], 100.0 * res[k].correct[i] / res[k].total[i]);
        if (res[k].n) printf("%s took %.1fs\n", tasks[k].name, wall_time() - t1);
        eval_set_hold(&o);
    }
    HellaSwagResult hs = {0, 0, 0};
    double t_hs = wall_time();
    if (c->hellaswag[0]) {
        snprintf(path, sizeof(path), "%s/%s_hellaswag.csv", c->out_dir, c->eval_tag);
        out_open(&o, path);
        hs = run_hellaswag(c, m, &pc, &es, o.f);
        t_hs = wall_time() - t_hs;
        if (hs.n)
            printf("hellaswag: acc %.4f, acc_norm %.4f over %d examples (%.1fs; chance 0.25)\n", (double)hs.correct / hs.n,
                   (double)hs.correct_norm / hs.n, hs.n, t_hs);
        eval_set_hold(&o);
    }

    snprintf(path, sizeof(path), "%s/%s.json", c->out_dir, c->eval_tag);
    out_open(&o, path);
    f = o.f;
    const char *run = strrchr(c->out_dir, '/') ? strrchr(c->out_dir, '/') + 1 : c->out_dir;
    fputs("{\"tag\": ", f);
    json_string(f, c->eval_tag);
    fputs(", \"run\": ", f);
    json_string(f, run);
    fputs(", \"model\": ", f);
    json_string(f, c->model);
    fprintf(f, ", \"arch\": \"%s\", \"pos_scheme\": \"%s\", \"pe\": \"%s\", \"qk_norm\": %s, \"alpha_range\": [%g, %g], "
               "\"seed\": %lld, \"L_eval\": %d, \"train_window\": %d, \"n_sequences\": %d, \"indist_start\": %d, "
               "\"scaling\": \"%s\", \"scale_factor\": %g, \"yarn_temperature\": \"%s\", \"pose_scaling\": \"%s\", "
               "\"variant\": \"full\", ",
            ARCH_NAMES[c->arch], POS_SCHEME_NAMES[c->pos_scheme], c->arch == ARCH_GRU ? "none" : PE_NAMES[pe], c->qk_norm ? "true" : "false", c->alpha_min, c->alpha_max, c->seed, L, c->T,
            c->eval_n, c->indist_start, SCALE_NAMES[c->scaling], c->scaling ? es.factor : 1.0,
            YARN_TEMP_NAMES[c->yarn_temperature], POSE_SCALING_NAMES[c->pose_scaling]);
    // the data it was computed on: the shards' pattern, their tokens, a CRC-32 of the tokens
    // evaluated (int32, as read)
    fputs("\"val_data\": {\"files\": ", f);
    json_string(f, c->val_data);
    fprintf(f, ", \"tokens\": %ld, \"evaluated_crc32\": \"%08x\"}, ", n_val,
            (unsigned)crc32_update(0, val, ((size_t)c->eval_n * L + 1) * sizeof(int)));
    // ratio: OOD over in-distribution loss, the PosAug paper's "frequency analysis" ratio
    const char *keys[4] = {"in_dist", "ood", "cliff", "ratio"};
    double vals[4] = {cs.in_dist, cs.ood, cs.cliff, cs.in_dist > 0 ? cs.ood / cs.in_dist : NAN};
    for (int i = 0; i < 4; i++) {
        fprintf(f, "\"%s\": ", keys[i]);
        json_number(f, "%.6f", vals[i]);
        fprintf(f, ", ");
    }
    fprintf(f, "\"penalty\": ");
    json_number(f, "%.6f", penalty);  // null without a baseline
    fputs(", \"baseline\": ", f);
    if (c->baseline[0]) json_string(f, c->baseline);
    else fputs("null", f);
    fputs(", ", f);
    fprintf(f, "\"entropy_ratio\": ");
    json_number(f, "%.6f", er);
    fprintf(f, ", \"gain\": ");
    if (nC) {
        fprintf(f, "{\"window\": %d, \"chunk\": %d, \"lengths\": [", W, chunk);
        for (int i = 0; i < nC; i++) fprintf(f, "%s%d", i ? ", " : "", Cs[i]);
        fprintf(f, "], \"chunked\": [");
        for (int i = 0; i < nC; i++) {
            fprintf(f, "%s", i ? ", " : "");
            json_number(f, "%.6f", g_chunked[i]);
        }
        fprintf(f, "], \"banded\": [");
        for (int i = 0; i < nC; i++) {
            fprintf(f, "%s", i ? ", " : "");
            json_number(f, "%.6f", g_banded[i]);
        }
        fprintf(f, "]}, ");
    } else {
        fprintf(f, "null, ");
    }
    fprintf(f, "\"passkey\": ");
    retrieval_json(f, &tasks[0], &res[0]);
    fprintf(f, ", \"ruler\": ");
    retrieval_json(f, &tasks[1], &res[1]);
    if (hs.n) {
        fprintf(f, ", \"hellaswag\": {\"n\": %d, \"acc\": %.6f, \"acc_norm\": %.6f, \"file\": ", hs.n,
                (double)hs.correct / hs.n, (double)hs.correct_norm / hs.n);
        json_string(f, c->hellaswag);
        fputs("}}\n", f);
    } else {
        fprintf(f, ", \"hellaswag\": null}\n");
    }
    eval_set_hold(&o);

    printf("wrote %s/%s.{csv,json}%s%s%s\n", c->out_dir, c->eval_tag, res[0].n ? " and _passkey.csv" : "",
           res[1].n ? " and _ruler.csv" : "", hs.n ? " and _hellaswag.csv" : "");
    int bad = 0;
    for (int i = 0; i < L; i++) bad += !isfinite(loss[i]);
    if (bad)
        fail("the evaluation gave NaN or Inf losses at %d of %d positions (null in the JSON): the model is broken (did training diverge?)",
             bad, L);
    free(loss); free(ent); free(banded); free(chunked); free(buf); free(ebuf); free(val);
}

// ----------------------------------------------------------------------------
// Length-generalization tasks (llmc/tasks.h): exact match by length.

typedef struct {
    int n;  // distinct lengths, ascending
    int lengths[4096], correct[4096], total[4096];
} TaskResult;

static inline void run_task_examples(const Config *c, const EvalModel *m, const TaskFile *t, TaskResult *rp) {
    TaskResult r;  // filled here, copied out (a few tens of KB)
    memset(&r, 0, sizeof(r));
    PosConfig pc = pos_config_of(c);
    EvalScaling es = eval_scaling_of(c);
    int *out = NULL, cap = 0;
    Progress pr = progress_begin("task", "examples", t->n);
    for (int i = 0; i < t->n; i++) {
        int np = t->prompt_offsets[i + 1] - t->prompt_offsets[i], na = t->answer_offsets[i + 1] - t->answer_offsets[i];
        if (na > cap) {
            cap = na;
            free(out);
            out = (int *)xmalloc((size_t)cap * sizeof(int));
        }
        PosStep ps = pos_eval_step(&pc, &es, np + na);
        m->greedy(m->ctx, t->prompt_tokens + t->prompt_offsets[i], np, na, &ps, out);
        int ok = memcmp(out, t->answer_tokens + t->answer_offsets[i], (size_t)na * sizeof(int)) == 0;
        int k = 0;  // the length's slot, kept in ascending order
        while (k < r.n && r.lengths[k] < t->lengths[i]) k++;
        if (k == r.n || r.lengths[k] != t->lengths[i]) {
            memmove(r.lengths + k + 1, r.lengths + k, (r.n - k) * sizeof(int));
            memmove(r.correct + k + 1, r.correct + k, (r.n - k) * sizeof(int));
            memmove(r.total + k + 1, r.total + k, (r.n - k) * sizeof(int));
            r.lengths[k] = t->lengths[i];
            r.correct[k] = r.total[k] = 0;
            r.n++;
        }
        r.correct[k] += ok;
        r.total[k]++;
        progress_at(&pr, i + 1);
    }
    free(out);
    *rp = r;
}

// --task_eval FILE: accuracy by length, written to <tag>_task.csv and <tag>_task.json.
static inline void run_task_evaluation(const Config *c, const EvalModel *m) {
    if (!c->task_eval[0]) return;
    TaskFile t;
    task_file_load(&t, c->task_eval, c->V);
    double t0 = wall_time();
    TaskResult *r = (TaskResult *)xmalloc(sizeof(TaskResult));
    run_task_examples(c, m, &t, r);
    char path[1200];
    printf("task %s (%d examples, %.1fs): exact match by length:", c->task_eval, t.n, wall_time() - t0);
    for (int k = 0; k < r->n; k++) printf(" %d:%.2f", r->lengths[k], (double)r->correct[k] / r->total[k]);
    printf("\n");  // before the files: a failing write loses no result
    OutFile o;
    snprintf(path, sizeof(path), "%s/%s_task.csv", c->out_dir, c->eval_tag);
    out_open(&o, path);
    fprintf(o.f, "length,n,correct,accuracy\n");
    for (int k = 0; k < r->n; k++)
        fprintf(o.f, "%d,%d,%d,%.4f\n", r->lengths[k], r->total[k], r->correct[k], (double)r->correct[k] / r->total[k]);
    eval_set_hold(&o);
    snprintf(path, sizeof(path), "%s/%s_task.json", c->out_dir, c->eval_tag);
    out_open(&o, path);
    const char *run = strrchr(c->out_dir, '/') ? strrchr(c->out_dir, '/') + 1 : c->out_dir;
    fputs("{\"tag\": ", o.f);  // first: the run folder's rules find the set by it (llmc/runfolder.h)
    json_string(o.f, c->eval_tag);
    fputs(", \"run\": ", o.f);
    json_string(o.f, run);
    fputs(", \"file\": ", o.f);
    json_string(o.f, c->task_eval);
    fprintf(o.f, ", \"arch\": \"%s\", \"pos_scheme\": \"%s\", \"pe\": \"%s\", \"train_window\": %d, "
                 "\"lengths\": [", ARCH_NAMES[c->arch], POS_SCHEME_NAMES[c->pos_scheme],
            c->arch == ARCH_GRU ? "none" : PE_NAMES[pe_after_drop(c->pe, c->drope_step, c->steps)], c->T);
    for (int k = 0; k < r->n; k++) fprintf(o.f, "%s%d", k ? ", " : "", r->lengths[k]);
    fprintf(o.f, "], \"n\": [");
    for (int k = 0; k < r->n; k++) fprintf(o.f, "%s%d", k ? ", " : "", r->total[k]);
    fprintf(o.f, "], \"accuracy\": [");
    for (int k = 0; k < r->n; k++) fprintf(o.f, "%s%.4f", k ? ", " : "", (double)r->correct[k] / r->total[k]);
    fprintf(o.f, "]}\n");
    eval_set_hold(&o);
    printf("wrote %s/%s_task.{csv,json}\n", c->out_dir, c->eval_tag);
    free(r);
    tf_free(&t.tf);
}
