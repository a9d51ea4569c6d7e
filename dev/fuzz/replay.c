// Feeds files to a harness's LLVMFuzzerTestOneInput without libFuzzer: the regression
// replay of run.sh --regress, built with gcc -fsanitize=address,undefined.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) { perror(argv[i]); return 2; }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        rewind(f);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf || fread(buf, 1, n, f) != (size_t)n) { perror(argv[i]); return 2; }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
    }
    return 0;
}
