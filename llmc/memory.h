// The memory a run needs, estimated from its configuration before anything large is
// allocated, checked against what the machine has (or --max_memory): a configuration
// that cannot fit is refused at once with the figures, instead of being killed by the
// kernel minutes later. Each trainer fills a MemPlan from its own buffer layout.
#pragma once
#include "utils.h"
#include <unistd.h>

typedef struct {
    const char *where;  // "host memory", "GPU memory"
    double weights;     // parameters, gradients and AdamW moments (and compute copies): held throughout
    double load;        // reading a checkpoint (the whole file at once)
    double train;       // training activations and data
    double eval;        // evaluation or generation: activations, KV cache, data
    const char *eval_flag;  // what sets eval's size: "--eval_len", or "--generate" when sampling
} MemPlan;

#define GiB 1073741824.0

static inline double mem_peak(const MemPlan *p) {
    double phase = p->load > p->train ? p->load : p->train;
    return p->weights + (p->eval > phase ? p->eval : phase);
}

// The size of a file (a checkpoint to read), 0 for none.
static inline double file_bytes(const char *path) {
    struct stat sb;
    return path[0] && stat(path, &sb) == 0 ? (double)sb.st_size : 0.0;
}

// Bytes the host can still give this process: MemAvailable, capped by a cgroup v2 limit
// (without /proc: the free pages, or on macOS all of the memory).
static inline double host_available_memory(void) {
    double avail = 0;
    char line[256];
    FILE *f = fopen("/proc/meminfo", "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %lf kB", &avail) == 1) avail *= 1024;
    if (f) fclose(f);
#ifdef _SC_AVPHYS_PAGES
    if (avail <= 0) avail = (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
#else  // macOS has no count of free pages: all of the memory
    if (avail <= 0) avail = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
#endif
    double limit = 0, used = 0;
    f = fopen("/sys/fs/cgroup/memory.max", "r");
    int capped = f && fscanf(f, "%lf", &limit) == 1;  // "max" (no limit) does not scan
    if (f) fclose(f);
    f = fopen("/sys/fs/cgroup/memory.current", "r");
    if (f && fscanf(f, "%lf", &used) != 1) used = 0;
    if (f) fclose(f);
    if (capped && limit - used < avail) avail = limit - used;
    return avail;
}

// Prints the plan; refuses it when its peak exceeds max_gib (when > 0) or what is available.
static inline void memory_check(const MemPlan *p, double available, float max_gib) {
    double peak = mem_peak(p), limit = max_gib > 0 ? max_gib * GiB : available;
    printf("%s: %.2f GiB at peak (weights, gradients and moments %.2f | checkpoint read %.2f | training %.2f | "
           "evaluation %.2f) of %.2f GiB %s\n",
           p->where, peak / GiB, p->weights / GiB, p->load / GiB, p->train / GiB, p->eval / GiB, limit / GiB,
           max_gib > 0 ? "allowed by --max_memory" : "available");
    if (peak <= limit) return;
    const char *what = p->eval >= p->train && p->eval >= p->load ? (p->eval_flag ? p->eval_flag : "--eval_len")
                       : "--batch_size or --seq_len";  // the phase that sets the peak
    fail("this run needs %.2f GiB of %s at its peak (weights, gradients and moments %.2f, checkpoint read %.2f, "
         "training %.2f, evaluation %.2f), more than the %.2f GiB %s: lower %s, or choose a smaller --model",
         peak / GiB, p->where, p->weights / GiB, p->load / GiB, p->train / GiB, p->eval / GiB, limit / GiB,
         max_gib > 0 ? "allowed by --max_memory" : "available", what);
}
