/*
 * What the fuzz harnesses (fuzz_runtime.c, fuzz_layers.c) share: the abort on a finding, the byte
 * reader that turns the fuzzer's input into calls and values, and -- without libFuzzer -- a main that
 * feeds random byte strings for a bounded time (`harness SECONDS SEED`). Include once, after
 * declaring LLVMFuzzerTestOneInput.
 */
#ifndef EDGESEQ_FUZZ_SUPPORT_H
#define EDGESEQ_FUZZ_SUPPORT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define FINDING(msg)                                                 \
    do {                                                             \
        fprintf(stderr, "fuzz finding: %s (line %d)\n", msg, __LINE__); \
        abort();                                                     \
    } while (0)

typedef struct {
    const uint8_t *p;
    size_t n;
} bytes;

static unsigned take(bytes *b)
{
    unsigned v;
    if (b->n == 0) {
        return 0u;
    }
    v = b->p[0];
    ++b->p;
    --b->n;
    return v;
}

/* mostly small well-formed values, sometimes raw bit patterns (NaN, Inf, huge, subnormal) */
static float take_float(bytes *b)
{
    unsigned sel = take(b);
    if (sel < 224u) {
        return (float)((int)take(b) - 128) / 16.0f;
    }
    {
        union { uint32_t u; float f; } v;
        v.u = (uint32_t)take(b) | ((uint32_t)take(b) << 8) | ((uint32_t)take(b) << 16) |
              ((uint32_t)take(b) << 24);
        return v.f;
    }
}

static int finite_f(float v)
{
    return v - v == 0.0f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef ES_LIBFUZZER
/* Fallback for compilers without libFuzzer: random byte strings for a bounded time. */
int main(int argc, char **argv)
{
    double seconds = argc >= 2 ? atof(argv[1]) : 5.0;
    uint32_t x = argc >= 3 ? (uint32_t)strtoul(argv[2], NULL, 10) : 1u;
    static uint8_t buf[4096];
    unsigned long runs = 0;
    clock_t end = clock() + (clock_t)(seconds * (double)CLOCKS_PER_SEC);
    x = x ? x : 1u;
    while (clock() < end) {
        size_t n, i;
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        n = x % sizeof buf;
        for (i = 0; i < n; ++i) {
            x ^= x << 13; x ^= x >> 17; x ^= x << 5;
            buf[i] = (uint8_t)x;
        }
        LLVMFuzzerTestOneInput(buf, n);
        ++runs;
    }
    printf("fuzz fallback: %lu runs, no finding\n", runs);
    return 0;
}
#endif

#endif /* EDGESEQ_FUZZ_SUPPORT_H */
