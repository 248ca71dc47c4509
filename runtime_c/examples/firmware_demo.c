/*
 * Firmware-shaped demo of the anytime loop: the main loop computes feature groups in the model's
 * order and pushes them; a (simulated) timer interrupt fires at a random point of the feature
 * computation and its handler reads the committed prediction -- the answer is ready at once, it is
 * never computed inside the interrupt.
 *
 * Build:  make -C runtime_c demo MODEL_DIR=out/   (out/ from `edgeseq export`)
 * Run:    build/firmware_demo_gcc [SEED]
 * On a real MCU, replace hardware_tick() by the timer peripheral and timer_isr() by its vector;
 * everything else (static state, no heap) is what the firmware keeps.
 */
#include <stdio.h>
#include <stdlib.h>

#include "edgeseq_select.h"

#define TICKS_PER_FEATURE 100u

/* --- what lives in RAM on the device -------------------------------------------------------- */
static es_state anytime;
static float work[ES_WORK_FLOATS];
static float feature_buffer[ES_N_FEATURES];
/* written by the interrupt handler, read by main */
static volatile int deadline_hit = 0;
static float answer[ES_N_PRED];
static uint32_t answer_prefix = 0;
static int32_t answer_label = -1;
static uint32_t answer_tick = 0;
/* the simulated timer */
static uint32_t ticks_until_interrupt = 0;
static uint32_t ticks_elapsed = 0;

/* Timer interrupt handler: O(P), never waits, never computes features or dot products. */
static void timer_isr(void)
{
    es_current(&anytime, answer, &answer_prefix, &answer_label);
    answer_tick = ticks_elapsed;
    deadline_hit = 1;
}

/* Stand-in for the hardware timer: called as time passes during feature computation. */
static void hardware_tick(void)
{
    ++ticks_elapsed;
    if (ticks_until_interrupt > 0u && --ticks_until_interrupt == 0u) {
        timer_isr();
    }
}

/* A "sensor feature extractor": deterministic values, TICKS_PER_FEATURE ticks of work per value. */
static void compute_group(uint32_t group, float *out, uint32_t dim)
{
    uint32_t i, t;
    for (i = 0; i < dim; ++i) {
        float acc = 0.0f;
        for (t = 0; t < TICKS_PER_FEATURE; ++t) {
            acc += (float)((group * 31u + i * 7u + t) % 13u) * 0.01f;
            hardware_tick();
        }
        out[i] = acc - 6.0f;
    }
}

int main(int argc, char **argv)
{
    const unsigned seed = argc >= 2 ? (unsigned)strtoul(argv[1], NULL, 10) : 1u;
    const uint32_t total_ticks = (uint32_t)ES_N_FEATURES * TICKS_PER_FEATURE;
    es_group_info g;
    uint32_t p;
    es_status st;

    srand(seed);
    ticks_until_interrupt = 1u + (uint32_t)rand() % total_ticks;
    printf("model \"%s\": %u groups, state RAM %u bytes, worst push %u multiply-adds\n",
           ES_MODEL.name, (unsigned)ES_MODEL.n_groups, (unsigned)ES_STATE_RAM_BYTES, (unsigned)ES_MACS_PER_PUSH_MAX);
    printf("timer set to fire after %u of %u ticks of feature computation\n",
           (unsigned)ticks_until_interrupt, (unsigned)total_ticks);

    st = es_init(&anytime, &ES_MODEL, work, ES_WORK_FLOATS);
    if (st != ES_OK) {
        printf("es_init failed: %d\n", (int)st);
        return 1;
    }
    while (!deadline_hit && ((st = es_next(&anytime, &g)) == ES_OK || st == ES_STEP)) {
        if (st == ES_STEP) { /* a layer-block model: run one stage (linear and tree pushes run theirs) */
            st = es_step(&anytime);
            if (st != ES_OK) {
                printf("es_step failed: %d\n", (int)st);
                return 1;
            }
            printf("committed stage %u (stage %u run, cumulative cost %g)\n", (unsigned)es_prefix(&anytime),
                   (unsigned)g.position, g.cum_cost);
            continue;
        }
        compute_group(g.group, feature_buffer, g.dim);
        if (deadline_hit) {
            printf("interrupt during group \"%s\": its partial values are discarded\n", g.name);
            break;
        }
        st = es_push(&anytime, g.group, feature_buffer, g.dim);
        if (st != ES_OK) {
            printf("es_push failed: %d\n", (int)st);
            return 1;
        }
        /* the committed stage: prefix position + 1 for a linear model; for a tree model the stage this
           group completed (or still the previous one while its stage waits for more groups) */
        printf("committed prefix %u (+ \"%s\", cumulative cost %g)\n", (unsigned)es_prefix(&anytime),
               g.name, g.cum_cost);
    }
    if (!deadline_hit) { /* every group finished before the timer: answer with the full model */
        es_current(&anytime, answer, &answer_prefix, &answer_label);
        answer_tick = ticks_elapsed;
        printf("all groups finished before the timer\n");
    }
    printf("answer at tick %u: prefix %u of %u, label %d, prediction", (unsigned)answer_tick,
           (unsigned)answer_prefix, (unsigned)(es_n_stages(&ES_MODEL) - 1u), (int)answer_label);
    for (p = 0; p < ES_N_PRED; ++p) {
        printf(" %.9g", (double)answer[p]);
    }
    printf("\n");
    return 0;
}
