/*
 * Benchmark of the layer-block C runtime (bench/neural_c_speed.py builds and runs it): ns of each
 * es_step against a bare loop doing the same multiply-accumulates over the same weights, and a whole
 * forward pass (every stage) against emlearn's eml_net_predict_proba on the same dense layers.
 * Build: -DES_PREFIX=<prefix> -I<model dir> -I<runtime dir> -I<emlearn include dir>, with -DHAVE_EMLEARN
 * and the generated eml_model.h when emlearn is available.
 *   neural_c_speed ITERS    prints "step k ns" and "bare k ns" per stage, then "all ns" and "eml ns".
 */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>

#include "edgeseq_select.h"
#include "bench_timing.h"

#ifdef HAVE_EMLEARN
#include "eml_model.h"
#endif

static volatile float sink;

static float dot(const float *restrict a, const float *restrict b, uint32_t n)
{
    uint32_t i;
    float acc = 0.0f;
    for (i = 0; i < n; ++i) {
        acc += a[i] * b[i];
    }
    return acc;
}

/* the bare loop of stage k: [out][in] dot products, relu, head -- the same multiply-accumulates with
   no runtime around them (no checks, no link, no commit) */
static void bare_stage(const es_layer_stage *s, const float *x, const float *restrict in, float *restrict out,
                       float *restrict z, uint32_t P)
{
    uint32_t h, p, j;
    for (h = 0; h < s->width; ++h) {
        float acc = s->b[h] + dot(s->w + (size_t)h * s->n_state_in, in, s->n_state_in);
        for (j = 0; j < s->n_inject; ++j) {
            const es_inject *inj = &s->inject[j];
            acc += dot(inj->u + (size_t)h * inj->n_in, x + inj->offset, inj->n_in);
        }
        out[h] = acc > 0.0f ? acc : 0.0f;
    }
    for (p = 0; p < P; ++p) {
        z[p] = s->c[p] + dot(s->v + (size_t)p * s->width, out, s->width);
    }
}

int main(int argc, char **argv)
{
    static float work[ES_WORK_FLOATS];
    static float x[ES_N_FEATURES];
    static float buf[2][ES_CAT(ES_PREFIX, _N_STATE) + 1u];
    static float z[ES_N_OUTPUTS];
    const long iters = argc > 1 ? atol(argv[1]) : 1000;
    const es_layers *L = ES_MODEL.layers;
    double step_ns[ES_N_STAGES][REPEATS], bare_ns[ES_N_STAGES][REPEATS], all_ns[REPEATS];
    es_state st;
    uint32_t k, i;
    int r;
    long it;
    for (i = 0; i < ES_N_FEATURES; ++i) {
        x[i] = (float)((i * 37u) % 11u) / 5.0f - 1.0f;
    }
    if (es_init(&st, &ES_MODEL, work, ES_WORK_FLOATS) != ES_OK) {
        return 2;
    }
    for (r = 0; r < REPEATS; ++r) {
        double t_all = 0.0;
        for (k = 0; k < ES_N_STAGES; ++k) {
            step_ns[k][r] = 0.0;
            bare_ns[k][r] = 0.0;
        }
        for (it = 0; it < iters; ++it) { /* the runtime: push, then one es_step per stage */
            es_group_info g;
            es_status s;
            size_t off = 0;
            double t0 = now_ns(), t1;
            es_reset(&st);
            while ((s = es_next(&st, &g)) == ES_OK || s == ES_STEP) {
                if (s == ES_STEP) {
                    t1 = now_ns();
                    es_step(&st);
                    step_ns[g.position][r] += now_ns() - t1;
                } else {
                    es_push(&st, g.group, x + off, g.dim);
                    off += g.dim;
                }
            }
            t_all += now_ns() - t0;
            sink = st.z[0];
        }
        all_ns[r] = t_all / (double)iters;
        for (it = 0; it < iters; ++it) { /* the bare loops, stage by stage, ping-pong buffers */
            for (k = 1; k < ES_N_STAGES; ++k) {
                double t1 = now_ns();
                bare_stage(&L->stage[k], x, buf[(k + 1u) & 1u], buf[k & 1u], z, ES_N_OUTPUTS);
                bare_ns[k][r] += now_ns() - t1;
            }
            sink = z[0];
        }
        for (k = 0; k < ES_N_STAGES; ++k) {
            step_ns[k][r] /= (double)iters;
            bare_ns[k][r] /= (double)iters;
        }
    }
    for (k = 1; k < ES_N_STAGES; ++k) {
        printf("step %u %.2f\nbare %u %.2f\n", (unsigned)k, minimum(step_ns[k]), (unsigned)k, minimum(bare_ns[k]));
    }
    printf("all %.2f\n", minimum(all_ns));
#ifdef HAVE_EMLEARN
    {
        double eml[REPEATS];
        float proba[EML_N_OUT];
        for (r = 0; r < REPEATS; ++r) {
            double t0 = now_ns();
            for (it = 0; it < iters; ++it) {
                eml_net_predict_proba(&eml_model, x, EML_N_IN, proba, EML_N_OUT);
                sink = proba[0];
            }
            eml[r] = (now_ns() - t0) / (double)iters;
        }
        printf("eml %.2f\n", minimum(eml));
    }
#endif
    return 0;
}
