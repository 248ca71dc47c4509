/*
 * Fuzz harness for layer-block models (ES_KIND_LAYERS): arbitrary sequences of init / next / push /
 * step / current / reset / budget queries driven by bytes, against a generated model
 * (-DES_PREFIX=<prefix> -I<model dir>). Every status is checked against an independent model of the
 * call protocol (which group comes next, when a step is due, what stage is committed, what
 * es_prefix_for_budget answers), and every committed prediction is checked to be finite and, for
 * probabilities, to sum to 1; any mismatch aborts (a finding), as do ASan/UBSan reports. The exits'
 * values themselves are compared with numpy by tests/test_c_layer_blocks.py.
 *
 * clang -fsanitize=fuzzer,address,undefined -DES_LIBFUZZER ...   libFuzzer entry point only
 * gcc ... (no ES_LIBFUZZER)                                       fallback: `fuzz_layers SECONDS SEED`
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "edgeseq_select.h"

#include "fuzz_support.h"

/* the last committing stage at or before k */
static uint32_t committed_before(const es_layers *t, uint32_t k)
{
    while (k > 0u && t->stage[k].commit == 0u) {
        --k;
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static float work[ES_WORK_FLOATS + 4u];
    static float values[ES_N_FEATURES + 8u];
    const es_model *m = &ES_MODEL;
    const es_layers *t = m->layers;
    es_state st;
    bytes b;
    int inited = 0, over = 0;
    uint32_t next = 0u, stage = 0u, committed = 0u;
    b.p = data;
    b.n = size;
    memset(&st, 0, sizeof st);
    while (b.n > 0) {
        const unsigned op = take(&b) % 7u;
        es_status s;
        if (op == 0u) { /* init, sometimes with a short buffer */
            unsigned len = take(&b);
            size_t work_len = len < 160u ? (size_t)ES_WORK_FLOATS : (size_t)(len - 160u);
            if (work_len > ES_WORK_FLOATS + 4u) {
                work_len = ES_WORK_FLOATS + 4u;
            }
            s = es_init(&st, m, work, work_len);
            if (s != (work_len >= ES_WORK_FLOATS ? ES_OK : ES_ERR_BUFFER)) FINDING("es_init status");
            inited = s == ES_OK;
            next = stage = committed = 0u;
            over = 0;
        } else if (op == 1u) { /* es_next: push the next group while the next stage needs it, else step */
            es_group_info g;
            es_status want;
            s = es_next(&st, &g);
            if (!inited) {
                want = ES_ERR_NOT_INIT;
            } else if (stage + 1u >= t->n_stages) {
                want = ES_DONE;
            } else if (next < m->n_groups && t->group_stage[next] <= stage + 1u) {
                want = ES_OK;
            } else {
                want = ES_STEP;
            }
            if (s != want) FINDING("es_next status");
            if (s == ES_OK && (g.group != m->group_index[next] || g.dim != m->group_dim[next] ||
                               !(g.cum_cost == m->cum_cost[t->group_stage[next]]))) FINDING("es_next push info");
            if (s == ES_STEP && (g.position != stage + 1u || !(g.cum_cost == m->cum_cost[stage + 1u]) || g.dim != 0u))
                FINDING("es_next step info");
        } else if (op == 2u) { /* push, usually the right group and length */
            const unsigned gsel = take(&b), nsel = take(&b);
            const uint32_t dim = next < m->n_groups ? m->group_dim[next] : 0u;
            const uint32_t group = (next < m->n_groups && gsel < 200u) ? m->group_index[next] : gsel % 8u;
            const size_t n = nsel < 200u ? dim : nsel % (ES_N_FEATURES + 8u);
            size_t i;
            int all_finite = 1;
            es_status want;
            for (i = 0; i < n; ++i) {
                values[i] = take_float(&b);
                all_finite = all_finite && finite_f(values[i]);
            }
            s = es_push(&st, group, values, n);
            want = !inited ? ES_ERR_NOT_INIT : next >= m->n_groups ? ES_ERR_FINISHED
                 : group != m->group_index[next] ? ES_ERR_WRONG_GROUP : n != dim ? ES_ERR_WRONG_LENGTH
                 : !all_finite ? ES_ERR_NOT_FINITE : ES_OK;
            if (s != want) FINDING("push status");
            if (s == ES_OK) {
                ++next;
            }
        } else if (op == 3u) { /* step */
            es_status want;
            s = es_step(&st);
            want = !inited ? ES_ERR_NOT_INIT : stage + 1u >= t->n_stages ? ES_DONE
                 : (next < m->n_groups && t->group_stage[next] <= stage + 1u) ? ES_ERR_NEED_PUSH : ES_OK;
            if (want == ES_OK && s == ES_ERR_OVERFLOW) { /* huge pushed values: the sample ends */
                over = 1;
                stage = t->n_stages - 1u;
                next = m->n_groups;
            } else if (s != want) {
                FINDING("step status");
            } else if (s == ES_OK) {
                ++stage;
                committed = t->stage[stage].commit ? stage : committed;
            }
        } else if (op == 4u) { /* current: the last committed stage, a finite prediction */
            float out[ES_N_PRED];
            uint32_t prefix = 99u;
            int32_t label = -7;
            s = es_current(&st, out, &prefix, &label);
            if (!inited) {
                if (s != ES_ERR_NOT_INIT) FINDING("current before init");
            } else {
                uint32_t p;
                double sum = 0.0;
                if (s != ES_OK || prefix != committed) FINDING("current prefix");
                for (p = 0; p < ES_N_PRED; ++p) {
                    if (!finite_f(out[p])) FINDING("non-finite committed prediction");
                    sum += (double)out[p];
                }
                if (m->link != ES_LINK_IDENTITY && (fabs(sum - 1.0) > 1e-5 || label < 0 || label >= (int32_t)ES_N_PRED))
                    FINDING("probabilities or label");
                if (m->link == ES_LINK_IDENTITY && label != -1) FINDING("regression label");
            }
        } else if (op == 5u) { /* reset */
            s = es_reset(&st);
            if (s != (inited ? ES_OK : ES_ERR_NOT_INIT)) FINDING("reset status");
            next = stage = committed = 0u;
            over = 0;
        } else { /* the budget rule needs no state: last committing stage with cum_cost <= budget */
            const double budget = (double)take(&b) / 255.0 * m->cum_cost[t->n_stages - 1u] * 1.1;
            uint32_t got = 77u, want = 0u, k;
            for (k = 0u; k < t->n_stages; ++k) {
                want = m->cum_cost[k] <= budget ? k : want;
            }
            want = committed_before(t, want);
            if (es_prefix_for_budget(m, budget, &got) != ES_OK || got != want) FINDING("budget rule");
            if (es_prefix_for_budget(m, -1.0, &got) != ES_ERR_BUDGET || es_step(NULL) != ES_ERR_NULL ||
                es_next(NULL, NULL) != ES_ERR_NULL) FINDING("bad arguments accepted");
        }
    }
    (void)over;
    return 0;
}
