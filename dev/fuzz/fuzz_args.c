// libFuzzer harness: the command line, parse_args and pos_config_of (llmc/config.h), and the
// kept flags' round trip through a checkpoint's meta.flags (flags_to_ints, flags_of_ints).
// The input is split into arguments at NUL and newline bytes (at most MAX_ARGS).
#include "fuzz.h"
#include "llmc/config.h"

enum { MAX_ARGS = 64, MAX_INPUT = 4096 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char buf[MAX_INPUT + 1], prog[] = "train_gpt_cpu";
    char *argv[MAX_ARGS + 2] = {prog};
    int argc = 1;
    if (size > MAX_INPUT) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    for (size_t i = 0; i < size; i++)
        if (buf[i] == '\n') buf[i] = 0;
    for (size_t i = 0; i < size && argc <= MAX_ARGS; i += strlen(buf + i) + 1) argv[argc++] = buf + i;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 0;  // prints help and exits
    fail_quiet = 1;
    static Config c;
    if (setjmp(fail_jump) == 0) {
        parse_args(&c, argc, argv);
        PosConfig p = pos_config_of(&c);
        fuzz_sink += p.n_alpha_set;
    } else {
        fuzz_release();
        return 0;  // refused: nothing to keep
    }
    // the kept flags as a checkpoint saves them, read back as --resume reads them: the same
    // text, and no refusal of what was saved (a crash either way)
    size_t n;
    int32_t *v = flags_to_ints(c.run_flags, &n);
    static char back[sizeof(c.run_flags)];
    if (setjmp(fail_jump) == 0) flags_of_ints(back, sizeof(back), v, n, "fuzz");
    else abort();
    free(v);
    if (strcmp(back, c.run_flags) != 0) abort();
    fuzz_release();
    return 0;
}

#ifdef SEED_MAIN
// Command lines from README.md (and doc/), one argument per line.
static const char *LINES[] = {
    "",
    "--pos posaug",
    "--pos posaug --alpha_range 0.5,2",
    "--model 10m --train_data data/openwebtext/*_train_*.bin --val_data data/openwebtext/*_val_*.bin --vocab_size 50277",
    "--resume runs/tiny_posaug/checkpoint.bin --eval_only --baseline runs/tiny_rope/eval_L1024.json --passkey_lengths 512,1024",
    "--resume runs/tiny_rope/checkpoint.bin --eval_only --scaling yarn",
    "--resume runs/tiny_rope/checkpoint.bin --eval_only --eval_len 2048",
    "--resume runs/tiny_rope/checkpoint.bin --steps 0 --generate 200 --prompt The\tstory\tof",
    "--steps 600 --stop_after 300",
    "--model 10m --init_from runs/base/checkpoint.bin --pe nope --qk_norm",
    "--pos rpe --pe learned --rpe_max 2048 --rpe_layers independent --rpe_eval random --eval_len 1024",
    "--pos discrete --alpha_set 1,2,4,8 --pos_layers top --gain_lengths 256,512 --gain_window 32",
    "--pos curriculum-step --curriculum_frac 0.25 --curriculum_dist log --drope_step 300 --seed -7",
    "--steps 3 --eval_len 256 --val_every 0 --pe alibi --scale_factor 2 --yarn_temperature paper",
    "--vocab_size 257 --n_embd 64 --n_layer 2 --n_head 4 --n_kv_head 2 --ffn_hidden 128 --seq_len 32 --batch_size 2 "
    "--total_batch 4 --steps 10 --warmup 3 --lr 3e-3 --min_lr 3e-4 --seed 1337 --threads 2",
};

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
    for (size_t i = 0; i < sizeof(LINES) / sizeof(LINES[0]); i++) {
        char line[512], name[32];
        snprintf(line, sizeof(line), "%s", LINES[i]);
        for (char *p = line; *p; p++)  // spaces split arguments; a tab stands for a space inside one
            *p = *p == ' ' ? '\n' : *p == '\t' ? ' ' : *p;
        snprintf(name, sizeof(name), "readme_%02zu.txt", i);
        seed_write(argv[1], name, line, strlen(line));
    }
    return 0;
}
#endif
