/*
 * Measure the cost of each feature group ON THE DEVICE and print the line that
 * `edgeseq calibrate --from-device LOG --groups GROUPS.json -o GROUPS.device.json` reads.
 *
 * Replace the three example extractors by your own (same names and dimensions as in GROUPS.json) and
 * pick the counter with one define:
 *   -DES_CLOCK_DWT      Cortex-M3/M4/M7 DWT cycle counter (32 bits, unit "cycles")
 *   -DES_CLOCK_SYSTICK  SysTick (24 bits, down-counting; any Cortex-M, including M0/M0+)
 *   (neither)           the C library's clock() (hosted builds; coarse, for trying the loop out)
 * -DES_MACHINE='"STM32F405 @168 MHz"' names the board in GROUPS.json's measured_on.
 *
 * Build on the host:  make -C runtime_c measure-costs && runtime_c/build/measure_costs_gcc
 */
#include <stdint.h>
#include <stdio.h>

#include "edgeseq_costs.h"

#ifndef ES_MACHINE
#define ES_MACHINE "unnamed board (define ES_MACHINE)"
#endif
#define REPEATS 15u
#define WARMUP 2u
#define WINDOW 256u /* samples in the (simulated) sensor window the extractors read */
#define MAX_DIM 8u

/* --- the counter -------------------------------------------------------------------------------- */
#if defined(ES_CLOCK_DWT)
#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)
static uint32_t read_counter(void *ctx) { (void)ctx; return DWT_CYCCNT; }
static void start_counter(void) { DEMCR |= 1u << 24; DWT_CYCCNT = 0u; DWT_CTRL |= 1u; }
#define COUNTER_MASK 0xFFFFFFFFu
#define COUNTER_UNIT "cycles"
#elif defined(ES_CLOCK_SYSTICK)
#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
static uint32_t read_counter(void *ctx) { (void)ctx; return ~SYST_CVR; } /* counts down: invert */
static void start_counter(void) { SYST_RVR = 0x00FFFFFFu; SYST_CVR = 0u; SYST_CSR = 5u; } /* CPU clock, no IRQ */
#define COUNTER_MASK 0x00FFFFFFu
#define COUNTER_UNIT "SysTick ticks (CPU clock)"
#else
#include <time.h>
static uint32_t read_counter(void *ctx) { (void)ctx; return (uint32_t)clock(); }
static void start_counter(void) {}
#define COUNTER_MASK 0xFFFFFFFFu
#define COUNTER_UNIT "clock() ticks"
#endif

/* --- example extractors: cheap statistics, a mid-price band energy, an expensive autocorrelation --- */
static float window[WINDOW];

static void stats(float *out)
{
    float sum = 0.0f, sq = 0.0f;
    uint32_t i;
    for (i = 0; i < WINDOW; ++i) {
        sum += window[i];
        sq += window[i] * window[i];
    }
    out[0] = sum / (float)WINDOW;
    out[1] = sq / (float)WINDOW - out[0] * out[0];
}

static void band_energy(float *out)
{
    uint32_t b, i;
    for (b = 0; b < 4u; ++b) { /* 4 crude bands from first differences of growing lag */
        float e = 0.0f;
        for (i = b + 1u; i < WINDOW; ++i) {
            float d = window[i] - window[i - b - 1u];
            e += d * d;
        }
        out[b] = e;
    }
}

static void autocorr(float *out)
{
    uint32_t lag, i;
    for (lag = 0; lag < MAX_DIM; ++lag) { /* every lag over the whole window, 8 times over */
        float acc = 0.0f;
        uint32_t rep;
        for (rep = 0; rep < 8u; ++rep) {
            for (i = 0; i + lag < WINDOW; ++i) {
                acc += window[i] * window[i + lag];
            }
        }
        out[lag] = acc;
    }
}

static const char *const NAMES[] = {"stats", "band_energy", "autocorr"};
static const uint32_t DIMS[] = {2u, 4u, MAX_DIM};
#define N_GROUPS (sizeof DIMS / sizeof DIMS[0])

static void extract(void *ctx, uint32_t group, float *out, uint32_t dim)
{
    (void)ctx;
    (void)dim;
    if (group == 0u) {
        stats(out);
    } else if (group == 1u) {
        band_energy(out);
    } else {
        autocorr(out);
    }
}

int main(void)
{
    static float feats[MAX_DIM];
    static uint32_t samples[REPEATS], medians[N_GROUPS];
    static char line[1024];
    uint32_t overhead = 0u, failed = 0u, i;
    es_clock clk;
    es_costs_status st;
    size_t n;

    for (i = 0; i < WINDOW; ++i) {
        window[i] = (float)((i * 37u) % 101u) * 0.01f - 0.5f;
    }
    start_counter();
    clk.read = read_counter;
    clk.mask = COUNTER_MASK;
    clk.ctx = NULL;
    st = es_measure_costs((uint32_t)N_GROUPS, DIMS, extract, NULL, &clk, WARMUP, REPEATS, feats, MAX_DIM, samples,
                          medians, &overhead, &failed);
    if (st == ES_COSTS_CLOCK_STUCK) {
        printf("error: the counter did not advance while group %s ran: the core has no such counter, the "
               "emulator does not model it, or it is too coarse for this extractor\n", NAMES[failed]);
        return 2;
    }
    if (st != ES_COSTS_OK) {
        printf("error: es_measure_costs returned %d\n", (int)st);
        return 1;
    }
    n = es_costs_json((uint32_t)N_GROUPS, NAMES, medians, overhead, REPEATS, ES_MACHINE, COUNTER_UNIT, line,
                      sizeof line);
    if (n >= sizeof line) {
        printf("error: the cost line needs %lu bytes; enlarge the buffer\n", (unsigned long)n + 1ul);
        return 1;
    }
    printf(ES_COSTS_LINE_TAG "%s\n", line);
    return 0;
}
