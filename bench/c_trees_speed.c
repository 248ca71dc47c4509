/*
 * Speed of a tree stage's push against a bare loop over the same trees, same compiler run.
 * Built by bench/c_trees.py with -DES_PREFIX=<prefix> -I<model dir>, for a tree model (identity link).
 * The timed push is the model's most expensive one (position argv[2]); the state before it is
 * restored each time. Rows cycle through NROWS different feature vectors so the branch predictor
 * cannot learn one path. The bare loop does what the stage computes and nothing else: copy the group's
 * values, walk every tree of the stages the push runs (no depth bound), add the leaves, read out.
 * Prints "push_ns bare_ns", each the minimum over REPEATS interleaved repeats.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_timing.h"
#include "edgeseq_select.h"

#define NROWS 1024u

static float rows[NROWS][ES_N_FEATURES];
static float work[ES_WORK_FLOATS];
static float bare_x[ES_N_FEATURES];
static float bare_state[ES_WORK_FLOATS];
static volatile float sink;

/* stages k0..k1 (inclusive) of the trees, as a plain loop: walk, add, read out (no link) */
static float bare(const es_trees *t, uint32_t k0, uint32_t k1, const float *x, float *state, float *z)
{
    uint32_t k, tr, i, p;
    for (k = k0; k <= k1; ++k) {
        const float *w = t->readout_w + (size_t)k * t->n_state * ES_N_OUTPUTS;
        for (tr = t->stage_tree[k]; tr < t->stage_tree[k + 1u]; ++tr) {
            const es_tree_node *nd = t->node + t->tree_root[tr];
            while (nd->right != 0u) {
                nd += x[nd->feature] <= nd->value ? 1u : nd->right;
            }
            state[t->tree_target[tr]] += nd->value;
        }
        for (p = 0; p < ES_N_OUTPUTS; ++p) {
            z[p] = t->readout_b[(size_t)k * ES_N_OUTPUTS + p];
        }
        for (i = 0; i < t->n_state; ++i) {
            for (p = 0; p < ES_N_OUTPUTS; ++p) {
                z[p] += state[i] * w[(size_t)i * ES_N_OUTPUTS + p];
            }
        }
    }
    return z[0];
}

int main(int argc, char **argv)
{
    const long iters = argc >= 2 ? atol(argv[1]) : 20000;
    const uint32_t pos = argc >= 3 ? (uint32_t)atol(argv[2]) : 0u;
    const es_model *m = &ES_MODEL;
    const es_trees *t = m->trees;
    es_state st, saved;
    double t_push[REPEATS], t_bare[REPEATS];
    float z[ES_N_OUTPUTS];
    float saved_state[ES_WORK_FLOATS];
    uint32_t i, r_i, off = 0, k0, k1;
    long it;
    int r;
    uint32_t seed = 12345u;

    if (m->kind != ES_KIND_TREES || pos >= m->n_groups) {
        fprintf(stderr, "need a tree model and a group position < %u\n", (unsigned)m->n_groups);
        return 2;
    }
    for (r_i = 0; r_i < NROWS; ++r_i) {
        for (i = 0; i < ES_N_FEATURES; ++i) {
            seed = seed * 1664525u + 1013904223u;
            rows[r_i][i] = (float)((int32_t)(seed >> 8) - (1 << 23)) / (float)(1 << 22);
        }
    }
    for (i = 0; i < pos; ++i) {
        off += m->group_dim[i];
    }
    es_init(&st, m, work, ES_WORK_FLOATS);
    { /* the state just before the timed push: the earlier groups of row 0 */
        es_group_info g;
        size_t o = 0;
        while (es_next_group(&st, &g) == ES_OK && g.position < pos) {
            es_push(&st, g.group, rows[0] + o, g.dim);
            o += g.dim;
        }
    }
    saved = st;
    memcpy(saved_state, st.tstate, sizeof(float) * t->n_state);
    k0 = saved.stage + 1u;
    k1 = pos + 1u < m->n_groups ? t->group_stage[pos + 1u] - 1u : t->n_stages - 1u;
    memcpy(bare_x, work, sizeof(float) * ES_N_FEATURES);

    for (r = 0; r < REPEATS; ++r) {
        double t0 = now_ns();
        for (it = 0; it < iters; ++it) {
            st.next = saved.next;
            st.filled = saved.filled;
            st.stage = saved.stage;
            memcpy(st.tstate, saved_state, sizeof(float) * t->n_state);
            es_push(&st, m->group_index[pos], rows[(uint32_t)it % NROWS] + off, m->group_dim[pos]);
        }
        t_push[r] = (now_ns() - t0) / (double)iters;
        es_current(&st, z, NULL, NULL);
        sink = z[0];

        t0 = now_ns();
        for (it = 0; it < iters; ++it) {
            memcpy(bare_state, saved_state, sizeof(float) * t->n_state);
            memcpy(bare_x + off, rows[(uint32_t)it % NROWS] + off, sizeof(float) * m->group_dim[pos]);
            sink = bare(t, k0, k1, bare_x, bare_state, z);
        }
        t_bare[r] = (now_ns() - t0) / (double)iters;
    }
    printf("%.3f %.3f\n", minimum(t_push), minimum(t_bare));
    return 0;
}
