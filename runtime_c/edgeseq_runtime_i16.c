/* edgeseq integer runtime: see edgeseq_runtime_i16.h. No float or double anywhere in this file. */
#include "edgeseq_runtime_i16.h"

#define ES16_STATE_MAGIC 0x45533136u /* "ES16" */
#define ES16_MAX_SHIFT 60            /* |S_j| bound the generator keeps (every shift stays < 64 bits) */
#define ES16_HEADROOM 2147483647u    /* 2^31 - 1 */
#define ES16_PROB_ONE 32768          /* probabilities in units of 2^-15 */

/* -DES16_ON_COMMIT=fn: fn(const es16_state *) runs after every publish (tests trace commits). */
#ifdef ES16_ON_COMMIT
void ES16_ON_COMMIT(const es16_state *state);
#else
#define ES16_ON_COMMIT(s) ((void)(s))
#endif

size_t es16_work_words(const es16_model *m)
{
    if (m == NULL || m->n_outputs > 0x3FFFFFFFu || m->n_pred > 0x3FFFFFFFu) {
        return 0u;
    }
    return (size_t)m->n_outputs + 2u * (size_t)m->n_pred;
}

static uint32_t es16_abs32(int32_t v)
{
    return v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
}

/* The headroom proof, re-checked from the tables: for every prefix and output,
   |intercept| + 32768 * sum |coef| <= 2^31 - 1 (64-bit sums of at most 2^32 terms of < 2^31 cannot wrap). */
static es16_status es16_check_headroom(const es16_model *m)
{
    uint32_t j;
    uint32_t p;
    uint32_t i;
    uint32_t d = 0u;
    for (j = 0u; j <= m->n_groups; ++j) {
        const int16_t *w = m->coef[j];
        if (j > 0u) {
            d += m->group_dim[j - 1u];
        }
        if ((j > 0u && w == NULL) || m->weight_shift[j] > ES16_MAX_SHIFT || m->weight_shift[j] < -ES16_MAX_SHIFT) {
            return ES16_ERR_BAD_MODEL;
        }
        for (p = 0u; p < m->n_outputs; ++p) {
            uint64_t sum = 0u;
            for (i = 0u; i < d; ++i) {
                sum += es16_abs32(w[(size_t)i * m->n_outputs + p]);
            }
            if (sum > (ES16_HEADROOM >> 15) ||
                (sum << 15) + es16_abs32(m->intercept[(size_t)j * m->n_outputs + p]) > ES16_HEADROOM) {
                return ES16_ERR_BAD_MODEL;
            }
        }
    }
    return ES16_OK;
}

static es16_status es16_check_model(const es16_model *m)
{
    uint32_t k;
    uint32_t total = 0u;
    if (m->abi_version != ES16_ABI_VERSION || m->n_outputs == 0u || m->group_dim == NULL || m->group_index == NULL ||
        m->coef == NULL || m->intercept == NULL || m->weight_shift == NULL || es16_work_words(m) == 0u ||
        m->n_groups >= 0xFFFFFFFFu || m->n_outputs > 0xFFFFu) {
        return ES16_ERR_BAD_MODEL;
    }
    switch (m->link) {
    case ES16_LINK_IDENTITY:
        if (m->n_pred != m->n_outputs) {
            return ES16_ERR_BAD_MODEL;
        }
        break;
    case ES16_LINK_SOFTMAX:
    case ES16_LINK_SIGMOID:
        if (m->link_table == NULL || m->link_table_len == 0u || m->link_table_shift > ES16_MAX_SHIFT ||
            m->link_table_shift < 0 || (m->link == ES16_LINK_SIGMOID ? (m->n_outputs != 1u || m->n_pred != 2u)
                                                                     : m->n_pred != m->n_outputs)) {
            return ES16_ERR_BAD_MODEL;
        }
        for (k = 0u; k < m->link_table_len; ++k) {
            if (m->link_table[k] < 0) { /* probabilities and exp weights are never negative */
                return ES16_ERR_BAD_MODEL;
            }
        }
        break;
    default:
        return ES16_ERR_BAD_MODEL;
    }
    for (k = 0u; k < m->n_groups; ++k) {
        if (m->group_dim[k] == 0u || m->group_dim[k] > m->n_features - total) {
            return ES16_ERR_BAD_MODEL;
        }
        total += m->group_dim[k];
    }
    if (total != m->n_features) {
        return ES16_ERR_BAD_MODEL;
    }
    return es16_check_headroom(m);
}

/* The argument check every state function starts with: a state and a required pointer (pass the
   state itself when there is none), and a state es16_init accepted. */
static es16_status es16_check_state(const es16_state *s, const void *arg)
{
    if (s == NULL || arg == NULL) {
        return ES16_ERR_NULL;
    }
    return s->magic == ES16_STATE_MAGIC && s->model != NULL ? ES16_OK : ES16_ERR_NOT_INIT;
}

/* Index of u * 2^-shift in a table of `len` entries with step 2^-table_shift: floor, saturated. The
   simulation's table_index is the same function. */
static uint32_t es16_table_index(uint32_t u, int32_t shift, int32_t table_shift, uint32_t len)
{
    const int32_t d = shift - table_shift;
    uint32_t idx;
    if (d >= 0) {
        idx = d >= 32 ? 0u : u >> d;
    } else {
        const uint32_t k = (uint32_t)(-d);
        if (k >= 32u) {
            idx = u != 0u ? len - 1u : 0u;
        } else {
            idx = u > ((len - 1u) >> k) ? len - 1u : u << k;
        }
    }
    return idx < len ? idx : len - 1u;
}

/* The table entry for u * 2^-shift (es16_init proved every entry >= 0). */
static uint32_t es16_table(const es16_model *m, uint32_t u, int32_t shift)
{
    const int32_t v = m->link_table[es16_table_index(u, shift, m->link_table_shift, m->link_table_len)];
    return (uint32_t)v;
}

/* z = intercept_j + x[0:d] @ coef_j, int32 (es16_init proved no partial sum leaves int32). */
static void es16_affine(const es16_model *m, const int16_t *x, uint32_t d, uint32_t j, int32_t *z)
{
    const uint32_t P = m->n_outputs;
    const int16_t *w = m->coef[j];
    const int32_t *b = m->intercept + (size_t)j * P;
    uint32_t p;
    uint32_t i;
    for (p = 0u; p < P; ++p) {
        int32_t acc = b[p];
        for (i = 0u; i < d; ++i) { /* d == 0 for prefix 0, whose coef may be NULL: never indexed */
            acc += (int32_t)x[i] * (int32_t)w[(size_t)i * P + p];
        }
        z[p] = acc;
    }
}

/* The link of prefix j from z into dst; returns the label (-1 for regression). */
static int32_t es16_link(const es16_model *m, const int32_t *z, uint32_t j, volatile int32_t *dst)
{
    const uint32_t P = m->n_outputs;
    const int32_t S = m->weight_shift[j];
    uint32_t p;
    uint32_t best = 0u;
    if (m->link == ES16_LINK_IDENTITY) {
        for (p = 0u; p < P; ++p) {
            dst[p] = z[p];
        }
        return -1;
    }
    if (m->link == ES16_LINK_SIGMOID) {
        const int32_t small = (int32_t)es16_table(m, es16_abs32(z[0]), S);
        dst[0] = z[0] > 0 ? small : ES16_PROB_ONE - small;
        dst[1] = z[0] > 0 ? ES16_PROB_ONE - small : small;
        return z[0] > 0 ? 1 : 0;
    }
    for (p = 1u; p < P; ++p) { /* integer argmax, the first maximum */
        if (z[p] > z[best]) {
            best = p;
        }
    }
    {
        uint32_t total = 0u;
        for (p = 0u; p < P; ++p) { /* z[best] - z[p] < 2^32: exact in uint32 */
            const uint32_t dz = (uint32_t)z[best] - (uint32_t)z[p];
            total += es16_table(m, dz, S);
        }
        if (total == 0u) { /* only a hand-made table with a zero first entry: every class equal */
            total = 1u;
        }
        for (p = 0u; p < P; ++p) {
            const uint32_t dz = (uint32_t)z[best] - (uint32_t)z[p];
            const uint32_t e = es16_table(m, dz, S);
            dst[p] = (int32_t)(((e << 15) + (total >> 1)) / total);
        }
    }
    return (int32_t)best;
}

/* Compute prefix j (the first d features) into the unpublished slot and publish it. */
static void es16_commit(es16_state *s, uint32_t j, uint32_t d)
{
    const es16_model *m = s->model;
    const uint32_t target = (s->seq + 1u) & 1u;
    es16_affine(m, s->x, d, j, s->z);
    s->slot_label[target] = es16_link(m, s->z, j, s->slot + (size_t)target * m->n_pred);
    s->slot_prefix[target] = j;
    ES_SEQLOCK_PUBLISH(s->seq); /* edgeseq_seqlock.h: the float runtime's commit */
    ES16_ON_COMMIT(s);
}

es16_status es16_init(es16_state *s, const es16_model *m, int16_t *x, size_t x_len, int32_t *work, size_t work_len)
{
    es16_status st;
    if (s == NULL || m == NULL || x == NULL || work == NULL) {
        return ES16_ERR_NULL;
    }
    s->magic = 0u;
    st = es16_check_model(m);
    if (st != ES16_OK) {
        return st;
    }
    if (x_len < m->n_features || work_len < es16_work_words(m)) {
        return ES16_ERR_BUFFER;
    }
    s->model = m;
    s->x = x;
    s->z = work;
    s->slot = work + m->n_outputs;
    s->seq = 0u;
    s->next = 0u;
    s->filled = 0u;
    es16_commit(s, 0u, 0u);
    s->magic = ES16_STATE_MAGIC;
    return ES16_OK;
}

es16_status es16_reset(es16_state *s)
{
    const es16_status st = es16_check_state(s, s);
    if (st != ES16_OK) {
        return st;
    }
    s->next = 0u;
    s->filled = 0u;
    es16_commit(s, 0u, 0u);
    return ES16_OK;
}

es16_status es16_next_group(const es16_state *s, es16_group_info *info)
{
    const es16_model *m;
    const es16_status st = es16_check_state(s, info);
    if (st != ES16_OK) {
        return st;
    }
    m = s->model;
    if (s->next >= m->n_groups) {
        return ES16_DONE;
    }
    info->position = s->next;
    info->group = m->group_index[s->next];
    info->dim = m->group_dim[s->next];
    info->cum_cost_bits = m->cum_cost_bits != NULL ? m->cum_cost_bits[s->next + 1u] : 0u;
    info->name = m->group_name != NULL ? m->group_name[s->next] : NULL;
    return ES16_OK;
}

es16_status es16_push(es16_state *s, uint32_t group, const int16_t *values, size_t n)
{
    const es16_model *m;
    uint32_t dim;
    uint32_t i;
    const es16_status st = es16_check_state(s, values);
    if (st != ES16_OK) {
        return st;
    }
    m = s->model;
    if (s->next >= m->n_groups) {
        return ES16_ERR_FINISHED;
    }
    if (group != m->group_index[s->next]) {
        return ES16_ERR_WRONG_GROUP;
    }
    dim = m->group_dim[s->next];
    if (n != (size_t)dim) {
        return ES16_ERR_WRONG_LENGTH;
    }
    for (i = 0u; i < dim; ++i) {
        s->x[s->filled + i] = values[i];
    }
    s->filled += dim;
    s->next += 1u;
    es16_commit(s, s->next, s->filled);
    return ES16_OK;
}

es16_status es16_current(const es16_state *s, int32_t *out, uint32_t *prefix, int32_t *label)
{
    uint32_t p;
    uint32_t slot;
    uint32_t pre;
    int32_t lab;
    uint32_t n;
    const es16_status st = es16_check_state(s, s);
    if (st != ES16_OK) {
        return st;
    }
    n = s->model->n_pred;
    ES_SEQLOCK_READ(s->seq, slot, {
        pre = s->slot_prefix[slot];
        lab = s->slot_label[slot];
        if (out != NULL) {
            const volatile int32_t *src = s->slot + (size_t)slot * n;
            for (p = 0u; p < n; ++p) {
                out[p] = src[p];
            }
        }
    });
    if (prefix != NULL) {
        *prefix = pre;
    }
    if (label != NULL) {
        *label = lab;
    }
    return ES16_OK;
}

es16_status es16_prefix_for_budget(const es16_model *m, uint64_t budget_bits, uint32_t *prefix)
{
    const uint64_t sign = (uint64_t)1u << 63;
    const uint64_t inf = (uint64_t)0x7FF00000u << 32;
    if (m == NULL || prefix == NULL) {
        return ES16_ERR_NULL;
    }
    if (budget_bits == sign) { /* -0.0 == +0.0 */
        budget_bits = 0u;
    }
    if (budget_bits > inf) { /* NaN (positive payload) or any negative number (sign bit set) */
        return ES16_ERR_BUDGET;
    }
    if (m->cum_cost_bits == NULL) {
        *prefix = m->n_groups;
        return ES16_OK;
    }
    ES_LAST_AFFORDABLE(m->cum_cost_bits, m->n_groups + 1u, budget_bits, prefix); /* the float runtime's rule */
    return ES16_OK;
}

int32_t es16_output_shift(const es16_model *m, uint32_t prefix)
{
    if (m == NULL || m->weight_shift == NULL || prefix > m->n_groups) {
        return 0;
    }
    return m->weight_shift[prefix];
}
