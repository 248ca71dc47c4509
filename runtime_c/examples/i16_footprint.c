/*
 * Minimal firmware image of an int16 model (edgeseq_runtime_i16.c): static state and buffers (RAM),
 * one anytime pass over int16 features, a read as an interrupt handler would do. Integer types only,
 * so on a Cortex-M0 the image links no soft-float routine (tests/test_c_int16.py checks with nm).
 * Build with -DES16_PREFIX=<c prefix> -I<model dir>; `arm-none-eabi-size` reports flash/RAM.
 */
#include "edgeseq_select_i16.h"

static es16_state anytime;
static int16_t x[ES16_N_FEATURES + 1u];
static int32_t work[ES16_WORK_WORDS];
volatile int16_t sensor[ES16_N_FEATURES + 1u]; /* stands in for the feature extractors' output */
volatile int32_t answer[ES16_N_PRED];

void timer_isr(void);
void timer_isr(void)
{
    int32_t out[ES16_N_PRED];
    uint32_t p;
    es16_current(&anytime, out, 0, 0);
    for (p = 0u; p < ES16_N_PRED; ++p) {
        answer[p] = out[p];
    }
}

int main(void)
{
    static int16_t buf[ES16_N_FEATURES + 1u];
    es16_group_info g;
    uint32_t i;
    uint32_t off = 0u;
    es16_init(&anytime, &ES16_MODEL, x, ES16_N_FEATURES, work, ES16_WORK_WORDS);
    while (es16_next_group(&anytime, &g) == ES16_OK) {
        for (i = 0u; i < g.dim; ++i) {
            buf[off + i] = sensor[off + i];
        }
        es16_push(&anytime, g.group, buf + off, g.dim);
        off += g.dim;
    }
    timer_isr();
    return 0;
}
