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

// Whether `name` is a member of an evaluation set in dir: <tag><suffix> for a suffix of
// EVAL_SET, where dir holds the set's summary naming that tag (with only_tag, that tag
// alone); its tag into tag (256 bytes).
static inline int eval_set_tag(const char *dir, const char *name, const char *only_tag, char *tag) {
    size_t len = strlen(name);
    for (int k = 0; k < EVAL_SET_N; k++) {
        size_t sl = strlen(EVAL_SET[k]);
        if (len <= sl || len - sl >= 256 || strcmp(name + len - sl, EVAL_SET[k]) != 0) continue;
        char path[PATH_MAX], named[256];
        snprintf(tag, 256, "%.*s", (int)(len - sl), name);
        if (only_tag && strcmp(tag, only_tag) != 0) continue;
        for (int j = EVAL_SET_N - 2; j < EVAL_SET_N; j++) {  // the set's summaries: <tag>.json, <tag>_task.json
            snprintf(path, sizeof(path), "%s/%s%s", dir, tag, EVAL_SET[j]);
            if (eval_json_tag(path, named, sizeof(named)) && strcmp(named, tag) == 0) return 1;
        }
    }
    return 0;
}

// Whether the file `name` in dir is a run's: checkpoint.bin, log.jsonl, or a member of an
// evaluation set (eval_set_tag; with only_tag, that tag's set alone).
static inline int is_run_file(const char *dir, const char *name, const char *only_tag) {
    char tag[256];
    return strcmp(name, "checkpoint.bin") == 0 || strcmp(name, "log.jsonl") == 0 || eval_set_tag(dir, name, only_tag, tag);
}

// ---- an evaluation's files change as one set ----
// Each writer closes its file as <file>.tmp (eval_set_hold); eval_set_commit then writes a
// journal, <tag>.commit (the set's file names, one a line, then "end <n>", n the names), renames
// every .tmp over its file (the summaries, the JSONs, last), removes the files of the tag's
// previous set that the new one lacks, and removes the journal. A run that fails before the
// commit (a full disk) removes the set's .tmp files as it exits. A run that finds a journal
// (one killed in the middle of a commit) finishes it when it is whole (eval_journal_read);
// one that is not (empty, cut short, or not the trainer's) is left as it is, with a warning,
// and so are its tag's files. A set file's .tmp (one killed before its commit: a Ctrl-C) is
// removed when the tag's set in the folder names it (eval_set_tag); any other file is the
// user's. Either way the folder holds the old set or the new one.
#define EVAL_SET_MAX 16
static char eval_held[EVAL_SET_MAX][1200];  // the set's files written so far (their .tmp on disk)
static int eval_n_held;

// a run that stops (fail, exit) before the commit removes the set's .tmp files: the old set stays
static inline void eval_set_discard(void) {
    char tmp[1210];
    for (int i = 0; i < eval_n_held; i++) {
        snprintf(tmp, sizeof(tmp), "%.1200s.tmp", eval_held[i]);
        remove(tmp);
    }
    eval_n_held = 0;
}

static inline void eval_set_hold(OutFile *o) {
    static int registered;
    if (!registered) registered = atexit(eval_set_discard) == 0;
    out_close_tmp(o);
    if (eval_n_held == EVAL_SET_MAX) fail("internal: an evaluation set of more than %d files", EVAL_SET_MAX);
    snprintf(eval_held[eval_n_held++], sizeof(eval_held[0]), "%s", o->path);
}

// Whether `name` is a member of the set of `tag` (<tag> then one of EVAL_SET)
static inline int eval_set_member(const char *name, const char *tag) {
    size_t t = strlen(tag);
    if (strncmp(name, tag, t) != 0) return 0;
    for (int k = 0; k < EVAL_SET_N; k++)
        if (strcmp(name + t, EVAL_SET[k]) == 0) return 1;
    return 0;
}

// The journal dir/<tag>.commit read into names (n of them) when it is whole: "end <n>" its
// last line, n names of the tag's set before it, none twice, a summary among them, each in the
// folder as itself or as its .tmp. Else 0, with what is wrong in why.
static inline int eval_journal_read(const char *dir, const char *tag, char names[EVAL_SET_MAX][256], int *n, char *why,
                                    size_t wn) {
    char path[1200], text[EVAL_SET_MAX * 256 + 64];
    snprintf(path, sizeof(path), "%.900s/%.250s.commit", dir, tag);
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    int more = f && fgetc(f) != EOF;
    if (f) fclose(f);
    text[got] = 0;
    *n = 0;
    if (!f) return snprintf(why, wn, "cannot read it: %s", strerror(errno)), 0;
    if (more || strlen(text) != got) return snprintf(why, wn, "longer than a journal, or not text"), 0;
    if (!got || text[got - 1] != '\n') return snprintf(why, wn, got ? "its last line is cut" : "it is empty"), 0;
    int summary = 0, end = -1;
    for (char *line = text, *next; *line; line = next) {
        next = strchr(line, '\n');
        *next++ = 0;
        if (end >= 0) return snprintf(why, wn, "a line after its end"), 0;
        char after;
        if (sscanf(line, "end %d%c", &end, &after) == 1) continue;
        if (*n == EVAL_SET_MAX || strchr(line, '/') || !eval_set_member(line, tag))
            return snprintf(why, wn, "'%.60s' is not a file of the set '%.60s'", line, tag), 0;
        for (int i = 0; i < *n; i++)
            if (strcmp(names[i], line) == 0) return snprintf(why, wn, "it names '%.60s' twice", line), 0;
        char file[1200], tmp[1210];
        snprintf(file, sizeof(file), "%.900s/%.255s", dir, line);
        snprintf(tmp, sizeof(tmp), "%s.tmp", file);
        if (access(file, F_OK) != 0 && access(tmp, F_OK) != 0)
            return snprintf(why, wn, "'%.60s' is in the folder neither renamed nor as its .tmp", line), 0;
        summary |= strstr(line, ".json") != NULL;
        snprintf(names[(*n)++], 256, "%.255s", line);
    }
    if (end < 0) return snprintf(why, wn, "no end line: cut short"), 0;
    if (end != *n || !*n) return snprintf(why, wn, "its end line says %d files, it names %d", end, *n), 0;
    if (!summary) return snprintf(why, wn, "it names no summary (.json)"), 0;
    return 1;
}

// A whole journal of dir/<tag>.commit carried out: its files' .tmp renamed (summaries last),
// the tag's other set files removed, the journal removed.
static inline void eval_set_finish(const char *dir, const char *tag, char names[EVAL_SET_MAX][256], int n) {
    char journal[1200], from[1200], to[1200];
    snprintf(journal, sizeof(journal), "%.900s/%.250s.commit", dir, tag);
    for (int pass = 0; pass < 2; pass++)  // the CSVs, then the summaries that describe them
        for (int i = 0; i < n; i++) {
            int summary = strstr(names[i], ".json") != NULL;
            if (summary != pass) continue;
            snprintf(from, sizeof(from), "%.900s/%.255s.tmp", dir, names[i]);
            snprintf(to, sizeof(to), "%.900s/%.255s", dir, names[i]);
            if (access(from, F_OK) == 0 && rename(from, to) != 0) fail("committing '%s': %s", to, strerror(errno));
        }
    for (int k = 0; k < EVAL_SET_N; k++) {  // the previous set's files this one does not have
        char name[256];
        snprintf(name, sizeof(name), "%.240s%s", tag, EVAL_SET[k]);
        int kept = 0;
        for (int i = 0; i < n; i++) kept |= strcmp(names[i], name) == 0;
        snprintf(to, sizeof(to), "%.900s/%.255s", dir, name);
        if (!kept && remove(to) != 0 && errno != ENOENT) fail("committing the set of '%s': cannot remove '%s': %s", tag, to, strerror(errno));
    }
    if (remove(journal) != 0) fail("cannot remove '%s': %s", journal, strerror(errno));
    fsync_parent_dir(journal);
}

// The files eval_set_hold kept, committed as the set of `tag` in dir.
static inline void eval_set_commit(const char *dir, const char *tag) {
    if (!eval_n_held) return;
    char journal[1200], names[EVAL_SET_MAX][256];
    snprintf(journal, sizeof(journal), "%.900s/%.250s.commit", dir, tag);
    OutFile o;
    out_open(&o, journal);
    for (int i = 0; i < eval_n_held; i++) {
        const char *slash = strrchr(eval_held[i], '/');
        snprintf(names[i], sizeof(names[i]), "%.255s", slash ? slash + 1 : eval_held[i]);
        fprintf(o.f, "%s\n", names[i]);
    }
    fprintf(o.f, "end %d\n", eval_n_held);
    out_close(&o);
    int n = eval_n_held;
    eval_n_held = 0;
    eval_set_finish(dir, tag, names, n);
}

// An earlier run's interrupted evaluations in dir (a run that holds the folder calls it): a
// whole journal finished; a set file's stray .tmp removed, but a tag's whose journal is not
// whole (its files are left as they are).
static inline void eval_sets_recover(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char (*names)[256] = NULL, (*broken)[256] = NULL, journal[EVAL_SET_MAX][256], why[200];
    int n = 0, cap = 0, n_broken = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strlen(e->d_name) >= 256) continue;
        if (n == cap && !(names = (char (*)[256])realloc(names, (size_t)(cap = 2 * cap + 64) * sizeof(*names))))
            fail("out of memory listing '%s'", dir);
        snprintf(names[n++], 256, "%s", e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {  // journals first: their .tmp files are the new set
        size_t len = strlen(names[i]);
        if (len <= 7 || strcmp(names[i] + len - 7, ".commit") != 0) continue;
        char tag[256];
        int k;
        snprintf(tag, sizeof(tag), "%.*s", (int)(len - 7), names[i]);
        if (eval_journal_read(dir, tag, journal, &k, why, sizeof(why))) {
            printf("'%s/%s': an evaluation stopped while its files were renamed; finishing it\n", dir, names[i]);
            eval_set_finish(dir, tag, journal, k);
            continue;
        }
        printf("warning: '%s/%s' is not a whole journal of an evaluation (%s): it and the files of '%s' are left as "
               "they are; if an evaluation stopped while renaming them, check them, then remove it\n", dir, names[i], why, tag);
        if (!(broken = (char (*)[256])realloc(broken, (size_t)(n_broken + 1) * sizeof(*broken))))
            fail("out of memory listing '%s'", dir);
        snprintf(broken[n_broken++], 256, "%s", tag);
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len <= 4 || strcmp(names[i] + len - 4, ".tmp") != 0) continue;
        char base[256], tag[256], path[1200];
        snprintf(base, sizeof(base), "%.*s", (int)(len - 4), names[i]);
        if (!eval_set_tag(dir, base, NULL, tag)) continue;  // not a set's (a checkpoint's: run_training removes it)
        int left = 0;
        for (int k = 0; k < n_broken; k++) left |= strcmp(broken[k], tag) == 0;
        snprintf(path, sizeof(path), "%.900s/%.255s", dir, names[i]);
        if (!left && remove(path) == 0) printf("removed '%s', left by an interrupted run\n", path);
    }
    free(names);
    free(broken);
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
// nothing removed), but for an evaluation its own tag's set, which its commit replaces whole
// (an interrupted evaluation leaves the old set).
static inline int run_files(const Config *c, const char *dir, char *found, size_t n, int remove_them) {
    DIR *d = opendir(dir);
    if (!d) fail("--out_dir: cannot read '%s': %s", dir, strerror(errno));
    int count = 0;
    found[0] = 0;
    char (*names)[256] = NULL;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (strlen(e->d_name) >= 256 || !is_run_file(dir, e->d_name, c->eval_only ? c->eval_tag : NULL)) continue;
        // an evaluation's own tag's set is replaced whole by its commit, not removed first
        int set = strcmp(e->d_name, "checkpoint.bin") != 0 && strcmp(e->d_name, "log.jsonl") != 0;
        if (remove_them && c->eval_only && set) continue;
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
// An evaluation's tag whose journal the recovery left (not whole) is refused: its commit
// would replace a file the project cannot prove it wrote.
static inline void eval_journal_refuse(const Config *c) {
    char journal[1200];
    snprintf(journal, sizeof(journal), "%.900s/%.250s.commit", c->out_dir, c->eval_tag);
    if (!c->generate && (c->eval_len || c->task_eval[0]) && access(journal, F_OK) == 0)
        fail("'%s' is not a whole journal of an evaluation (see the warning above): this run's evaluation '%s' would "
             "replace it; check the files of '%s' and remove it, or give this evaluation another --eval_tag",
             journal, c->eval_tag, c->eval_tag);
}

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
        eval_sets_recover(c->out_dir);
        eval_journal_refuse(c);
        return;
    }
    if (!run_folder_lock(c->out_dir, holder, sizeof(holder)))
        fail("'%s' is in use by another run (pid %s): wait for it to end, or choose another --out_dir", c->out_dir, holder);
    eval_sets_recover(c->out_dir);
    eval_journal_refuse(c);
    // --resume DIR/checkpoint.bin in DIR continues that run; an evaluation writes next to
    // the checkpoint it reads
    const char *base = strrchr(c->resume, '/') ? strrchr(c->resume, '/') + 1 : c->resume;
    int own = c->resume[0] && folder_of_is(c->resume, c->out_dir) && (c->eval_only || strcmp(base, "checkpoint.bin") == 0);
    if (own) {
        if (c->overwrite && !c->eval_only)
            fail("--overwrite with --resume %s in its own folder would remove the run it continues", c->resume);
        if (c->scheme_changed && !c->eval_only)
            fail("--resume with another position scheme is another experiment: give it its own --out_dir (a PosAug "
                 "fine-tune of this checkpoint, say)");
        return;
    }
    if (!run_files(c, c->out_dir, found, sizeof(found), 0)) return;
    char ckpt[1200];
    snprintf(ckpt, sizeof(ckpt), "%.1000s/checkpoint.bin", c->out_dir);
    if (!c->overwrite && access(ckpt, F_OK) == 0)
        fail("'%s' holds another run's files (%s): continue that run with --resume %s, choose a new --out_dir, or pass "
             "--overwrite to remove them first", c->out_dir, found, ckpt);
    if (!c->overwrite)
        fail("'%s' holds another run's files (%s): choose a new --out_dir%s, or pass --overwrite to %s them", c->out_dir,
             found, c->eval_only ? " or --eval_tag" : "", c->eval_only ? "replace" : "remove");
    if (run_files(c, c->out_dir, found, sizeof(found), 1)) printf("--overwrite: removed %s from '%s'\n", found, c->out_dir);
}
