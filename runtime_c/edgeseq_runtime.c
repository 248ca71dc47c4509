/* edgeseq C runtime: see edgeseq_runtime.h for the API, costs and the interrupt-safety argument. */
#include "edgeseq_runtime.h"

#include <float.h>

/* The budget rule compares binary64 values bit for bit with Python's float (see BUDGETS). */
#if FLT_RADIX != 2 || DBL_MANT_DIG != 53 || DBL_MAX_EXP != 1024
#error "edgeseq needs IEEE binary64 double (compilers with 32-bit double, e.g. -fshort-double, are not supported)"
#endif

#ifndef ES_IDENTITY_ONLY
#include <math.h> /* expf: only the sigmoid and softmax links call it */
#endif

#define ES_STATE_MAGIC 0x45534551u /* "ESEQ" */

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#define ES_RESTRICT restrict
#else
#define ES_RESTRICT
#endif

/* Finite check on the bit pattern: immune to -ffast-math, needs no libm. */
static int es_is_finite(float v)
{
    union {
        float f;
        uint32_t u;
    } bits;
    bits.f = v;
    return (bits.u & 0x7f800000u) != 0x7f800000u;
}

static int es_state_ok(const es_state *s)
{
    return s != NULL && s->magic == ES_STATE_MAGIC && s->model != NULL;
}

/* Largest value a size computation may reach; SIZE_MAX normally. Tests build with a smaller value
   (e.g. 0xFFFFFFFF) to exercise, on a 64-bit host, the wrap-around a 32-bit size_t would hit. */
#ifndef ES_SIZE_MAX
#define ES_SIZE_MAX SIZE_MAX
#endif

/* *acc = *acc + a * b, unless that exceeds ES_SIZE_MAX: then 0 is returned and *acc is unchanged.
   Every size the runtime derives from a descriptor goes through here, so no size_t can wrap. */
static int es_size_madd(size_t *acc, size_t a, size_t b)
{
    size_t prod;
    if (a != 0u && b > ES_SIZE_MAX / a) {
        return 0;
    }
    prod = a * b;
    if (prod > ES_SIZE_MAX - *acc) {
        return 0;
    }
    *acc += prod;
    return 1;
}

size_t es_work_floats(const es_model *m)
{
    size_t n = 0u;
    if (m == NULL || !es_size_madd(&n, 1u, m->n_features) || !es_size_madd(&n, 1u, m->n_outputs) ||
        !es_size_madd(&n, 2u, m->n_pred)) {
        return 0u; /* no buffer can be that large: es_init rejects the descriptor */
    }
    return n;
}

static es_status es_check_model(const es_model *m)
{
    uint32_t k;
    uint32_t total = 0;
    size_t table = 0u;
    if (m->abi_version != ES_ABI_VERSION || m->n_outputs == 0 || m->group_dim == NULL ||
        m->group_index == NULL || m->coef == NULL || m->intercept == NULL) {
        return ES_ERR_BAD_MODEL;
    }
    /* the offsets es_push computes: intercept rows ((n_groups + 1) x n_outputs), coefficient rows
       (n_features x n_outputs), the work buffer; any of them wrapping means a corrupt descriptor */
    if (!es_size_madd(&table, m->n_groups, m->n_outputs) || !es_size_madd(&table, 1u, m->n_outputs) ||
        !es_size_madd(&table, m->n_features, m->n_outputs) || es_work_floats(m) == 0u) {
        return ES_ERR_BAD_MODEL;
    }
    switch (m->link) {
    case ES_LINK_IDENTITY:
#ifndef ES_IDENTITY_ONLY
    case ES_LINK_SOFTMAX:
#endif
        if (m->n_pred != m->n_outputs) {
            return ES_ERR_BAD_MODEL;
        }
        break;
#ifndef ES_IDENTITY_ONLY
    case ES_LINK_SIGMOID:
        if (m->n_outputs != 1u || m->n_pred != 2u) {
            return ES_ERR_BAD_MODEL;
        }
        break;
#endif
    default:
        return ES_ERR_BAD_MODEL;
    }
    for (k = 0; k < m->n_groups; ++k) {
        if (m->group_dim[k] == 0u || m->group_dim[k] > m->n_features - total ||
            m->coef[k + 1u] == NULL) {
            return ES_ERR_BAD_MODEL;
        }
        total += m->group_dim[k];
    }
    return total == m->n_features ? ES_OK : ES_ERR_BAD_MODEL;
}

/* (bits & 0x7f800000) + 0x00800000 carries into bit 31 exactly when the exponent is all ones
   (NaN or +-Inf): a branch-free test on the bit pattern, immune to -ffast-math, no libm. */
static uint32_t es_nonfinite_bit(float v)
{
    union {
        float f;
        uint32_t u;
    } bits;
    bits.f = v;
    return (bits.u & 0x7f800000u) + 0x00800000u;
}

/*
 * z = [x[0:d_old], v[0:d_new]] @ W + b with W row-major (d_old + d_new) x P, float accumulation in
 * row order (what an FPU-only MCU does). The new group's values v are copied to x[d_old:] inside
 * the same loop, where the add chain's latency hides the copy and the finiteness test. Returns
 * non-zero (bit 31) when a value of v is NaN or +-Inf; z is then meaningless.
 */
static uint32_t es_affine(float *ES_RESTRICT x, uint32_t d_old, const float *ES_RESTRICT v, uint32_t d_new,
                          const float *w, const float *b, uint32_t p_out, float *ES_RESTRICT z)
{
    uint32_t i;
    uint32_t p;
    uint32_t bad = 0u;
    float *ES_RESTRICT x_new = x + d_old;
    if (p_out == 1u) {
        const float *w_new = w + d_old;
        float acc = b[0];
        for (i = 0; i < d_old; ++i) {
            acc += x[i] * w[i];
        }
        for (i = 0; i < d_new; ++i) {
            const float vi = v[i];
            x_new[i] = vi;
            bad |= es_nonfinite_bit(vi);
            acc += vi * w_new[i];
        }
        z[0] = acc;
        return bad & 0x80000000u;
    }
    /* P > 1: copy and check first, then 4 outputs at a time with register accumulators (each
       output still sums its rows in order, as the P == 1 path does) */
    for (i = 0; i < d_new; ++i) {
        x_new[i] = v[i];
        bad |= es_nonfinite_bit(v[i]);
    }
    d_old += d_new;
    for (p = 0; p + 4u <= p_out; p += 4u) {
        float a0 = b[p], a1 = b[p + 1u], a2 = b[p + 2u], a3 = b[p + 3u];
        const float *col = w + p;
        for (i = 0; i < d_old; ++i, col += p_out) {
            const float xi = x[i];
            a0 += xi * col[0];
            a1 += xi * col[1];
            a2 += xi * col[2];
            a3 += xi * col[3];
        }
        z[p] = a0;
        z[p + 1u] = a1;
        z[p + 2u] = a2;
        z[p + 3u] = a3;
    }
    for (; p < p_out; ++p) {
        float acc = b[p];
        const float *col = w + p;
        for (i = 0; i < d_old; ++i, col += p_out) {
            acc += x[i] * col[0];
        }
        z[p] = acc;
    }
    return bad & 0x80000000u;
}

/*
 * Apply the link to z and write the prediction into slot `dst`; returns the label (-1 for
 * regression) or -2 when the result is not finite (overflow). The label is the FIRST index of the
 * largest probability written to dst -- taken on the float32 probabilities, not on z, so it agrees
 * with the prediction returned beside it and with ONNX ArgMax (select_last_index = 0) on a tie.
 */
static int32_t es_link_into(const es_model *m, float *z, volatile float *dst)
{
    uint32_t p;
    uint32_t best = 0;
    const uint32_t n = m->n_outputs;
    for (p = 0; p < n; ++p) {
        if (!es_is_finite(z[p])) {
            return -2;
        }
        if (z[p] > z[best]) {
            best = p;
        }
    }
    if (m->link == ES_LINK_IDENTITY) {
        for (p = 0; p < n; ++p) {
            dst[p] = z[p];
        }
        return -1;
    }
#ifdef ES_IDENTITY_ONLY
    return -2; /* unreachable: es_init rejects other links in this build */
#else
    if (m->link == ES_LINK_SIGMOID) {
        /* e = exp(-|z|) never overflows; the larger probability is 1/(1+e), the smaller e/(1+e). */
        const float e = expf(-fabsf(z[0]));
        const float big = 1.0f / (1.0f + e);
        const float small = e / (1.0f + e);
        const float p0 = z[0] >= 0.0f ? small : big;
        const float p1 = z[0] >= 0.0f ? big : small;
        dst[0] = p0;
        dst[1] = p1;
        return p1 > p0 ? 1 : 0; /* z > 0 tiny enough to round both to 0.5f is a tie: class 0 */
    }
    {
        /* softmax with the max subtracted: every exponent <= 0, the sum is in [1, P] */
        float sum = 0.0f;
        float top = -1.0f;
        const float zmax = z[best];
        for (p = 0; p < n; ++p) {
            z[p] = expf(z[p] - zmax);
            sum += z[p];
        }
        best = 0;
        for (p = 0; p < n; ++p) {
            const float q = z[p] / sum;
            dst[p] = q;
            if (q > top) { /* strict: the first of equal probabilities wins */
                top = q;
                best = p;
            }
        }
        return (int32_t)best;
    }
#endif
}

/*
 * Compute prefix j's prediction from the committed features plus the new group's `n_new` values
 * into the unpublished slot, then publish it. On error nothing is published and `filled` is kept.
 */
static es_status es_commit(es_state *s, uint32_t j, const float *v, uint32_t n_new)
{
    const es_model *m = s->model;
    const uint32_t target = (s->seq + 1u) & 1u;
    int32_t label;
    if (es_affine(s->x, s->filled, v, n_new, j == 0u ? v : m->coef[j], m->intercept + (size_t)j * m->n_outputs,
                  m->n_outputs, s->z) != 0u) {
        return ES_ERR_NOT_FINITE;
    }
    label = es_link_into(m, s->z, s->slot + (size_t)target * m->n_pred);
    if (label == -2) {
        return ES_ERR_OVERFLOW;
    }
    s->filled += n_new;
    s->slot_prefix[target] = j;
    s->slot_label[target] = label;
    ES_FENCE_RELEASE(); /* (1) the slot's contents become visible before the counter that publishes it */
    s->seq = s->seq + 1u;
    /* (2) the new counter becomes visible before any later store into the slot it just retired: the
       next commit writes slot (seq + 1) & 1, which a reader that loaded the previous seq may still be
       copying. Without this fence a weakly ordered core (ARMv7-A/v8, POWER) may expose those slot
       stores first; that reader would then re-read an unchanged seq and accept a torn copy. */
    ES_FENCE_RELEASE();
    return ES_OK;
}

es_status es_init(es_state *s, const es_model *m, float *work, size_t work_len)
{
    es_status st;
    if (s == NULL || m == NULL || work == NULL) {
        return ES_ERR_NULL;
    }
    s->magic = 0u;
    st = es_check_model(m);
    if (st != ES_OK) {
        return st;
    }
    if (work_len < es_work_floats(m)) {
        return ES_ERR_BUFFER;
    }
    s->model = m;
    s->x = work;
    s->z = work + m->n_features;
    s->slot = work + m->n_features + m->n_outputs;
    s->next = 0u;
    s->filled = 0u;
    s->seq = 0u;
    st = es_commit(s, 0u, work, 0u);
    if (st == ES_OK) {
        s->magic = ES_STATE_MAGIC;
    }
    return st;
}

es_status es_reset(es_state *s)
{
    if (s == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    s->next = 0u;
    s->filled = 0u;
    return es_commit(s, 0u, s->x, 0u);
}

es_status es_next_group(const es_state *s, es_group_info *info)
{
    const es_model *m;
    if (s == NULL || info == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    m = s->model;
    if (s->next >= m->n_groups) {
        return ES_DONE;
    }
    info->position = s->next;
    info->group = m->group_index[s->next];
    info->dim = m->group_dim[s->next];
    info->cum_cost = m->cum_cost != NULL ? m->cum_cost[s->next + 1u] : 0.0;
    info->name = m->group_name != NULL ? m->group_name[s->next] : NULL;
    return ES_OK;
}

es_status es_push(es_state *s, uint32_t group, const float *values, size_t n)
{
    const es_model *m;
    uint32_t dim;
    es_status st;
    if (s == NULL || values == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    m = s->model;
    if (s->next >= m->n_groups) {
        return ES_ERR_FINISHED;
    }
    if (group != m->group_index[s->next]) {
        return ES_ERR_WRONG_GROUP;
    }
    dim = m->group_dim[s->next];
    if (n != (size_t)dim) {
        return ES_ERR_WRONG_LENGTH;
    }
    /* the values are checked and copied inside the dot product (x beyond `filled` is scratch), so
       an invalid group or an overflow leaves the committed state untouched */
    st = es_commit(s, s->next + 1u, values, dim);
    if (st != ES_OK) {
        return st;
    }
    s->next += 1u;
    return ES_OK;
}

es_status es_current(const es_state *s, float *out, uint32_t *prefix, int32_t *label)
{
    uint32_t before;
    uint32_t after;
    uint32_t p;
    uint32_t slot;
    uint32_t pre;
    int32_t lab;
    uint32_t n;
    if (s == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    n = s->model->n_pred;
    /* seqlock read: load seq, acquire fence, copy the slot seq & 1, acquire fence, load seq again;
       retry if it changed. A copy that saw any store of a later commit into this slot also sees that
       commit's preceding counter increment (fence (2) in es_commit pairs with the second acquire). */
    do {
        before = s->seq;
        ES_FENCE_ACQUIRE(); /* read the counter before the slot it designates (pairs with fence (1)) */
        slot = before & 1u;
        pre = s->slot_prefix[slot];
        lab = s->slot_label[slot];
        if (out != NULL) {
            const volatile float *src = s->slot + (size_t)slot * n;
            for (p = 0; p < n; ++p) {
                out[p] = src[p];
            }
        }
        ES_FENCE_ACQUIRE(); /* finish reading the slot before re-reading the counter */
        after = s->seq;
    } while (after != before);
    if (prefix != NULL) {
        *prefix = pre;
    }
    if (label != NULL) {
        *label = lab;
    }
    return ES_OK;
}

uint32_t es_prefix(const es_state *s)
{
    uint32_t pre = 0u;
    /* the same fenced, retried read as es_current: a bare slot_prefix[seq & 1] load could return the
       prefix a concurrent push is still computing (not yet published) */
    if (es_current(s, NULL, &pre, NULL) != ES_OK) {
        return 0u;
    }
    return pre;
}

es_status es_prefix_for_budget(const es_model *m, double budget, uint32_t *prefix)
{
    uint32_t j;
    uint32_t best = 0;
    if (m == NULL || prefix == NULL) {
        return ES_ERR_NULL;
    }
    if (!(budget >= 0.0)) { /* also true for NaN */
        return ES_ERR_BUDGET;
    }
    if (m->cum_cost == NULL) {
        *prefix = m->n_groups; /* a model without costs: every prefix is free */
        return ES_OK;
    }
    /* the LAST j with cum_cost[j] <= budget, as Python's rule states it (no early exit, so a
       hand-made table that is not monotone still gives Python's answer) */
    for (j = 0; j <= m->n_groups; ++j) {
        if (m->cum_cost[j] <= budget) {
            best = j;
        }
    }
    *prefix = best;
    return ES_OK;
}
