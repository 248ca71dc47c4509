/*
 * SysTick ticks of one full anytime pass (reset + every push) on an emulated Cortex-M, for
 * bench/c_int16.py. Built either with the int16 runtime (-DES16_PREFIX=<prefix>) or the float runtime
 * (-DES_PREFIX=<prefix>) and the qemu start-up (runtime_c/tests/qemu). Run under qemu with -icount, the
 * SysTick counter advances with the instruction count: the figures are instruction-counted virtual time,
 * reproducible run after run, NOT cycles of a real core. Prints "ticks <median of REPS passes>".
 */
#include <stdio.h>
#include <stdint.h>

#include "startup.h"

#define REPS 9u

#ifdef ES16_PREFIX
#include "edgeseq_select_i16.h"
#define N_FEAT ES16_N_FEATURES
typedef int16_t feature_t;
static es16_state st;
static int16_t xbuf[ES16_N_FEATURES + 1u];
static int32_t work[ES16_WORK_WORDS];
static void init(void) { es16_init(&st, &ES16_MODEL, xbuf, ES16_N_FEATURES, work, ES16_WORK_WORDS); }
static feature_t make(uint32_t r) { return (feature_t)((int32_t)(r >> 17) - 16384); }
static void pass(const feature_t *f)
{
    es16_group_info g;
    uint32_t off = 0u;
    es16_reset(&st);
    while (es16_next_group(&st, &g) == ES16_OK) {
        es16_push(&st, g.group, f + off, g.dim);
        off += g.dim;
    }
}
#else
#include "edgeseq_select.h"
#define N_FEAT ES_N_FEATURES
typedef float feature_t;
static es_state st;
static float work[ES_WORK_FLOATS];
static void init(void) { es_init(&st, &ES_MODEL, work, ES_WORK_FLOATS); }
static feature_t make(uint32_t r) { return (float)((int32_t)(r >> 17) - 16384) / 8192.0f; }
static void pass(const feature_t *f)
{
    es_group_info g;
    uint32_t off = 0u;
    es_reset(&st);
    while (es_next_group(&st, &g) == ES_OK) {
        es_push(&st, g.group, f + off, g.dim);
        off += g.dim;
    }
}
#endif

static feature_t feats[N_FEAT + 1u];

int main(void)
{
    uint32_t ticks[REPS];
    uint32_t i;
    uint32_t j;
    uint32_t r = 12345u;
    for (i = 0u; i < N_FEAT; ++i) {
        r = r * 1664525u + 1013904223u;
        feats[i] = make(r);
    }
    init();
    ES_SYST_RVR = 0x00FFFFFFu;
    ES_SYST_CVR = 0u;
    ES_SYST_CSR = 5u; /* processor clock, no interrupt */
    for (i = 0u; i < REPS; ++i) {
        const uint32_t t0 = ES_SYST_CVR;
        uint32_t t1;
        pass(feats);
        t1 = ES_SYST_CVR;
        ticks[i] = (t0 - t1) & 0x00FFFFFFu; /* counts down */
    }
    for (i = 1u; i < REPS; ++i) { /* insertion sort for the median */
        const uint32_t v = ticks[i];
        for (j = i; j > 0u && ticks[j - 1u] > v; --j) {
            ticks[j] = ticks[j - 1u];
        }
        ticks[j] = v;
    }
    printf("ticks %lu\n", (unsigned long)ticks[REPS / 2u]);
    return 0;
}
