// The run folder (--out_dir): one run per folder, never two runs' files mixed. Both
// trainers claim it after the preflight checks and before writing anything:
//  - a lock (flock on <dir>/.lock, the holder's pid inside) held until the process exits;
//    the kernel releases it on any exit, so a killed run's lock is simply taken over;
//  - a new run (no --resume, or --resume into another folder), and an evaluation of a
//    checkpoint from another folder, need a folder without another run's files
//    (checkpoint.bin, log.jsonl, eval_*): --overwrite removes those first; without
//    --out_dir, a new run takes the next free runs/<model>_<pos>_2, _3, ... instead;
//  - --resume of <dir>/checkpoint.bin with --out_dir <dir> (the default) continues in place.
#pragma once
#include "config.h"
#include <dirent.h>
#include <limits.h>
#include <sys/file.h>

// A run's own files: the checkpoint, the log, and the evaluation files, eval_* by default or
// <eval_tag>* when --eval_tag names them. (A checkpoint.bin.tmp is half a save, removed by
// whichever run holds the folder next.)
static inline int is_run_file(const char *name, const char *eval_tag) {
    return strcmp(name, "checkpoint.bin") == 0 || strcmp(name, "log.jsonl") == 0 || strncmp(name, "eval_", 5) == 0 ||
           (eval_tag[0] && strncmp(name, eval_tag, strlen(eval_tag)) == 0);
}

// The run files in dir, listed into `found` (comma separated); with `remove_them`, deleted.
static inline int run_files(const char *dir, const char *eval_tag, char *found, size_t n, int remove_them) {
    DIR *d = opendir(dir);
    if (!d) fail("--out_dir: cannot read '%s': %s", dir, strerror(errno));
    int count = 0;
    found[0] = 0;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        if (!is_run_file(e->d_name, eval_tag)) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        size_t used = strlen(found);
        if (used + strlen(e->d_name) + 8 < n) snprintf(found + used, n - used, "%s%s", count ? ", " : "", e->d_name);
        else if (used + 8 < n && !strstr(found, "...")) snprintf(found + used, n - used, ", ...");
        if (remove_them && remove(path) != 0) fail("--overwrite: cannot remove '%s': %s", path, strerror(errno));
        count++;
    }
    closedir(d);
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
                        run_files(c->out_dir, c->eval_tag, found, sizeof(found), 0); k++) {
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
    if (!run_files(c->out_dir, c->eval_tag, found, sizeof(found), 0)) return;
    if (!c->overwrite)
        fail("'%s' holds another run's files (%s): continue that run with --resume %s/checkpoint.bin, choose a new "
             "--out_dir, or pass --overwrite to remove them first", c->out_dir, found, c->out_dir);
    run_files(c->out_dir, c->eval_tag, found, sizeof(found), 1);
    printf("--overwrite: removed %s from '%s'\n", found, c->out_dir);
}
