/*
 * One contender of bench/peers.py: time per full prediction of a row, on the host or on an emulated
 * Cortex-M. The contender's glue file (written by peers.py) defines
 *     void contender_init(void);                        once per process (edgeseq: es_init)
 *     void contender_predict(const float *row, float *out);   one full prediction
 * and is compiled with -DN_FEAT=<features> -DN_OUT=<outputs>.
 *
 * Host (default): argv = rows file (n x N_FEAT float32), passes, predictions file. Prints
 * "ns <min over REPEATS of ns per prediction>" after writing every row's prediction (float32) to the
 * predictions file, so peers.py checks the very code it timed.
 * -DPEERS_ARM (qemu, -icount shift=0): no files; the rows are PEERS_ARM_ROWS pseudo-random rows made
 * here, and it prints "ticks <SysTick ticks of one prediction, mean over the rows>".
 */
#ifndef PEERS_ARM
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void contender_init(void);
void contender_predict(const float *row, float *out);

static float out[N_OUT];
static volatile float sink;

#ifdef PEERS_ARM
#include "startup.h"
#define PEERS_ARM_ROWS 16u
static float rows[PEERS_ARM_ROWS][N_FEAT];

int main(void)
{
    uint32_t i, r, total = 0u;
    uint32_t seed = 12345u;
    for (r = 0u; r < PEERS_ARM_ROWS; ++r) {
        for (i = 0u; i < N_FEAT; ++i) {
            seed = seed * 1664525u + 1013904223u;
            rows[r][i] = (float)((int32_t)(seed >> 17) - 16384) / 4096.0f;
        }
    }
    contender_init();
    ES_SYST_RVR = 0x00FFFFFFu;
    ES_SYST_CVR = 0u;
    ES_SYST_CSR = 5u; /* processor clock, no interrupt */
    for (r = 0u; r < PEERS_ARM_ROWS; ++r) {
        const uint32_t t0 = ES_SYST_CVR;
        uint32_t t1;
        contender_predict(rows[r], out);
        t1 = ES_SYST_CVR;
        total += (t0 - t1) & 0x00FFFFFFu; /* counts down */
        sink = out[0];
    }
    printf("ticks %lu\n", (unsigned long)(total / PEERS_ARM_ROWS));
    return 0;
}
#else
#include "bench_timing.h"

int main(int argc, char **argv)
{
    FILE *f;
    float *rows;
    long n, pass, passes, r;
    double t[REPEATS];
    int rep;
    if (argc != 4) {
        return 2;
    }
    passes = atol(argv[2]);
    f = fopen(argv[1], "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0) {
        return 3;
    }
    n = ftell(f) / (long)(sizeof(float) * N_FEAT);
    rows = malloc((size_t)n * N_FEAT * sizeof(float));
    rewind(f);
    if (rows == NULL || n <= 0 || fread(rows, sizeof(float) * N_FEAT, (size_t)n, f) != (size_t)n) {
        return 4;
    }
    fclose(f);
    contender_init();
    f = fopen(argv[3], "wb");
    for (r = 0; r < n; ++r) {
        contender_predict(rows + r * N_FEAT, out);
        fwrite(out, sizeof(float), N_OUT, f);
    }
    fclose(f);
    for (rep = 0; rep < REPEATS; ++rep) {
        const double t0 = now_ns();
        for (pass = 0; pass < passes; ++pass) {
            for (r = 0; r < n; ++r) {
                contender_predict(rows + r * N_FEAT, out);
                sink = out[0];
            }
        }
        t[rep] = (now_ns() - t0) / (double)(passes * n);
    }
    printf("ns %.2f\n", minimum(t));
    free(rows);
    return 0;
}
#endif
