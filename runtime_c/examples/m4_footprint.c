/*
 * Minimal firmware image for measuring the footprint of runtime + model on a Cortex-M4F:
 * static state and work buffer (RAM), one anytime pass, a read as an interrupt handler would do.
 * Built by `make -C runtime_c cortex-m4 MODEL_DIR=...`; `arm-none-eabi-size` reports flash/RAM.
 * -DES_FOOTPRINT_STEPS (layer-block models) drives the pass with es_next / es_step, so the stage code
 * is linked as such a model's firmware links it.
 */
#include "edgeseq_select.h"

static es_state anytime;
static float work[ES_WORK_FLOATS];
volatile float sensor[ES_N_FEATURES];  /* stands in for the feature extractors' output */
volatile float answer[ES_N_PRED];

void timer_isr(void);
void timer_isr(void)
{
    float out[ES_N_PRED];
    uint32_t p;
    es_current(&anytime, out, 0, 0);
    for (p = 0; p < ES_N_PRED; ++p) {
        answer[p] = out[p];
    }
}

int main(void)
{
    static float buf[ES_N_FEATURES];
    es_group_info g;
    uint32_t i, off = 0;
    es_init(&anytime, &ES_MODEL, work, ES_WORK_FLOATS);
#ifdef ES_FOOTPRINT_STEPS /* layer-block models: es_push stores a group, es_step runs a stage */
    {
        es_status st;
        while ((st = es_next(&anytime, &g)) == ES_OK || st == ES_STEP) {
            if (st == ES_STEP) {
                if (es_step(&anytime) != ES_OK) {
                    break;
                }
                continue;
            }
            for (i = 0; i < g.dim; ++i) {
                buf[off + i] = sensor[off + i];
            }
            es_push(&anytime, g.group, buf + off, g.dim);
            off += g.dim;
        }
    }
#else
    while (es_next_group(&anytime, &g) == ES_OK) {
        for (i = 0; i < g.dim; ++i) {
            buf[off + i] = sensor[off + i];
        }
        es_push(&anytime, g.group, buf + off, g.dim);
        off += g.dim;
    }
#endif
    timer_isr();
    return 0;
}
