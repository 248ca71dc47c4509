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

/* -DES16_LINEAR_ONLY: firmware that runs only linear models drops the tree code (every tree branch is
   then constant false and the optimiser removes what it alone calls); es16_init refuses tree models. */
#ifdef ES16_LINEAR_ONLY
#define ES16_IS_TREES(m) ((void)(m), 0)
#else
#define ES16_IS_TREES(m) ((m)->kind == ES16_KIND_TREES)
#endif

size_t es16_work_words(const es16_model *m)
{
    size_t state = 0u;
    if (m == NULL || m->n_outputs > 0x3FFFFFFFu || m->n_pred > 0x3FFFFFFFu) {
        return 0u;
    }
    if (ES16_IS_TREES(m)) {
        if (m->trees == NULL || m->trees->n_state > 0x3FFFFFFFu) {
            return 0u;
        }
        state = m->trees->n_state;
    }
    return (size_t)m->n_outputs + 2u * (size_t)m->n_pred + state;
}

uint32_t es16_n_stages(const es16_model *m)
{
    if (m == NULL) {
        return 0u;
    }
    if (ES16_IS_TREES(m)) {
        return m->trees != NULL ? m->trees->n_stages : 0u;
    }
    return m->n_groups + 1u;
}

static uint32_t es16_abs32(int32_t v)
{
    return v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
}

/* The headroom proof of one affine map over d int16 inputs (prefix or stage j), re-checked from the
   tables: for every output, |intercept| + 32768 * sum |coef| <= 2^31 - 1 (64-bit sums of at most 2^32
   terms of < 2^31 cannot wrap). */
static es16_status es16_check_affine(const es16_model *m, uint32_t j, uint32_t d)
{
    const int16_t *w = m->coef[j];
    uint32_t p;
    uint32_t i;
    if ((d > 0u && w == NULL) || m->weight_shift[j] > ES16_MAX_SHIFT || m->weight_shift[j] < -ES16_MAX_SHIFT) {
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
    return ES16_OK;
}

/* Every linear prefix j reads the first d_j features. */
static es16_status es16_check_headroom(const es16_model *m)
{
    uint32_t j;
    uint32_t d = 0u;
    for (j = 0u; j <= m->n_groups; ++j) {
        es16_status st;
        if (j > 0u) {
            d += m->group_dim[j - 1u];
        }
        st = es16_check_affine(m, j, d);
        if (st != ES16_OK) {
            return st;
        }
    }
    return ES16_OK;
}

/* The nodes of stage k's trees: children after their node and inside its tree, split features among
   the d_k pushed once stage k runs, leaves exactly -1, targets inside the state. Each tree's largest
   |leaf_q| is added into bound[target] (uint32: a sum <= 2^31 - 1 plus one |leaf_q| <= 2^31 cannot
   wrap), which must stay <= 2^31 - 1: the state headroom proof. After this the walk needs no check. */
static es16_status es16_check_stage_nodes(const es16_trees *t, uint32_t k, uint32_t d_k, uint32_t *bound)
{
    uint32_t tr;
    for (tr = t->stage_tree[k]; tr < t->stage_tree[k + 1u]; ++tr) {
        const uint32_t end = tr + 1u < t->n_trees ? t->tree_root[tr + 1u] : t->n_nodes;
        uint32_t largest = 0u;
        uint32_t i;
        if (t->tree_root[tr] >= end || end > t->n_nodes || t->tree_target[tr] >= t->n_state) {
            return ES16_ERR_BAD_MODEL;
        }
        for (i = t->tree_root[tr]; i < end; ++i) {
            const es16_tree_node *nd = t->node + i;
            if (nd->feature < 0) {
                const uint32_t a = es16_abs32(nd->value);
                if (nd->feature != -1) {
                    return ES16_ERR_BAD_MODEL;
                }
                largest = a > largest ? a : largest;
            } else if ((uint32_t)nd->feature >= d_k || nd->child[0] <= i || nd->child[0] >= end ||
                       nd->child[1] <= i || nd->child[1] >= end) {
                return ES16_ERR_BAD_MODEL;
            }
        }
        bound[t->tree_target[tr]] += largest;
        if (bound[t->tree_target[tr]] > ES16_HEADROOM) {
            return ES16_ERR_BAD_MODEL;
        }
    }
    return ES16_OK;
}

/* The tree tables: sizes, tree ranges, the group -> stage map (group-less stages cost nothing),
   every node, the state headroom and shifts (|u_d| <= 32768), each readout's headroom. `bound` is
   n_state words of scratch (the caller's state buffer, cleared again by es16_start). */
static es16_status es16_check_trees(const es16_model *m, uint32_t *bound)
{
    const es16_trees *t = m->trees;
    uint32_t k;
    uint32_t j = 0u;
    uint32_t d = 0u;
    for (k = 0u; k < t->n_state; ++k) {
        bound[k] = 0u;
    }
    for (k = 0u; k < t->n_stages; ++k) {
        const uint32_t first = j;
        es16_status st;
        while (j < m->n_groups && t->group_stage[j] == k) {
            d += m->group_dim[j]; /* es16_check_model proved the dims sum to n_features */
            ++j;
        }
        if (t->stage_tree[k + 1u] < t->stage_tree[k] || t->stage_tree[k + 1u] > t->n_trees ||
            (j < m->n_groups && t->group_stage[j] < k) || (k == 0u && j != 0u) ||
            (k > 0u && j == first && m->cum_cost_bits != NULL && m->cum_cost_bits[k] != m->cum_cost_bits[k - 1u])) {
            return ES16_ERR_BAD_MODEL; /* trees out of order, group_stage decreasing, a costly group-less stage */
        }
        st = es16_check_stage_nodes(t, k, d, bound);
        if (st == ES16_OK) {
            st = es16_check_affine(m, k, t->n_state);
        }
        if (st != ES16_OK) {
            return st;
        }
    }
    for (k = 0u; k < t->n_state; ++k) {
        if (t->state_shift[k] < 0 || t->state_shift[k] > 31 || (bound[k] >> t->state_shift[k]) > 32767u) {
            return ES16_ERR_BAD_MODEL;
        }
    }
    return j == m->n_groups ? ES16_OK : ES16_ERR_BAD_MODEL; /* a group_stage beyond the last stage */
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
    if (m->kind == ES16_KIND_LINEAR) {
        return m->trees == NULL ? es16_check_headroom(m) : ES16_ERR_BAD_MODEL;
    }
    if (!ES16_IS_TREES(m)) {
        return ES16_ERR_BAD_MODEL; /* an unknown kind, or trees in a -DES16_LINEAR_ONLY build */
    }
    {
        const es16_trees *t = m->trees;
        if (m->kind != ES16_KIND_TREES || t == NULL || t->n_stages == 0u || t->n_stages == 0xFFFFFFFFu || t->n_state == 0u ||
            t->stage_tree == NULL || t->stage_depth == NULL || t->state_shift == NULL ||
            (t->n_trees != 0u && (t->tree_root == NULL || t->tree_target == NULL || t->node == NULL)) ||
            (m->n_groups != 0u && t->group_stage == NULL) || t->stage_tree[0] != 0u ||
            t->stage_tree[t->n_stages] != t->n_trees) {
            return ES16_ERR_BAD_MODEL;
        }
    }
    return ES16_OK; /* the nodes and readouts: es16_check_trees, once es16_init has the scratch buffer */
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

/* Per-input stopping: the margin between the two largest probabilities of `pred` (units of 2^-15;
   2^15 for a single value) >= threshold[j] (es16_set_stop); never for a regression. O(n_pred). */
static uint32_t es16_stop_check(const es16_state *s, uint32_t j, const volatile int32_t *pred)
{
    const es16_model *m = s->model;
    uint32_t p;
    int32_t t1;
    int32_t t2 = -1; /* probabilities are >= 0 */
    if (s->stop_threshold == NULL || m->link == ES16_LINK_IDENTITY) {
        return 0u;
    }
    t1 = pred[0];
    for (p = 1u; p < m->n_pred; ++p) {
        const int32_t v = pred[p];
        if (v > t1) {
            t2 = t1;
            t1 = v;
        } else if (v > t2) {
            t2 = v;
        }
    }
    return (m->n_pred > 1u ? t1 - t2 : ES16_PROB_ONE) >= s->stop_threshold[j] ? 1u : 0u;
}

/* Apply prefix/stage j's link to s->z into the unpublished slot and publish it. */
static void es16_publish(es16_state *s, uint32_t j)
{
    const es16_model *m = s->model;
    const uint32_t target = (s->seq + 1u) & 1u;
    s->slot_label[target] = es16_link(m, s->z, j, s->slot + (size_t)target * m->n_pred);
    s->confident = es16_stop_check(s, j, s->slot + (size_t)target * m->n_pred);
    s->slot_prefix[target] = j;
    ES_SEQLOCK_PUBLISH(s->seq); /* edgeseq_seqlock.h: the float runtime's commit */
    ES16_ON_COMMIT(s);
}

/* Compute linear prefix j (the first d features) and publish it. */
static void es16_commit(es16_state *s, uint32_t j, uint32_t d)
{
    es16_affine(s->model, s->x, d, j, s->z);
    es16_publish(s, j);
}

/* floor(v / 2^r) for 0 <= r <= 31 without relying on >> of a negative value (implementation-defined
   in C99): for v < 0, ~v = -v - 1 >= 0 and ~(~v >> r) = floor(v / 2^r). */
static int32_t es16_floor_shift(int32_t v, int32_t r)
{
    return v >= 0 ? (int32_t)((uint32_t)v >> r) : ~(int32_t)((uint32_t)~v >> r);
}

/*
 * Tree model: run stage k -- add each of its trees' leaf_q to the state (int32, within the bound
 * es16_init proved), read out z = intercept_k + u @ coef_k with u_d = floor(s_d / 2^r_d) -- and publish
 * it. The walk is bounded by the stage's depth; es16_init proved every index in range.
 */
static void es16_tree_stage(es16_state *s, uint32_t k)
{
    const es16_model *m = s->model;
    const es16_trees *t = m->trees;
    const es16_tree_node *const nodes = t->node;
    int32_t *const state = s->tstate;
    const uint32_t depth = t->stage_depth[k];
    const uint32_t stop = t->stage_tree[k + 1u];
    const uint32_t P = m->n_outputs;
    const int16_t *w = m->coef[k];
    uint32_t tr;
    uint32_t p;
    uint32_t i;
    for (tr = t->stage_tree[k]; tr < stop; ++tr) {
        const es16_tree_node *nd = nodes + t->tree_root[tr];
        uint32_t step;
        for (step = 0u; step < depth && nd->feature >= 0; ++step) {
            nd = nodes + nd->child[!((int32_t)s->x[nd->feature] <= nd->value)]; /* the index, not a branch */
        }
        /* a generated model always ends on a leaf (stage_depth is its deepest tree); should a hand-made
           depth stop the walk early, nothing is added, so the state stays within the proved bound */
        state[t->tree_target[tr]] += nd->feature < 0 ? nd->value : 0;
    }
    for (p = 0u; p < P; ++p) {
        int32_t acc = m->intercept[(size_t)k * P + p];
        for (i = 0u; i < t->n_state; ++i) {
            acc += es16_floor_shift(state[i], t->state_shift[i]) * (int32_t)w[(size_t)i * P + p];
        }
        s->z[p] = acc;
    }
    s->stage = k;
    es16_publish(s, k);
}

/* Tree model: run every stage complete once s->next groups are pushed and not yet run (up to the
   stage of the next group minus one, or the last stage after the last group). */
static void es16_tree_advance(es16_state *s)
{
    const es16_trees *t = s->model->trees;
    const uint32_t limit = s->next < s->model->n_groups ? t->group_stage[s->next] - 1u : t->n_stages - 1u;
    while (s->stage < limit && !s->confident) { /* a confident stage ends the sample (es16_set_stop) */
        es16_tree_stage(s, s->stage + 1u);
    }
}

/* Commit stage 0 (and, for trees, the group-less stages right after it) from scratch. */
static void es16_start(es16_state *s)
{
    uint32_t i;
    s->next = 0u;
    s->filled = 0u;
    s->confident = 0u;
    if (!ES16_IS_TREES(s->model)) {
        es16_commit(s, 0u, 0u);
        return;
    }
    for (i = 0u; i < s->model->trees->n_state; ++i) {
        s->tstate[i] = 0;
    }
    es16_tree_stage(s, 0u);
    es16_tree_advance(s);
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
    s->tstate = NULL;
    if (ES16_IS_TREES(m)) {
        s->tstate = work + m->n_outputs + 2u * (size_t)m->n_pred;
        st = es16_check_trees(m, (uint32_t *)s->tstate); /* int32/uint32 may alias (C99 6.5p7) */
        if (st != ES16_OK) {
            return st;
        }
    }
    s->seq = 0u;
    s->stage = 0u;
    s->stop_threshold = NULL;
    es16_start(s);
    s->magic = ES16_STATE_MAGIC;
    return ES16_OK;
}

es16_status es16_reset(es16_state *s)
{
    const es16_status st = es16_check_state(s, s);
    if (st != ES16_OK) {
        return st;
    }
    s->stage = 0u;
    es16_start(s);
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
    if (s->next >= m->n_groups || s->confident) { /* confident: only after es16_set_stop */
        return ES16_DONE;
    }
    info->position = s->next;
    info->group = m->group_index[s->next];
    info->dim = m->group_dim[s->next];
    /* the cost once this group is pushed: its prefix, or (trees) the stage it belongs to */
    info->cum_cost_bits = m->cum_cost_bits == NULL ? 0u
                          : m->cum_cost_bits[ES16_IS_TREES(m) ? m->trees->group_stage[s->next] : s->next + 1u];
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
    if (ES16_IS_TREES(m)) {
        es16_tree_advance(s); /* commits nothing while the stage still needs groups */
    } else {
        es16_commit(s, s->next, s->filled);
    }
    return ES16_OK;
}

es16_status es16_set_stop(es16_state *s, const int32_t *threshold)
{
    const es16_status st = es16_check_state(s, s);
    if (st != ES16_OK) {
        return st;
    }
    s->stop_threshold = threshold;
    s->stage = 0u;
    es16_start(s);
    return ES16_OK;
}

int es16_confident(const es16_state *s)
{
    return es16_check_state(s, s) == ES16_OK && s->confident != 0u;
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
    if (es16_n_stages(m) == 0u) {
        return ES16_ERR_BAD_MODEL;
    }
    if (m->cum_cost_bits == NULL) {
        *prefix = es16_n_stages(m) - 1u;
        return ES16_OK;
    }
    ES_LAST_AFFORDABLE(m->cum_cost_bits, es16_n_stages(m), budget_bits, prefix); /* the float runtime's rule */
    return ES16_OK;
}

int32_t es16_output_shift(const es16_model *m, uint32_t prefix)
{
    if (m == NULL || m->weight_shift == NULL || prefix >= es16_n_stages(m)) {
        return 0;
    }
    return m->weight_shift[prefix];
}
