/*
 * edgeseq device cost measurement: time each feature extractor ON THE TARGET and print the result
 * in a form `edgeseq calibrate --from-device` turns into the cost fields of GROUPS.json.
 *
 * The learned order is only as good as the costs it was given, and the costs that matter are those
 * of the core the model will run on, not the development machine's. This module runs each of the
 * caller's extractors `repeats` times between two reads of a caller-supplied counter and keeps the
 * median, plus the median of an empty interval (the cost of reading the counter itself), which the
 * host side subtracts. Nothing here knows a model: the board measures its extractors, named as in
 * GROUPS.json, before or after a first model exists.
 *
 *     static float feats[MAX_DIM];
 *     static uint32_t samples[REPEATS], medians[N_GROUPS], overhead;
 *     es_clock clk = { dwt_cycles, 0xFFFFFFFFu, NULL };          // see CLOCKS below
 *     es_measure_costs(N_GROUPS, dims, my_extract, NULL, &clk, 1, REPEATS, feats, MAX_DIM,
 *                      samples, medians, &overhead, &failed);
 *     n = es_costs_json(N_GROUPS, names, medians, overhead, REPEATS, "STM32F405 @168 MHz", "cycles",
 *                       buf, sizeof buf);
 *     printf(ES_COSTS_LINE_TAG "%s\n", buf);                      // over UART / semihosting / RTT
 *
 * CLOCKS. Any free-running counter works; `mask` gives its width, so a delta is (end - start) & mask
 * and one wrap between the two reads is harmless (two wraps are not: pick a counter whose period
 * exceeds the slowest extractor). On Cortex-M3/M4/M7 the DWT cycle counter (32 bits) is the usual
 * choice: enable it once with CoreDebug->DEMCR |= TRCENA; DWT->CYCCNT = 0; DWT->CTRL |= CYCCNTENA.
 * Cortex-M0/M0+ has no DWT counter: use SysTick (24 bits, counting DOWN: return ~SYST_CVR so the value
 * rises, mask 0x00FFFFFF) or a hardware timer. Elsewhere a clock_gettime/cycle-register hook.
 * A counter that does not advance across an extractor (no DWT on the core, an emulator that does not
 * model it, a clock coarser than the work) is reported as ES_COSTS_CLOCK_STUCK rather than as a zero
 * cost, naming the group.
 *
 * Constraints: C99, no heap, no globals, no stdio, no libm; every buffer is the caller's and its
 * length is checked. Interrupts should be masked by the caller if they would land in the timed
 * region and distort it (the median already discards the occasional outlier).
 */
#ifndef EDGESEQ_COSTS_H
#define EDGESEQ_COSTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The prefix of the one line the host looks for in a device log. */
#define ES_COSTS_LINE_TAG "EDGESEQ_COSTS "
/* Bounds that keep the measurement and the printed line small and the sort short. */
#define ES_COSTS_MAX_REPEATS 1001u
#define ES_COSTS_MAX_GROUPS 4096u

typedef struct es_clock {
    uint32_t (*read)(void *ctx); /* free-running counter; wraps modulo mask + 1 */
    uint32_t mask;               /* 2^bits - 1 of the counter: 0xFFFFFFFF (DWT), 0x00FFFFFF (SysTick) */
    void *ctx;                   /* passed to read */
} es_clock;

/* Compute group `group` (0-based, GROUPS.json order) of the current input into out[0..dim-1]. */
typedef void (*es_extract_fn)(void *ctx, uint32_t group, float *out, uint32_t dim);

typedef enum es_costs_status {
    ES_COSTS_OK = 0,
    ES_COSTS_BAD_ARGUMENT = 1,  /* NULL pointer, repeats 0 or > ES_COSTS_MAX_REPEATS, mask not 2^k - 1 */
    ES_COSTS_BUFFER_TOO_SMALL = 2, /* a group's dim exceeds features_len */
    ES_COSTS_CLOCK_STUCK = 3    /* the counter did not advance across group *failed_group */
} es_costs_status;

/*
 * Measure groups 0..n_groups-1: `warmup` untimed calls, then `repeats` timed calls of each, keeping
 * the median delta (the mean of the two middle ones for an even count, rounded down) in cost_out[g];
 * *overhead_out receives the median delta of `repeats` empty intervals (two back-to-back reads).
 * features: scratch of features_len floats receiving each extractor's output; samples: scratch of
 * `repeats` uint32. On ES_COSTS_CLOCK_STUCK, *failed_group (may be NULL) names the group.
 * Work: n_groups * (warmup + repeats) extractor calls, plus an insertion sort of `repeats` values
 * per group (at most repeats^2 / 2 comparisons).
 */
es_costs_status es_measure_costs(uint32_t n_groups, const uint32_t *dim, es_extract_fn extract, void *extract_ctx,
                                 const es_clock *clock, uint32_t warmup, uint32_t repeats, float *features,
                                 size_t features_len, uint32_t *samples, uint32_t *cost_out, uint32_t *overhead_out,
                                 uint32_t *failed_group);

/*
 * Write the measurement as one line of JSON (no newline) into buf (cap bytes, NUL-terminated when
 * cap > 0), like snprintf: returns the length the full text needs, excluding the NUL; the text was
 * truncated if that is >= cap. `name` holds the groups' names as in GROUPS.json (UTF-8; quotes,
 * backslashes and control characters are escaped), `machine` names the board and `unit` the counter
 * ("cycles", "SysTick ticks", ...). Returns 0 when a required pointer is NULL.
 */
size_t es_costs_json(uint32_t n_groups, const char *const *name, const uint32_t *cost, uint32_t overhead,
                     uint32_t repeats, const char *machine, const char *unit, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* EDGESEQ_COSTS_H */
