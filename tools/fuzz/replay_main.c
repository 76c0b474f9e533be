/*
 * replay_main.c - a main() for the fuzz harnesses without libFuzzer: runs
 * LLVMFuzzerTestOneInput once on each file named on the command line. Built
 * with gcc or clang and -fsanitize=address,undefined it replays the crash
 * inputs kept in tests/data/regressions/<family>/ (tests/test_reliability_fuzz.py,
 * tools/fuzz/run.sh --replay) on machines without libFuzzer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int i;
    for (i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        uint8_t *buf;
        long n;
        if (!f) {
            fprintf(stderr, "replay: cannot open %s\n", argv[i]);
            return 2;
        }
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = (uint8_t *)malloc(n > 0 ? (size_t)n : 1u);
        if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            fclose(f);
            return 2;
        }
        fclose(f);
        LLVMFuzzerTestOneInput(buf, (size_t)n);
        free(buf);
        printf("replay: %s ok\n", argv[i]);
    }
    return 0;
}
