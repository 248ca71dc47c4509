/*
 * Benchmark of the layer-block C runtime (bench/neural_c_speed.py builds and runs it): ns of each
 * es_step against a bare loop doing the same multiply-accumulates over the same weights, and a whole
 * forward pass (every stage) against emlearn's eml_net_predict_proba on the same dense layers. Each
 * clock read times BATCH calls (a step of the smallest net lasts only a few clock ticks): es_step of
 * stage k on BATCH states brought to stage k - 1 (their pushes untimed), BATCH bare loops, BATCH
 * whole passes (reset, pushes, steps: nothing else inside the timed block), then BATCH eml_net calls
 * (alternating with the passes block by block, so both see the same load); the
 * median over ITERS blocks of the time per call is printed (robust to preemption on a shared machine).
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

/* the same multiply-accumulates with four rows at a time, then two (each row still summed in index order): the
   kernel es_step uses, without the runtime around it -- so step/bare4 is the runtime's own overhead */
static void rows4(const float *restrict w, uint32_t rows, uint32_t n, const float *restrict v, float *restrict acc)
{
    uint32_t r = 0, i;
    for (; r + 4u <= rows; r += 4u) {
        const float *w0 = w + (size_t)r * n, *w1 = w0 + n, *w2 = w1 + n, *w3 = w2 + n;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (i = 0; i < n; ++i) {
            a0 += w0[i] * v[i];
            a1 += w1[i] * v[i];
            a2 += w2[i] * v[i];
            a3 += w3[i] * v[i];
        }
        acc[r] += a0;
        acc[r + 1u] += a1;
        acc[r + 2u] += a2;
        acc[r + 3u] += a3;
    }
    if (r + 2u <= rows) {
        const float *w0 = w + (size_t)r * n, *w1 = w0 + n;
        float a0 = 0.0f, a1 = 0.0f;
        for (i = 0; i < n; ++i) {
            a0 += w0[i] * v[i];
            a1 += w1[i] * v[i];
        }
        acc[r] += a0;
        acc[r + 1u] += a1;
        r += 2u;
    }
    if (r < rows) {
        acc[r] += dot(w + (size_t)r * n, v, n);
    }
}

static void bare4_stage(const es_layer_stage *s, const float *x, const float *restrict in, float *restrict out,
                        float *restrict z, uint32_t P)
{
    uint32_t h, p, j;
    for (h = 0; h < s->width; ++h) {
        out[h] = s->b[h];
    }
    if (s->n_state_in) {
        rows4(s->w, s->width, s->n_state_in, in, out);
    }
    for (j = 0; j < s->n_inject; ++j) {
        rows4(s->inject[j].u, s->width, s->inject[j].n_in, x + s->inject[j].offset, out);
    }
    for (h = 0; h < s->width; ++h) {
        out[h] = out[h] > 0.0f ? out[h] : 0.0f;
    }
    for (p = 0; p < P; ++p) {
        z[p] = s->c[p];
    }
    rows4(s->v, P, s->width, out, z);
}

#define MAX_ITERS 8192
#define BATCH 16 /* calls per clock read: a small net's step (~100 ns) is a few clock ticks long */

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of n per-call times: robust to the calls another process preempted on a shared machine */
static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* the firmware loop up to the next ES_STEP (pushes done here, untimed); ES_DONE when the pass is over */
static es_status until_step(es_state *st, const float *x, size_t *off)
{
    es_group_info g;
    es_status s;
    while ((s = es_next(st, &g)) == ES_OK) {
        es_push(st, g.group, x + *off, g.dim);
        *off += g.dim;
    }
    return s;
}

int main(int argc, char **argv)
{
    static float work[BATCH][ES_WORK_FLOATS];
    static float x[ES_N_FEATURES];
    static float buf[2][ES_CAT(ES_PREFIX, _N_STATE) + 1u];
    static float z[ES_N_OUTPUTS];
    static double step_ns[ES_N_STAGES][MAX_ITERS], bare_ns[ES_N_STAGES][MAX_ITERS], bare4_ns[ES_N_STAGES][MAX_ITERS];
    static double all_ns[MAX_ITERS], eml_ns[MAX_ITERS];
    static es_state st[BATCH];
    long iters = argc > 1 ? atol(argv[1]) : 1000;
    const es_layers *L = ES_MODEL.layers;
    uint32_t k, i, b;
    size_t off[BATCH];
    long it;
    iters = iters < 1 ? 1 : (iters > MAX_ITERS ? MAX_ITERS : iters);
    for (i = 0; i < ES_N_FEATURES; ++i) {
        x[i] = (float)((i * 37u) % 11u) / 5.0f - 1.0f;
    }
    for (b = 0; b < BATCH; ++b) {
        if (es_init(&st[b], &ES_MODEL, work[b], ES_WORK_FLOATS) != ES_OK) {
            return 2;
        }
    }
    for (it = 0; it < iters; ++it) {
        double t0;
        /* es_step of stage k on BATCH states brought to stage k - 1 (their pushes untimed) */
        for (b = 0; b < BATCH; ++b) {
            es_reset(&st[b]);
            off[b] = 0;
        }
        for (k = 1; k < ES_N_STAGES; ++k) {
            for (b = 0; b < BATCH; ++b) {
                if (until_step(&st[b], x, &off[b]) != ES_STEP) {
                    return 3;
                }
            }
            t0 = now_ns();
            for (b = 0; b < BATCH; ++b) {
                es_step(&st[b]);
            }
            step_ns[k][it] = (now_ns() - t0) / BATCH;
        }
        sink = st[0].z[0];
        for (k = 1; k < ES_N_STAGES; ++k) { /* the bare loops, stage by stage, ping-pong buffers */
            t0 = now_ns();
            for (b = 0; b < BATCH; ++b) {
                bare_stage(&L->stage[k], x, buf[(k + 1u) & 1u], buf[k & 1u], z, ES_N_OUTPUTS);
            }
            bare_ns[k][it] = (now_ns() - t0) / BATCH;
            t0 = now_ns();
            for (b = 0; b < BATCH; ++b) {
                bare4_stage(&L->stage[k], x, buf[(k + 1u) & 1u], buf[k & 1u], z, ES_N_OUTPUTS);
            }
            bare4_ns[k][it] = (now_ns() - t0) / BATCH;
        }
        sink = z[0];
    }
    for (k = 1; k < ES_N_STAGES; ++k) {
        printf("step %u %.2f\nbare %u %.2f\nbare4 %u %.2f\n", (unsigned)k, median(step_ns[k], iters), (unsigned)k,
               median(bare_ns[k], iters), (unsigned)k, median(bare4_ns[k], iters));
    }
    for (it = 0; it < iters; ++it) { /* the whole pass, as firmware runs it: reset, pushes and steps */
        double t0 = now_ns();
        for (b = 0; b < BATCH; ++b) {
            es_group_info g;
            es_status s;
            size_t o = 0;
            es_reset(&st[0]);
            while ((s = es_next(&st[0], &g)) == ES_OK || s == ES_STEP) {
                if (s == ES_STEP) {
                    es_step(&st[0]);
                } else {
                    es_push(&st[0], g.group, x + o, g.dim);
                    o += g.dim;
                }
            }
        }
        all_ns[it] = (now_ns() - t0) / BATCH;
        sink = st[0].z[0];
#ifdef HAVE_EMLEARN
        { /* eml_net right after, block for block: both see the same machine */
            float proba[EML_N_OUT];
            t0 = now_ns();
            for (b = 0; b < BATCH; ++b) {
                eml_net_predict_proba(&eml_model, x, EML_N_IN, proba, EML_N_OUT);
            }
            eml_ns[it] = (now_ns() - t0) / BATCH;
            sink = proba[0];
        }
#endif
    }
    printf("all %.2f\n", median(all_ns, iters));
#ifdef HAVE_EMLEARN
    printf("eml %.2f\n", median(eml_ns, iters));
#endif
    return 0;
}
