/*
 * Fuzz harness: arbitrary sequences of init / next_group / push / current / reset driven by bytes,
 * against a generated model, linear or tree stages (-DES_PREFIX=<prefix> -I<model dir>). Every status is checked against
 * an independent model of the expected behaviour, and every committed prediction against a
 * double-precision reference; any mismatch aborts (a finding), as do ASan/UBSan reports.
 *
 * clang -fsanitize=fuzzer,address,undefined -DES_LIBFUZZER ...   libFuzzer entry point only
 * gcc ... (no ES_LIBFUZZER)                                       fallback: `fuzz_runtime SECONDS SEED`
 *                                                                  feeds random byte strings
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "edgeseq_select.h"

#include "fuzz_support.h"


/* z of linear prefix j in double; returns the sum of |terms| that bounds its float32 rounding */
static double linear_logits(const es_model *m, uint32_t j, uint32_t d, const float *x, double *z, uint32_t *terms)
{
    double mag = 0.0;
    uint32_t p, i;
    for (p = 0; p < ES_N_OUTPUTS; ++p) {
        double s = (double)m->intercept[(size_t)j * ES_N_OUTPUTS + p];
        double a = fabs(s);
        for (i = 0; i < d; ++i) {
            double t = (double)x[i] * (double)m->coef[j][(size_t)i * ES_N_OUTPUTS + p];
            s += t;
            a += fabs(t);
        }
        z[p] = s;
        if (a > mag) {
            mag = a;
        }
    }
    *terms = d;
    return mag;
}

/* Leaf value of tree t for features x, walked independently of the runtime (a bounded walk: a
   generated model never needs more than n_nodes steps, so a longer walk is a finding). */
static double tree_leaf(const es_trees *tr, uint32_t t, const float *x)
{
    uint32_t node = tr->tree_root[t], steps = 0;
    while (tr->node[node].right != 0u) {
        const es_tree_node *nd = &tr->node[node];
        node += x[nd->feature] <= nd->value ? 1u : nd->right; /* pre-order: left child = next node */
        if (++steps > tr->n_nodes) FINDING("tree walk does not end");
    }
    return (double)tr->node[node].value;
}

/* z of tree stage k in double: the state summed over every tree of stages 0..k, then the readout of
   stage k; returns the magnitude that bounds the float32 rounding of both sums. */
static double tree_logits(const es_model *m, uint32_t k, const float *x, double *z, uint32_t *terms)
{
    const es_trees *tr = m->trees;
    static double s[ES_WORK_FLOATS], a[ES_WORK_FLOATS]; /* n_state <= ES_WORK_FLOATS */
    double mag = 0.0;
    uint32_t t, i, p;
    for (i = 0; i < tr->n_state; ++i) {
        s[i] = a[i] = 0.0;
    }
    for (t = 0; t < tr->stage_tree[k + 1u]; ++t) {
        double leaf = tree_leaf(tr, t, x);
        s[tr->tree_target[t]] += leaf;
        a[tr->tree_target[t]] += fabs(leaf);
    }
    for (p = 0; p < ES_N_OUTPUTS; ++p) {
        double b = (double)tr->readout_b[(size_t)k * ES_N_OUTPUTS + p], zp = b, ap = fabs(b);
        for (i = 0; i < tr->n_state; ++i) {
            double w = (double)tr->readout_w[((size_t)k * tr->n_state + i) * ES_N_OUTPUTS + p];
            zp += s[i] * w;
            ap += a[i] * fabs(w);
        }
        z[p] = zp;
        mag = ap > mag ? ap : mag;
    }
    *terms = tr->n_trees + tr->n_state;
    return mag;
}

/* expected prediction of stage j (linear: prefix j over the first d features) in double, with a
   bound on the float32 rounding error */
static void reference(const es_model *m, uint32_t j, uint32_t d, const float *x, double *pred,
                      double *bound, double *magnitude)
{
    double z[ES_N_OUTPUTS];
    uint32_t p, terms;
    double zmax, sum = 0.0;
    double mag = m->kind == ES_KIND_LINEAR ? linear_logits(m, j, d, x, z, &terms) : tree_logits(m, j, x, z, &terms);
    *magnitude = mag;
    *bound = (double)(terms + 4u) * 1.2e-7 * mag + 1e-37;
    if (m->link == ES_LINK_IDENTITY) {
        for (p = 0; p < ES_N_OUTPUTS; ++p) {
            pred[p] = z[p];
        }
        return;
    }
    if (m->link == ES_LINK_SIGMOID) {
        pred[1] = 1.0 / (1.0 + exp(-z[0]));
        pred[0] = 1.0 - pred[1];
        *bound += 1e-6; /* the link is 1/4-Lipschitz; expf adds a few ulp */
        return;
    }
    zmax = z[0];
    for (p = 1; p < ES_N_OUTPUTS; ++p) {
        zmax = z[p] > zmax ? z[p] : zmax;
    }
    for (p = 0; p < ES_N_OUTPUTS; ++p) {
        sum += exp(z[p] - zmax);
    }
    for (p = 0; p < ES_N_OUTPUTS; ++p) {
        pred[p] = exp(z[p] - zmax) / sum;
    }
    *bound = 2.0 * *bound + 1e-6; /* softmax is 1-Lipschitz per logit difference */
}

/* The stage committed after `next` groups were pushed: linear, the prefix `next`; trees, the last
   stage all of whose groups are in (stages without new groups run with their predecessor). */
static uint32_t committed_stage(const es_model *m, uint32_t next)
{
    if (m->kind == ES_KIND_LINEAR) {
        return next;
    }
    return next == m->n_groups ? m->trees->n_stages - 1u : m->trees->group_stage[next] - 1u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static float work[ES_WORK_FLOATS + 4u];
    static float mirror[ES_N_FEATURES];      /* what we expect the state to hold */
    static float values[ES_N_FEATURES + 8u];
    es_state st;
    bytes b;
    int inited = 0;
    uint32_t next = 0, filled = 0;
    const es_model *m = &ES_MODEL;
    b.p = data;
    b.n = size;
    memset(&st, 0, sizeof st);
    while (b.n > 0) {
        unsigned op = take(&b) % 6u;
        es_status s;
        if (op == 0u) { /* init with a possibly too small buffer */
            unsigned len = take(&b);
            size_t work_len = len < 128u ? (size_t)ES_WORK_FLOATS : (size_t)(len - 128u);
            if (work_len > ES_WORK_FLOATS + 4u) {
                work_len = ES_WORK_FLOATS + 4u;
            }
            s = es_init(&st, m, work, work_len);
            if (s != (work_len >= ES_WORK_FLOATS ? ES_OK : ES_ERR_BUFFER)) {
                FINDING("es_init status");
            }
            inited = s == ES_OK;
            next = filled = 0;
        } else if (op == 1u) {
            es_group_info g;
            s = es_next_group(&st, &g);
            if (!inited) {
                if (s != ES_ERR_NOT_INIT) FINDING("next_group before init");
            } else if (next == m->n_groups) {
                if (s != ES_DONE) FINDING("next_group at end");
            } else if (s != ES_OK || g.group != m->group_index[next] || g.dim != m->group_dim[next] ||
                       g.position != next) {
                FINDING("next_group info");
            }
        } else if (op == 2u) { /* push, usually the right group and length */
            unsigned gsel = take(&b), nsel = take(&b);
            uint32_t expect_dim = next < m->n_groups ? m->group_dim[next] : 0u;
            uint32_t group = (next < m->n_groups && gsel < 200u) ? m->group_index[next] : gsel % 8u;
            size_t n = nsel < 200u ? expect_dim : nsel % (ES_N_FEATURES + 8u);
            size_t i;
            int all_finite = 1;
            es_status want;
            for (i = 0; i < n; ++i) {
                values[i] = take_float(&b);
                all_finite = all_finite && finite_f(values[i]);
            }
            s = es_push(&st, group, values, n);
            if (!inited) {
                want = ES_ERR_NOT_INIT;
            } else if (next >= m->n_groups) {
                want = ES_ERR_FINISHED;
            } else if (group != m->group_index[next]) {
                want = ES_ERR_WRONG_GROUP;
            } else if (n != expect_dim) {
                want = ES_ERR_WRONG_LENGTH;
            } else if (!all_finite) {
                want = ES_ERR_NOT_FINITE;
            } else {
                want = ES_OK; /* or ES_ERR_OVERFLOW, checked below */
            }
            if (want == ES_OK && s == ES_ERR_OVERFLOW && m->kind == ES_KIND_LINEAR) {
                double pred[ES_N_OUTPUTS + 1u], bound, mag;
                memcpy(mirror + filled, values, n * sizeof(float));
                reference(m, next + 1u, filled + (uint32_t)n, mirror, pred, &bound, &mag);
                /* float partial sums stay below mag * (1 + d eps): overflow needs mag near FLT_MAX */
                if (mag < 3.0e38) FINDING("overflow reported on a small prediction");
            } else if (s != want) {
                FINDING("push status");
            } else if (s == ES_OK) {
                memcpy(mirror + filled, values, n * sizeof(float));
                filled += (uint32_t)n;
                ++next;
            }
        } else if (op == 3u) {
            float out[ES_N_PRED];
            uint32_t prefix = 99u;
            int32_t label = -7;
            s = es_current(&st, (take(&b) & 1u) ? out : NULL, &prefix, &label);
            if (!inited) {
                if (s != ES_ERR_NOT_INIT) FINDING("current before init");
            } else {
                double pred[ES_N_OUTPUTS + 1u], bound, mag;
                uint32_t p;
                if (s != ES_OK || prefix != committed_stage(m, next)) FINDING("current prefix");
                s = es_current(&st, out, NULL, NULL);
                reference(m, prefix, filled, mirror, pred, &bound, &mag);
                for (p = 0; p < ES_N_PRED; ++p) {
                    if (!finite_f(out[p]) || fabs((double)out[p] - pred[p]) > bound) {
                        FINDING("prediction differs from the double reference");
                    }
                }
                if ((m->link == ES_LINK_IDENTITY) != (label == -1)) FINDING("label");
            }
        } else if (op == 4u) {
            s = es_reset(&st);
            if (s != (inited ? ES_OK : ES_ERR_NOT_INIT)) FINDING("reset status");
            next = filled = 0;
        } else {
            if (es_push(&st, 0u, NULL, 1u) != ES_ERR_NULL || es_current(NULL, NULL, NULL, NULL) != ES_ERR_NULL)
                FINDING("null pointers accepted");
        }
    }
    return 0;
}
