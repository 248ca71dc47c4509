/*
 * Minimal firmware image for measuring the footprint of runtime + model on a Cortex-M4F:
 * static state and work buffer (RAM), one anytime pass, a read as an interrupt handler would do.
 * Built by `make -C runtime_c cortex-m4 MODEL_DIR=...`; `arm-none-eabi-size` reports flash/RAM.
 */
#include "edgeseq_model.h"

#define ES_CAT2(a, b) a##b
#define ES_CAT(a, b) ES_CAT2(a, b)
#define MODEL ES_CAT(ES_PREFIX, _model)
#define WORK_FLOATS ES_CAT(ES_PREFIX, _WORK_FLOATS)
#define N_FEATURES ES_CAT(ES_PREFIX, _N_FEATURES)
#define N_PRED ES_CAT(ES_PREFIX, _N_PRED)

static es_state anytime;
static float work[WORK_FLOATS];
volatile float sensor[N_FEATURES];  /* stands in for the feature extractors' output */
volatile float answer[N_PRED];

void timer_isr(void);
void timer_isr(void)
{
    float out[N_PRED];
    uint32_t p;
    es_current(&anytime, out, 0, 0);
    for (p = 0; p < N_PRED; ++p) {
        answer[p] = out[p];
    }
}

int main(void)
{
    static float buf[N_FEATURES];
    es_group_info g;
    uint32_t i, off = 0;
    es_init(&anytime, &MODEL, work, WORK_FLOATS);
    while (es_next_group(&anytime, &g) == ES_OK) {
        for (i = 0; i < g.dim; ++i) {
            buf[off + i] = sensor[off + i];
        }
        es_push(&anytime, g.group, buf + off, g.dim);
        off += g.dim;
    }
    timer_isr();
    return 0;
}
