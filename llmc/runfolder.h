// The run folder (--out_dir): one run per folder, never two runs' files mixed. Both
// trainers claim it after every check that can refuse the run (flags, data, memory, the
// checkpoint's load) and before writing anything:
//  - a lock (flock on <dir>/.lock, the holder's pid inside) held until the process exits;
//    the kernel releases it on any exit, so a killed run's lock is simply taken over;
//  - a new run (no --resume, or --resume into another folder), and an evaluation of a
//    checkpoint from another folder, need a folder without another run's files: --overwrite
//    removes those, the last step before the first write, and never a file the run reads;
//    without --out_dir, a new run takes the next free runs/<model>_<pos>_2, _3, ... instead;
//  - --resume of <dir>/checkpoint.bin with --out_dir <dir> (the default) continues in place.
// A run's files, by exact name: checkpoint.bin, log.jsonl, and each evaluation's set, whose
// summary JSON names it: <tag>.json or <tag>_task.json beginning {"tag": "<tag>", and then
// <tag>.csv, _passkey.csv, _ruler.csv, _hellaswag.csv, _task.csv (EVAL_SET). A user's own
// files are none of them.
#pragma once
#include "config.h"
#include <dirent.h>
#include <glob.h>
#include <limits.h>
#include <sys/file.h>

// The files of an evaluation tagged <tag>: <tag><suffix>, the summaries (the JSONs) last
static const char *EVAL_SET[] = {".csv", "_passkey.csv", "_ruler.csv", "_hellaswag.csv", "_task.csv", ".json", "_task.json"};
#define EVAL_SET_N (int)(sizeof(EVAL_SET) / sizeof(EVAL_SET[0]))

// The tag a summary JSON at path names ({"tag": "..." first, as the evaluation writes it;
// escapes undone) into tag (n bytes); 0 when it names none.
static inline int eval_json_tag(const char *path, char *tag, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char head[512];
    size_t got = fread(head, 1, sizeof(head) - 1, f);
    fclose(f);
    head[got] = 0;
    const char *p = head, *lead = "{\"tag\": \"";
    if (strncmp(p, lead, strlen(lead)) != 0) return 0;
    size_t k = 0;
    for (p += strlen(lead); *p && *p != '"' && k + 1 < n; p++) tag[k++] = *p == '\\' && p[1] ? *++p : *p;
    tag[k] = 0;
    return *p == '"';
}

// Whether the file `name` in dir is a run's: checkpoint.bin, log.jsonl, or a member of an
// evaluation set whose summary in dir names its tag (with only_tag, that tag's set alone).
static inline int is_run_file(const char *dir, const char *name, const char *only_tag) {
    if (strcmp(name, "checkpoint.bin") == 0 || strcmp(name, "log.jsonl") == 0) return 1;
    size_t len = strlen(name);
    for (int k = 0; k < EVAL_SET_N; k++) {
        size_t sl = strlen(EVAL_SET[k]);
        if (len <= sl || strcmp(name + len - sl, EVAL_SET[k]) != 0) continue;
        char tag[256], path[PATH_MAX], named[256];
        snprintf(tag, sizeof(tag), "%.*s", (int)(len - sl), name);
        if (only_tag && strcmp(tag, only_tag) != 0) continue;
        for (int j = EVAL_SET_N - 2; j < EVAL_SET_N; j++) {  // the set's summaries: <tag>.json, <tag>_task.json
            snprintf(path, sizeof(path), "%s/%s%s", dir, tag, EVAL_SET[j]);
            if (eval_json_tag(path, named, sizeof(named)) && strcmp(named, tag) == 0) return 1;
        }
    }
    return 0;
}

// A file the run reads (--init_from, --resume, --baseline, the data, the tokenizer, the
// task files): the flag that names it, or NULL.
static inline const char *run_input_flag(const Config *c, const char *path) {
    char want[PATH_MAX], have[PATH_MAX];
    if (!realpath(path, want)) return NULL;
    const struct { const char *flag, *value; int glob; } in[] = {
        {"--init_from", c->init_from, 0}, {"--resume", c->resume, 0}, {"--baseline", c->baseline, 0},
        {"--train_data", c->train_data, 1}, {"--val_data", c->val_data, 1}, {"--tokenizer", c->tokenizer, 0},
        {"--task_eval", c->task_eval, 0}, {"--hellaswag", c->hellaswag, 0}, {"--passkey_prompts", c->passkey_prompts, 0},
        {"--ruler_prompts", c->ruler_prompts, 0}};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        if (!in[i].value[0]) continue;
        glob_t g;
        if (glob(in[i].value, in[i].glob ? 0 : GLOB_NOCHECK, NULL, &g) != 0) continue;
        int hit = 0;
        for (size_t k = 0; k < g.gl_pathc && !hit; k++) hit = realpath(g.gl_pathv[k], have) && strcmp(have, want) == 0;
        globfree(&g);
        if (hit) return in[i].flag;
    }
    return NULL;
}

// The files in dir that another run's would mix with this run's, listed into `found` (comma
// separated): every run file for a run that trains, checkpoint.bin, log.jsonl and its own
// tag's set for an evaluation (other tags' sets are other evaluations, which it leaves as they
// are). With `remove_them`, deleted (a file the run reads is refused first, naming its flag:
// nothing removed).
static inline int run_files(const Config *c, const char *dir, char *found, size_t n, int remove_them) {
    DIR *d = opendir(dir);
    if (!d) fail("--out_dir: cannot read '%s': %s", dir, strerror(errno));
    int count = 0;
    found[0] = 0;
    char (*names)[256] = NULL;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strlen(e->d_name) >= 256 || !is_run_file(dir, e->d_name, c->eval_only ? c->eval_tag : NULL)) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        const char *flag = remove_them ? run_input_flag(c, path) : NULL;
        if (flag)
            fail("--overwrite would remove '%s', which this run reads (%s): move it out of --out_dir '%s' first, or "
                 "choose another --out_dir", path, flag, dir);
        size_t used = strlen(found);
        if (used + strlen(e->d_name) + 8 < n) snprintf(found + used, n - used, "%s%s", count ? ", " : "", e->d_name);
        else if (used + 8 < n && !strstr(found, "...")) snprintf(found + used, n - used, ", ...");
        names = (char (*)[256])realloc(names, (size_t)(count + 1) * sizeof(*names));
        if (!names) fail("out of memory listing '%s'", dir);
        snprintf(names[count++], 256, "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; remove_them && i < count; i++) {  // every file checked first: all removed or none
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (remove(path) != 0) fail("--overwrite: cannot remove '%s': %s", path, strerror(errno));
    }
    free(names);
    return count;
}

// Whether the folder of `file` is `dir` (both exist).
static inline int folder_of_is(const char *file, const char *dir) {
    char parent[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", file);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = 0; else snprintf(parent, sizeof(parent), ".");
    return realpath(parent, a) && realpath(dir, b) && strcmp(a, b) == 0;
}

static int run_lock_fd = -1;  // open for the life of the process: the lock is held until exit

// Locks dir for this process (the lock lives as long as it does). Returns 0 when a live run
// holds it, its pid in holder; fails when nothing can be written there.
static inline int run_folder_lock(const char *dir, char *holder, size_t n) {
    make_dir(dir);
    char lock[PATH_MAX];
    snprintf(lock, sizeof(lock), "%s/.lock", dir);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail("--out_dir: cannot write in '%s': %s", dir, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ssize_t got = read(fd, holder, n - 1);
        holder[got > 0 ? got : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        if (!holder[0]) snprintf(holder, n, "unknown");
        close(fd);
        return 0;
    }
    char pid[32];
    int len = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, len, 0) != len) fail("--out_dir: cannot write in '%s': %s", dir, strerror(errno));
    if (run_lock_fd >= 0) close(run_lock_fd);
    run_lock_fd = fd;
    return 1;
}

// Creates, locks and checks the run folder (both trainers, before anything is written).
static inline void run_folder_claim(Config *c) {
    char holder[32], found[512];
    if (c->out_dir_default && !c->overwrite && !c->resume[0]) {  // the first free runs/<model>_<pos>[_k]
        char base[sizeof(c->out_dir)];
        size_t len = strlen(c->out_dir);
        if (len > 490) fail("--out_dir: '%s' is too long", c->out_dir);  // room for "_<k>"
        memcpy(base, c->out_dir, len + 1);
        for (int k = 2; !run_folder_lock(c->out_dir, holder, sizeof(holder)) ||
                        run_files(c, c->out_dir, found, sizeof(found), 0); k++) {
            if (k > 10000) fail("runs: no free folder named '%s_<k>'; give --out_dir", base);
            snprintf(c->out_dir, sizeof(c->out_dir), "%.490s_%d", base, k);
        }
        if (strcmp(base, c->out_dir) != 0) printf("'%s' holds an earlier run: this one writes to '%s'\n", base, c->out_dir);
        return;
    }
    if (!run_folder_lock(c->out_dir, holder, sizeof(holder)))
        fail("'%s' is in use by another run (pid %s): wait for it to end, or choose another --out_dir", c->out_dir, holder);
    // --resume DIR/checkpoint.bin in DIR continues that run; an evaluation writes next to
    // the checkpoint it reads
    const char *base = strrchr(c->resume, '/') ? strrchr(c->resume, '/') + 1 : c->resume;
    int own = c->resume[0] && folder_of_is(c->resume, c->out_dir) && (c->eval_only || strcmp(base, "checkpoint.bin") == 0);
    if (own) {
        if (c->overwrite) fail("--overwrite with --resume %s in its own folder would remove the run it continues", c->resume);
        if (c->scheme_changed && !c->eval_only)
            fail("--resume with another position scheme is another experiment: give it its own --out_dir (a PosAug "
                 "fine-tune of this checkpoint, say)");
        return;
    }
    if (!run_files(c, c->out_dir, found, sizeof(found), 0)) return;
    if (!c->overwrite)
        fail("'%s' holds another run's files (%s): continue that run with --resume %s/checkpoint.bin, choose a new "
             "--out_dir, or pass --overwrite to remove them first", c->out_dir, found, c->out_dir);
    run_files(c, c->out_dir, found, sizeof(found), 1);
    printf("--overwrite: removed %s from '%s'\n", found, c->out_dir);
}
