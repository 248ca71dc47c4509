/*
 * edgeseq C runtime: the layer-block stage execution (ES_KIND_LAYERS; descriptor and contract in
 * edgeseq_layers.h). PRIVATE to edgeseq_runtime.c, which includes it once, after es_publish: every
 * function is static, so the float runtime stays one translation unit and every existing build
 * (compile edgeseq_runtime.c, link) keeps working. Do not include it anywhere else.
 */
#ifndef EDGESEQ_LAYERS_RUN_H
#define EDGESEQ_LAYERS_RUN_H

/* sum_{i < n} a[i] * b[i] in float32, index order (one output of a dense or conv layer) */
static float es_dot(const float *ES_RESTRICT a, const float *ES_RESTRICT b, uint32_t n)
{
    uint32_t i;
    float acc = 0.0f;
    for (i = 0u; i < n; ++i) {
        acc += a[i] * b[i];
    }
    return acc;
}

/* acc[r] += sum_{i < n} w[r * n + i] * v[i] for r < rows ([out][in] weights). Four rows at a time, each
   with its own accumulator: every output still sums its products in index order (exactly es_dot's
   result), but four independent add chains keep the FPU busy instead of waiting on one chain's latency.
   Two or three remaining rows (a two- or three-class head) go two at a time for the same reason. */
static void es_rows_dot(const float *ES_RESTRICT w, uint32_t rows, uint32_t n, const float *ES_RESTRICT v,
                        float *ES_RESTRICT acc)
{
    uint32_t r = 0u;
    uint32_t i;
    for (; r + 4u <= rows; r += 4u) {
        const float *w0 = w + (size_t)r * n;
        const float *w1 = w0 + n;
        const float *w2 = w1 + n;
        const float *w3 = w2 + n;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        for (i = 0u; i < n; ++i) {
            const float vi = v[i];
            a0 += w0[i] * vi;
            a1 += w1[i] * vi;
            a2 += w2[i] * vi;
            a3 += w3[i] * vi;
        }
        acc[r] += a0;
        acc[r + 1u] += a1;
        acc[r + 2u] += a2;
        acc[r + 3u] += a3;
    }
    if (r + 2u <= rows) {
        const float *w0 = w + (size_t)r * n;
        const float *w1 = w0 + n;
        float a0 = 0.0f, a1 = 0.0f;
        for (i = 0u; i < n; ++i) {
            const float vi = v[i];
            a0 += w0[i] * vi;
            a1 += w1[i] * vi;
        }
        acc[r] += a0;
        acc[r + 1u] += a1;
        r += 2u;
    }
    if (r < rows) {
        acc[r] += es_dot(w + (size_t)r * n, v, n);
    }
}

static uint32_t es_conv_out_length(const es_conv1d *cv)
{
    return (cv->length - cv->kernel) / cv->stride + 1u;
}

/* One conv branch: out[f * pooled + p] = pool over its window of relu(conv), x time-major (NWC). */
static void es_conv_branch(const es_conv1d *cv, const float *ES_RESTRICT x, float *ES_RESTRICT out)
{
    const uint32_t C = cv->channels;
    const uint32_t taps = cv->kernel * C;
    const uint32_t pooled = es_conv_out_length(cv) / cv->pool_size;
    const uint32_t ps = cv->pool_size;
    uint32_t f;
    uint32_t p;
    uint32_t q;
    for (f = 0u; f < cv->filters; ++f) {
        const float *wf = cv->w + (size_t)f * taps;
        const float bf = cv->b[f];
        for (p = 0u; p < pooled; ++p) {
            float acc = 0.0f;
            for (q = 0u; q < ps; ++q) {
                const size_t l = (size_t)p * ps + q;
                float a = bf + es_dot(wf, x + l * cv->stride * C, taps);
                a = a > 0.0f ? a : 0.0f; /* relu */
                if (cv->pool == (uint32_t)ES_POOL_MAX) {
                    acc = (q == 0u || a > acc) ? a : acc;
                } else {
                    acc += a;
                }
            }
            out[(size_t)f * pooled + p] = cv->pool == (uint32_t)ES_POOL_AVG ? acc / (float)ps : acc;
        }
    }
}

/* One conv branch's shape, against the group it reads (dim n_group) and the scratch size. */
static es_status es_check_conv(const es_conv1d *cv, uint32_t n_group, uint32_t n_in, uint32_t n_scratch)
{
    uint32_t pooled;
    size_t size = 0u;
    if (cv->w == NULL || cv->b == NULL || cv->channels == 0u || cv->length == 0u || cv->kernel == 0u ||
        cv->stride == 0u || cv->filters == 0u || cv->pool_size == 0u || cv->kernel > cv->length ||
        cv->pool > (uint32_t)ES_POOL_AVG || (cv->pool == (uint32_t)ES_POOL_NONE && cv->pool_size != 1u)) {
        return ES_ERR_BAD_MODEL;
    }
    if (!es_size_madd(&size, cv->channels, cv->length) || size != n_group) {
        return ES_ERR_BAD_MODEL;
    }
    pooled = es_conv_out_length(cv) / cv->pool_size;
    size = 0u;
    if (pooled == 0u || !es_size_madd(&size, cv->filters, pooled) || size != n_in || n_in > n_scratch) {
        return ES_ERR_BAD_MODEL;
    }
    return ES_OK;
}

/* One injection of stage k: it must read exactly one group pushed by then (offset at a group start,
   n_in that group's dim, or the conv output width). */
static es_status es_check_inject(const es_model *m, const es_inject *in, uint32_t k)
{
    uint32_t j;
    uint32_t start = 0u;
    if (in->u == NULL || in->n_in == 0u) {
        return ES_ERR_BAD_MODEL;
    }
    for (j = 0u; j < m->n_groups && m->layers->group_stage[j] <= k; ++j) {
        if (start == in->offset) {
            if (in->conv != NULL) {
                return es_check_conv(in->conv, m->group_dim[j], in->n_in, m->layers->n_scratch);
            }
            return in->n_in == m->group_dim[j] ? ES_OK : ES_ERR_BAD_MODEL;
        }
        start += m->group_dim[j];
    }
    return ES_ERR_BAD_MODEL; /* not the start of a group pushed by stage k */
}

/* The layer tables (see edgeseq_layers.h): sizes, the group -> stage map, every stage's shapes. */
static es_status es_check_layers(const es_model *m)
{
    const es_layers *t = m->layers;
    uint32_t k;
    uint32_t j;
    uint32_t prev = 0u;
    if (t == NULL || m->coef != NULL || m->intercept != NULL || m->trees != NULL || t->stage == NULL ||
        t->n_stages == 0u || (m->n_groups != 0u && t->group_stage == NULL)) {
        return ES_ERR_BAD_MODEL;
    }
    for (j = 0u; j < m->n_groups; ++j) {
        if (t->group_stage[j] == 0u || t->group_stage[j] >= t->n_stages ||
            (j > 0u && t->group_stage[j] < t->group_stage[j - 1u])) {
            return ES_ERR_BAD_MODEL;
        }
    }
    for (k = 0u; k < t->n_stages; ++k) {
        const es_layer_stage *s = &t->stage[k];
        uint32_t i;
        if (s->dtype != (uint32_t)ES_DTYPE_F32 || s->c == NULL || s->commit > 1u) {
            return ES_ERR_BAD_MODEL;
        }
        if (k == 0u) {
            if (s->width != 0u || s->n_state_in != 0u || s->n_inject != 0u || s->commit != 1u) {
                return ES_ERR_BAD_MODEL; /* stage 0 is the prior, always committed */
            }
            continue;
        }
        if (s->width == 0u || s->width > t->n_state || s->b == NULL || s->v == NULL ||
            (s->n_state_in == 0u && s->n_inject == 0u) || (s->n_state_in != 0u && (s->w == NULL || k == 1u ||
                                                                                   s->n_state_in != prev)) ||
            (s->n_inject != 0u && s->inject == NULL)) {
            return ES_ERR_BAD_MODEL;
        }
        for (i = 0u; i < s->n_inject; ++i) {
            const es_status st = es_check_inject(m, &s->inject[i], k);
            if (st != ES_OK) {
                return st;
            }
        }
        prev = s->width;
    }
    return ES_OK;
}

/* Run stage k >= 1: the dense block into state buffer k & 1, the head into s->z; publish if it commits. */
static es_status es_layer_stage_run(es_state *s, uint32_t k)
{
    const es_model *m = s->model;
    const es_layers *t = m->layers;
    const es_layer_stage *ls = &t->stage[k];
    float *const out = s->tstate + (size_t)(k & 1u) * t->n_state;
    const float *const in = s->tstate + (size_t)((k + 1u) & 1u) * t->n_state;
    float *const scratch = s->tstate + 2u * (size_t)t->n_state;
    const uint32_t H = ls->width;
    uint32_t h;
    uint32_t i;
    uint32_t p;
    for (h = 0u; h < H; ++h) {
        out[h] = ls->b[h];
    }
    if (ls->n_state_in != 0u) {
        es_rows_dot(ls->w, H, ls->n_state_in, in, out);
    }
    for (i = 0u; i < ls->n_inject; ++i) {
        const es_inject *inj = &ls->inject[i];
        const float *u = s->x + inj->offset;
        if (inj->conv != NULL) {
            es_conv_branch(inj->conv, u, scratch);
            u = scratch;
        }
        es_rows_dot(inj->u, H, inj->n_in, u, out);
    }
    for (h = 0u; h < H; ++h) {
        out[h] = out[h] > 0.0f ? out[h] : 0.0f; /* relu: the carried state */
    }
    for (p = 0u; p < m->n_outputs; ++p) {
        s->z[p] = ls->c[p];
    }
    es_rows_dot(ls->v, m->n_outputs, H, out, s->z);
    s->stage = k;
    return ls->commit != 0u ? es_publish(s, k, 0u, s->z) : ES_OK;
}

/* Stage 0: publish the prior (z = c_0). */
static es_status es_layers_start(es_state *s)
{
    const es_model *m = s->model;
    uint32_t p;
    for (p = 0u; p < m->n_outputs; ++p) {
        s->z[p] = m->layers->stage[0].c[p];
    }
    s->stage = 0u;
    return es_publish(s, 0u, 0u, s->z);
}

/* es_push for layers: store and check the values (x beyond `filled` is scratch). No stage runs. */
static es_status es_layers_push(es_state *s, const float *v, uint32_t dim)
{
    if (es_copy_checked(s->x + s->filled, v, dim) != 0u) {
        return ES_ERR_NOT_FINITE;
    }
    s->filled += dim;
    s->next += 1u;
    return ES_OK;
}

/* The last committing stage at or before stage k (stage 0 always commits). */
static uint32_t es_layers_committing(const es_layers *t, uint32_t k)
{
    while (k > 0u && t->stage[k].commit == 0u) {
        --k;
    }
    return k;
}

#endif /* EDGESEQ_LAYERS_RUN_H */
