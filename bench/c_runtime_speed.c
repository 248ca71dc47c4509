/*
 * Speed of the C runtime against a bare dot-product loop over the same floats, same compiler run.
 * Built by bench/c_runtime_speed.py with -DES_PREFIX=<prefix> -I<model dir>.
 * Prints: "pass_ns bare_ns last_push_ns last_bare_ns read_ns", each the minimum over REPEATS
 * interleaved repeats (the least disturbed by other processes on a shared machine).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include "bench_timing.h"
#include "edgeseq_select.h"


static float features[ES_N_FEATURES];
static float work[ES_WORK_FLOATS];
static volatile float sink;

/* The bare loop: z = b + x[0:d] @ W for one prefix, nothing else (no checks, copies, link, publish). */
static void bare(const float *x, uint32_t d, const float *w, const float *b, float *z)
{
    uint32_t i, p;
    for (p = 0; p < ES_N_OUTPUTS; ++p) {
        z[p] = b[p];
    }
    for (i = 0; i < d; ++i) {
        for (p = 0; p < ES_N_OUTPUTS; ++p) {
            z[p] += x[i] * w[(size_t)i * ES_N_OUTPUTS + p];
        }
    }
}

static void full_pass(es_state *st)
{
    es_group_info g;
    size_t off = 0;
    es_reset(st);
    while (es_next_group(st, &g) == ES_OK) {
        es_push(st, g.group, features + off, g.dim);
        off += g.dim;
    }
}

int main(int argc, char **argv)
{
    const long iters = argc >= 2 ? atol(argv[1]) : 20000;
    const es_model *m = &ES_MODEL;
    es_state st, saved;
    double t_pass[REPEATS], t_bare[REPEATS], t_last[REPEATS], t_lastbare[REPEATS], t_read[REPEATS];
    float z[ES_N_OUTPUTS], out[ES_N_PRED];
    uint32_t i, j, last_dim = m->group_dim[m->n_groups - 1u], prefix;
    long it;
    int r;

    for (i = 0; i < ES_N_FEATURES; ++i) {
        features[i] = (float)((int)(i * 37u % 19u) - 9) * 0.05f;
    }
    es_init(&st, m, work, ES_WORK_FLOATS);
    for (r = 0; r < REPEATS; ++r) {
        double t0 = now_ns();
        for (it = 0; it < iters; ++it) {
            full_pass(&st);
        }
        t_pass[r] = (now_ns() - t0) / (double)iters;
        es_current(&st, out, NULL, NULL);
        sink = out[0];

        t0 = now_ns();
        for (it = 0; it < iters; ++it) {
            uint32_t d = 0;
            for (j = 1; j <= m->n_groups; ++j) {
                d += m->group_dim[j - 1u];
                bare(features, d, m->coef[j], m->intercept + (size_t)j * ES_N_OUTPUTS, z);
                sink = z[0];
            }
        }
        t_bare[r] = (now_ns() - t0) / (double)iters;

        /* the last (worst-case) push alone: restore the state just before it each time */
        es_reset(&st);
        {
            es_group_info g;
            size_t off = 0;
            while (es_next_group(&st, &g) == ES_OK && g.position + 1u < m->n_groups) {
                es_push(&st, g.group, features + off, g.dim);
                off += g.dim;
            }
        }
        saved = st;
        t0 = now_ns();
        for (it = 0; it < iters; ++it) {
            st.next = saved.next;
            st.filled = saved.filled;
            es_push(&st, m->group_index[m->n_groups - 1u], features + ES_N_FEATURES - last_dim, last_dim);
        }
        t_last[r] = (now_ns() - t0) / (double)iters;
        t0 = now_ns();
        for (it = 0; it < iters; ++it) {
            bare(features, ES_N_FEATURES, m->coef[m->n_groups], m->intercept + (size_t)m->n_groups * ES_N_OUTPUTS, z);
            sink = z[0];
        }
        t_lastbare[r] = (now_ns() - t0) / (double)iters;

        t0 = now_ns();
        for (it = 0; it < iters * 10; ++it) {
            es_current(&st, out, &prefix, NULL);
            sink = out[0];
        }
        t_read[r] = (now_ns() - t0) / (double)(iters * 10);
    }
    printf("%.3f %.3f %.3f %.3f %.3f\n", minimum(t_pass), minimum(t_bare), minimum(t_last),
           minimum(t_lastbare), minimum(t_read));
    return 0;
}
