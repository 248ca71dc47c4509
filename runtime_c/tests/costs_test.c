/*
 * Self-checking test of edgeseq_costs.c with a simulated counter whose every advance is known, so the
 * expected medians are exact: reading the counter costs READ_COST ticks, extractor g costs
 * WORK[g] * dim ticks (plus a one-off outlier on its first timed call, which the median must drop).
 * Also: wrap-around of a 32-bit and a 24-bit counter, a counter that never advances, a scratch
 * buffer that is too small, bad arguments, and the JSON text (escaping, truncation).
 * Prints the measured line (tagged) so the host test can parse it. Exit status 0 = all checks hold.
 */
#include <stdio.h>
#include <string.h>

#include "edgeseq_costs.h"

#define N_GROUPS 3u
#define READ_COST 3u
static const uint32_t DIM[N_GROUPS] = {2u, 5u, 1u};
static const uint32_t WORK[N_GROUPS] = {10u, 7u, 1000u};
static const char *const NAMES[N_GROUPS] = {"imu", "depth \"HOG\"", "tab\there\\"};

typedef struct sim {
    uint32_t counter;
    uint32_t mask;
    uint32_t calls;   /* extractor calls so far */
    int frozen;       /* the counter never advances (no DWT on the core) */
} sim;

static uint32_t sim_read(void *ctx)
{
    sim *s = (sim *)ctx;
    uint32_t now = s->counter & s->mask;
    if (!s->frozen) {
        s->counter += READ_COST;
    }
    return now;
}

static void sim_extract(void *ctx, uint32_t group, float *out, uint32_t dim)
{
    sim *s = (sim *)ctx;
    uint32_t i;
    for (i = 0; i < dim; ++i) {
        out[i] = (float)(group + i);
    }
    if (!s->frozen) {
        /* every 5th call is an outlier (an interrupt landed in it): 100x slower */
        s->counter += WORK[group] * dim * (s->calls % 5u == 4u ? 100u : 1u);
    }
    ++s->calls;
}

static int failures = 0;
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("FAILED line %d: %s\n", __LINE__, #cond);                   \
            ++failures;                                                        \
        }                                                                      \
    } while (0)

static void measure_exactly(uint32_t start, uint32_t mask, uint32_t repeats)
{
    sim s;
    es_clock clk;
    float feats[8];
    uint32_t samples[9], cost[N_GROUPS], overhead = 0u, failed = 99u, g;
    s.counter = start; s.mask = mask; s.calls = 0u; s.frozen = 0;
    clk.read = sim_read; clk.mask = mask; clk.ctx = &s;
    CHECK(es_measure_costs(N_GROUPS, DIM, sim_extract, &s, &clk, 2u, repeats, feats, 8u, samples, cost, &overhead,
                           &failed) == ES_COSTS_OK);
    CHECK(overhead == READ_COST);
    for (g = 0; g < N_GROUPS; ++g) {
        CHECK(cost[g] == READ_COST + WORK[g] * DIM[g]);
    }
}

int main(void)
{
    sim s;
    es_clock clk;
    float feats[8];
    uint32_t samples[9], cost[N_GROUPS], overhead = 0u, failed = 99u;
    char line[512], small[16];
    size_t n;

    measure_exactly(0u, 0xFFFFFFFFu, 9u);
    measure_exactly(0xFFFFFF00u, 0xFFFFFFFFu, 9u); /* the 32-bit counter wraps during the run */
    measure_exactly(0x00FFFF00u, 0x00FFFFFFu, 9u); /* a 24-bit counter (SysTick) wraps */
    measure_exactly(7u, 0xFFFFFFFFu, 4u);          /* even count: mean of the two middle samples */

    /* the counter does not advance: an error naming the group, never a zero cost */
    s.counter = 5u; s.mask = 0xFFFFFFFFu; s.calls = 0u; s.frozen = 1;
    clk.read = sim_read; clk.mask = 0xFFFFFFFFu; clk.ctx = &s;
    CHECK(es_measure_costs(N_GROUPS, DIM, sim_extract, &s, &clk, 0u, 3u, feats, 8u, samples, cost, &overhead,
                           &failed) == ES_COSTS_CLOCK_STUCK);
    CHECK(failed == 0u);
    /* scratch too small for group 1 (5 floats) */
    s.frozen = 0;
    CHECK(es_measure_costs(N_GROUPS, DIM, sim_extract, &s, &clk, 0u, 3u, feats, 4u, samples, cost, &overhead,
                           &failed) == ES_COSTS_BUFFER_TOO_SMALL);
    CHECK(failed == 1u);
    /* bad arguments */
    CHECK(es_measure_costs(N_GROUPS, DIM, sim_extract, &s, &clk, 0u, 0u, feats, 8u, samples, cost, &overhead,
                           NULL) == ES_COSTS_BAD_ARGUMENT);
    CHECK(es_measure_costs(N_GROUPS, DIM, sim_extract, &s, &clk, 0u, ES_COSTS_MAX_REPEATS + 1u, feats, 8u, samples,
                           cost, &overhead, NULL) == ES_COSTS_BAD_ARGUMENT);
    CHECK(es_measure_costs(N_GROUPS, NULL, sim_extract, &s, &clk, 0u, 3u, feats, 8u, samples, cost, &overhead,
                           NULL) == ES_COSTS_BAD_ARGUMENT);
    clk.mask = 0x00F0FFFFu; /* not 2^k - 1 */
    CHECK(es_measure_costs(N_GROUPS, DIM, sim_extract, &s, &clk, 0u, 3u, feats, 8u, samples, cost, &overhead,
                           NULL) == ES_COSTS_BAD_ARGUMENT);

    /* the measurement the host test parses */
    s.counter = 0u; s.mask = 0xFFFFFFFFu; s.calls = 0u; s.frozen = 0;
    clk.mask = 0xFFFFFFFFu;
    CHECK(es_measure_costs(N_GROUPS, DIM, sim_extract, &s, &clk, 1u, 9u, feats, 8u, samples, cost, &overhead,
                           NULL) == ES_COSTS_OK);
    n = es_costs_json(N_GROUPS, NAMES, cost, overhead, 9u, "sim \"board\"", "ticks", line, sizeof line);
    CHECK(n < sizeof line && strlen(line) == n);
    CHECK(strstr(line, "\"name\":\"depth \\\"HOG\\\"\"") != NULL);
    CHECK(strstr(line, "\"name\":\"tab\\u0009here\\\\\"") != NULL);
    /* truncation: like snprintf, the needed length comes back and the text stays terminated */
    CHECK(es_costs_json(N_GROUPS, NAMES, cost, overhead, 9u, "sim \"board\"", "ticks", small, sizeof small) == n);
    CHECK(strlen(small) == sizeof small - 1u && memcmp(small, line, sizeof small - 1u) == 0);
    CHECK(es_costs_json(N_GROUPS, NAMES, cost, overhead, 9u, "sim", "ticks", NULL, 0u) > 0u);
    CHECK(es_costs_json(N_GROUPS, NULL, cost, overhead, 9u, "sim", "ticks", line, sizeof line) == 0u);

    if (failures == 0) {
        printf(ES_COSTS_LINE_TAG "%s\n", line);
    }
    return failures == 0 ? 0 : 1;
}
