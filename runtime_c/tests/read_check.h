/*
 * The reader side of the interrupt tests, shared by tests/interrupt_test.c (POSIX signal or second
 * thread) and tests/qemu/systick_test.c (SysTick on an emulated Cortex-M): one writer state, the
 * committed prediction of every prefix recorded as the reference, and a read that compares what
 * es_current returns bit for bit with the reference of the prefix it reports. Include once, after
 * defining ES_TEST_FLAG (the type of flags shared with the reader; default int).
 */
#ifndef ES_TEST_READ_CHECK_H
#define ES_TEST_READ_CHECK_H

#include <string.h>

/* Built with -DES16_PREFIX the same checks run on the integer runtime (edgeseq_runtime_i16.c): the
   names below map the float runtime's calls onto it. */
#ifdef ES16_PREFIX
#include "edgeseq_select_i16.h"
#define ES_N_FEATURES ES16_N_FEATURES
#define ES_N_STAGES ES16_N_STAGES
#define ES_N_PRED ES16_N_PRED
#define ES_OK ES16_OK
#define es_state es16_state
#define es_group_info es16_group_info
#define es_current es16_current
#define es_reset es16_reset
#define es_next_group es16_next_group
#define es_push es16_push
typedef int16_t es_test_feature;
typedef int32_t es_test_value;
static int16_t x_buf[ES16_N_FEATURES + 1u];
static int32_t work[ES16_WORK_WORDS];
#define ES_TEST_INIT(st) es16_init((st), &ES16_MODEL, x_buf, ES16_N_FEATURES, work, ES16_WORK_WORDS)
#define ES_TEST_FEATURE(r) ((int16_t)((int32_t)((r) >> 16) - 32768))
#else
#include "edgeseq_select.h"
typedef float es_test_feature;
typedef float es_test_value;
static float work[ES_WORK_FLOATS];
#define ES_TEST_INIT(st) es_init((st), &ES_MODEL, work, ES_WORK_FLOATS)
#define ES_TEST_FEATURE(r) ((float)((int32_t)((r) >> 8) - (1 << 23)) / (float)(1 << 22))
#endif

#ifndef ES_TEST_FLAG
#define ES_TEST_FLAG int
#endif

static es_test_feature features[ES_N_FEATURES + 1u];
static es_test_value reference[ES_N_STAGES][ES_N_PRED];
static int32_t reference_label[ES_N_STAGES];
static es_state shared;
static volatile ES_TEST_FLAG in_push = 0;
static volatile unsigned long n_reads = 0, n_during_push = 0, n_torn = 0;

/* The read every context performs: compare bits with the reference of the reported prefix. */
static void read_and_check(void)
{
    es_test_value out[ES_N_PRED];
    uint32_t prefix = 0;
    int32_t label = 0;
    const int pushing = in_push;
    if (es_current(&shared, out, &prefix, &label) != ES_OK || prefix >= ES_N_STAGES ||
        memcmp(out, reference[prefix], sizeof out) != 0 || label != reference_label[prefix]) {
        n_torn = n_torn + 1u;
    }
    n_reads = n_reads + 1u;
    if (pushing) {
        n_during_push = n_during_push + 1u;
    }
}

/* Record the committed prediction as the reference of its stage (prefix). */
static void record_current(void)
{
    es_test_value out[ES_N_PRED];
    uint32_t stage = 0;
    int32_t label = 0;
    if (es_current(&shared, out, &stage, &label) == ES_OK && stage < ES_N_STAGES) {
        memcpy(reference[stage], out, sizeof out);
        reference_label[stage] = label;
    }
}

#ifdef ES_ON_COMMIT
/* Built with -DES_ON_COMMIT=es_test_on_commit: every commit is recorded, also the tree stages that
   need no new group and commit inside their predecessor's push. */
static volatile int recording = 0;
void es_test_on_commit(const es_state *st)
{
    if (recording && st == &shared) {
        record_current();
    }
}
#define ES_SET_RECORDING(on) (recording = (on))
#else
#define ES_SET_RECORDING(on) ((void)(on))
#endif

/* One full anytime pass over `features` (in_push set around each push); with `record`, each
   committed prediction becomes the reference of its stage. Returns 0, or -1 if a push failed. */
static int one_pass(int record)
{
    es_group_info g;
    size_t off = 0;
    ES_SET_RECORDING(record);
    es_reset(&shared);
    if (record) {
        record_current();
    }
    while (es_next_group(&shared, &g) == ES_OK) {
        in_push = 1;
        if (es_push(&shared, g.group, features + off, g.dim) != ES_OK) {
            return -1;
        }
        in_push = 0;
        off += g.dim;
        if (record) {
            record_current();
        }
    }
    ES_SET_RECORDING(0);
    return 0;
}

/* Deterministic features of mixed sign, es_init, and the reference pass. 0 on success. */
static int setup_reference(void)
{
    uint32_t i;
    uint32_t state = 12345u;
    for (i = 0; i < ES_N_FEATURES; ++i) {
        state = state * 1664525u + 1013904223u;
        features[i] = ES_TEST_FEATURE(state);
    }
    if (ES_TEST_INIT(&shared) != ES_OK) {
        return -1;
    }
    return one_pass(1);
}

#endif /* ES_TEST_READ_CHECK_H */
