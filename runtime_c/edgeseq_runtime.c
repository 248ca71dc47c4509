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

/* -DES_LINEAR_ONLY: firmware that runs only linear models drops the tree and layer-block code (every
   such branch is then constant false and the optimiser removes the functions it alone calls); es_init
   refuses tree and layer-block models. */
#ifdef ES_LINEAR_ONLY
#define ES_IS_TREES(m) 0
#define ES_IS_LAYERS(m) 0
#else
#define ES_IS_TREES(m) ((m)->kind == ES_KIND_TREES)
#define ES_IS_LAYERS(m) ((m)->kind == ES_KIND_LAYERS)
#endif

/* A link applied on read (ES_LINK_*_ON_READ), the link it applies, and a commit of the scores as they are
   (an identity link or a link on read). -DES_IDENTITY_ONLY: es_init accepts identity links alone, so
   these are constants and the link, link-on-read and stop-test code drops out of the image. */
#ifdef ES_IDENTITY_ONLY
#define ES_IS_IDENTITY(m) 1
#define ES_ON_READ(m) 0
#define ES_IS_SIGMOID(m) 0
#define ES_RAW_COMMIT(m) 1
#else
#define ES_IS_IDENTITY(m) ((m)->link == ES_LINK_IDENTITY)
#define ES_ON_READ(m) ((m)->link == ES_LINK_SIGMOID_ON_READ || (m)->link == ES_LINK_SOFTMAX_ON_READ)
#define ES_IS_SIGMOID(m) ((m)->link == ES_LINK_SIGMOID || (m)->link == ES_LINK_SIGMOID_ON_READ)
#define ES_RAW_COMMIT(m) (ES_IS_IDENTITY(m) || ES_ON_READ(m))
#endif

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#define ES_RESTRICT restrict
#else
#define ES_RESTRICT
#endif

/* Keeps a cold path (a link, the table walk) out of its hot caller, so the caller's prologue saves
   only the registers of the hot path (a code-form tree stage, an identity publish). Speed only. */
#if defined(__GNUC__)
#define ES_NOINLINE __attribute__((noinline))
#else
#define ES_NOINLINE
#endif
/* The per-push path (es_push_next): its steps inlined into one body, so a push reloads no field of the
   state or model between them and pays one call. Speed only. */
#if defined(__GNUC__)
#define ES_INLINE __inline__ __attribute__((always_inline))
#else
#define ES_INLINE
#endif
/* es_start zeroes the tree state, a handful of floats: a plain loop, not a memset call (GCC turns such
   loops into one, whose entry costs more than the stores). Speed only. */
#if defined(__GNUC__) && !defined(__clang__)
#define ES_NO_MEMSET __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define ES_NO_MEMSET
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
    if (ES_IS_TREES(m) && (m->trees == NULL || !es_size_madd(&n, 1u, m->trees->n_state))) {
        return 0u;
    }
    if (ES_IS_LAYERS(m) && (m->layers == NULL || !es_size_madd(&n, 2u, m->layers->n_state) ||
                            !es_size_madd(&n, 1u, m->layers->n_scratch))) {
        return 0u; /* two ping-pong state buffers and the conv scratch */
    }
    return n;
}

uint32_t es_n_stages(const es_model *m)
{
    if (m == NULL) {
        return 0u;
    }
    if (ES_IS_TREES(m)) {
        return m->trees != NULL ? m->trees->n_stages : 0u;
    }
    if (ES_IS_LAYERS(m)) {
        return m->layers != NULL ? m->layers->n_stages : 0u;
    }
    return m->n_groups + 1u;
}

/* The linear tables: every offset es_push computes into coef and intercept stays inside them. */
static es_status es_check_linear(const es_model *m)
{
    uint32_t k;
    size_t table = 0u;
    if (m->coef == NULL || m->intercept == NULL || m->trees != NULL) {
        return ES_ERR_BAD_MODEL;
    }
    /* intercept rows ((n_groups + 1) x n_outputs), coefficient rows (n_features x n_outputs) */
    if (!es_size_madd(&table, m->n_groups, m->n_outputs) || !es_size_madd(&table, 1u, m->n_outputs) ||
        !es_size_madd(&table, m->n_features, m->n_outputs)) {
        return ES_ERR_BAD_MODEL;
    }
    for (k = 0; k < m->n_groups; ++k) {
        if (m->coef[k + 1u] == NULL) {
            return ES_ERR_BAD_MODEL;
        }
    }
    return ES_OK;
}

/* The nodes of stage k's trees: children after their node and inside its tree, features among the
   d_k pushed once stage k runs, targets inside the state. After this the walk needs no check. */
static es_status es_check_stage_trees(const es_trees *t, uint32_t k, uint32_t d_k)
{
    uint32_t tr;
    for (tr = t->stage_tree[k]; tr < t->stage_tree[k + 1u]; ++tr) {
        const uint32_t end = tr + 1u < t->n_trees ? t->tree_root[tr + 1u] : t->n_nodes;
        uint32_t i;
        if (t->tree_root[tr] >= end || end > t->n_nodes || t->tree_target[tr] >= t->n_state) {
            return ES_ERR_BAD_MODEL;
        }
        for (i = t->tree_root[tr]; i < end; ++i) {
            const es_tree_node *nd = &t->node[i];
            if (nd->right != 0u && ((uint32_t)nd->feature >= d_k || nd->right >= end - i || i + 1u >= end ||
                                    !es_is_finite(nd->value))) {
                return ES_ERR_BAD_MODEL; /* both children after the split and inside its tree */
            }
            if (nd->right == 0u && (nd->feature != 0u || !es_is_finite(nd->value))) {
                return ES_ERR_BAD_MODEL; /* a leaf reads x[0] when a lane steps it (and stays) */
            }
        }
    }
    return ES_OK;
}

/* The tree tables (see TREE STAGES): sizes, the group -> stage map, tree ranges, every node. */
static es_status es_check_trees(const es_model *m)
{
    const es_trees *t = m->trees;
    uint32_t k;
    uint32_t j = 0u;
    uint32_t d = 0u;
    size_t rows = 0u;
    size_t w_len = 0u;
    size_t b_len = 0u;
    if (t == NULL || m->coef != NULL || m->intercept != NULL || t->n_stages == 0u || t->n_state == 0u ||
        t->stage_tree == NULL || t->stage_depth == NULL || t->readout_w == NULL || t->readout_b == NULL ||
        (t->n_trees != 0u && t->node != NULL && (t->tree_root == NULL || t->tree_target == NULL)) ||
        (t->node == NULL && (t->n_nodes != 0u || t->tree_root != NULL || t->tree_target != NULL)) ||
        (m->n_groups != 0u && t->group_stage == NULL)) {
        return ES_ERR_BAD_MODEL;
    }
    /* readout offsets: W_k at k * S * P, b_k at k * P; none may wrap */
    if (!es_size_madd(&rows, t->n_stages, t->n_state) || !es_size_madd(&w_len, rows, m->n_outputs) ||
        !es_size_madd(&b_len, t->n_stages, m->n_outputs)) {
        return ES_ERR_BAD_MODEL;
    }
    if (t->stage_tree[0] != 0u || t->stage_tree[t->n_stages] != t->n_trees) {
        return ES_ERR_BAD_MODEL;
    }
    for (k = 0u; k < t->n_stages; ++k) {
        const uint32_t first = j;
        es_status st;
        while (j < m->n_groups && t->group_stage[j] == k) {
            d += m->group_dim[j]; /* es_check_model proved the dims sum to n_features */
            ++j;
        }
        if (t->stage_tree[k + 1u] < t->stage_tree[k] || t->stage_tree[k + 1u] > t->n_trees ||
            (j < m->n_groups && t->group_stage[j] < k)) {
            return ES_ERR_BAD_MODEL; /* trees out of order, or group_stage decreasing */
        }
        /* stage 0 needs no group; a later stage without groups runs in its predecessor's push, so it
           must cost nothing or no budget could separate the two as Python's rule does */
        if ((k == 0u && j != 0u) || (k > 0u && j == first && m->cum_cost != NULL &&
                                      !(m->cum_cost[k] == m->cum_cost[k - 1u]))) {
            return ES_ERR_BAD_MODEL;
        }
        st = t->node != NULL ? es_check_stage_trees(t, k, d) : ES_OK; /* no tables: the trees are code */
        if (st != ES_OK) {
            return st;
        }
    }
    return j == m->n_groups ? ES_OK : ES_ERR_BAD_MODEL; /* a group_stage beyond the last stage */
}

static ES_INLINE es_status es_publish(es_state *s, uint32_t j, uint32_t n_new, const float *z);
static ES_INLINE uint32_t es_copy_checked(float *ES_RESTRICT dst, const float *ES_RESTRICT v, uint32_t n);
#include "edgeseq_layers_run.h" /* the layer-block stages (static functions, this file only) */

static es_status es_check_model(const es_model *m)
{
    uint32_t k;
    uint32_t total = 0;
    if (m->abi_version != ES_ABI_VERSION || m->n_outputs == 0 || m->group_dim == NULL ||
        m->group_index == NULL || es_work_floats(m) == 0u) {
        return ES_ERR_BAD_MODEL;
    }
    switch (m->link) {
    case ES_LINK_IDENTITY:
#ifndef ES_IDENTITY_ONLY
    case ES_LINK_SOFTMAX:
    case ES_LINK_SOFTMAX_ON_READ:
#endif
        if (m->n_pred != m->n_outputs) {
            return ES_ERR_BAD_MODEL;
        }
        break;
#ifndef ES_IDENTITY_ONLY
    case ES_LINK_SIGMOID:
    case ES_LINK_SIGMOID_ON_READ:
        if (m->n_outputs != 1u || m->n_pred != 2u) {
            return ES_ERR_BAD_MODEL;
        }
        break;
#endif
    default:
        return ES_ERR_BAD_MODEL;
    }
    for (k = 0; k < m->n_groups; ++k) {
        if (m->group_dim[k] == 0u || m->group_dim[k] > m->n_features - total) {
            return ES_ERR_BAD_MODEL;
        }
        total += m->group_dim[k];
    }
    if (total != m->n_features) {
        return ES_ERR_BAD_MODEL;
    }
    if (m->kind == ES_KIND_LINEAR) {
        return es_check_linear(m);
    }
    if (ES_IS_LAYERS(m)) {
        return es_check_layers(m);
    }
    return ES_IS_TREES(m) ? es_check_trees(m) : ES_ERR_BAD_MODEL;
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
 * The per-value finiteness tests of a push (its group's values) and of a commit (the stage's scores) on
 * Thumb-2 cores (Cortex-M3/M4/M7/M33, GCC or Clang): two values a step with one paired load (and store)
 * and, per value, one compare-add of its bit pattern shifted past the sign with 0x01000000 -- which
 * carries out exactly when the exponent is all ones (NaN or +-Inf) -- and one add of that carry: 4
 * instructions a value instead of 7 (the C loop below, which other cores, -Os builds -- a few bytes
 * smaller -- and -DES_PORTABLE_C use; the tests check both). The same answer as es_nonfinite_bit:
 * speed only.
 */
#if defined(__GNUC__) && defined(__thumb2__) && !defined(__OPTIMIZE_SIZE__) && !defined(ES_PORTABLE_C)
#define ES_THUMB2_PAIRS 1
#endif

/* Copy n >= 1 values to dst; non-zero when one of them is NaN or +-Inf (dst then holds scratch). n >= 1
   (every group has values, es_check_model): the loop needs no test before its first step. */
static ES_INLINE uint32_t es_copy_checked(float *ES_RESTRICT dst, const float *ES_RESTRICT v, uint32_t n)
{
    const float *const end = v + n;
    uint32_t bad = 0u;
#ifdef ES_THUMB2_PAIRS
    if ((n & 1u) != 0u) {
        const float a = *v++;
        *dst++ = a;
        bad = es_nonfinite_bit(a) & 0x80000000u;
    }
    if (v != end) {
        uint32_t a;
        uint32_t b;
        __asm__ __volatile__("1:\n\t"
                             "ldrd %[a], %[b], [%[v]], #8\n\t"
                             "strd %[a], %[b], [%[d]], #8\n\t"
                             "cmn %[k], %[a], lsl #1\n\t"
                             "adc %[bad], %[bad], #0\n\t"
                             "cmn %[k], %[b], lsl #1\n\t"
                             "adc %[bad], %[bad], #0\n\t"
                             "cmp %[v], %[end]\n\t"
                             "bne 1b"
                             : [a] "=&r"(a), [b] "=&r"(b), [v] "+r"(v), [d] "+r"(dst), [bad] "+r"(bad)
                             : [k] "r"(0x01000000u), [end] "r"(end)
                             : "cc", "memory");
    }
#else
    do {
        const float vi = *v++;
        *dst++ = vi;
        bad |= es_nonfinite_bit(vi);
    } while (v != end);
    bad &= 0x80000000u;
#endif
    return bad;
}

/* Non-zero when one of the n >= 1 scores of z is NaN or +-Inf (a stage overflowed; every model has
   n_outputs >= 1, es_check_model). */
static ES_INLINE uint32_t es_any_nonfinite(const float *z, uint32_t n)
{
    const float *const end = z + n;
    uint32_t over = 0u;
#ifdef ES_THUMB2_PAIRS
    if ((n & 1u) != 0u) {
        over = es_nonfinite_bit(*z++) & 0x80000000u;
        if (n == 1u) { /* a single score (regression): no pair step */
            return over;
        }
    }
    if (z != end) {
        uint32_t a;
        uint32_t b;
        __asm__ __volatile__("1:\n\t"
                             "ldrd %[a], %[b], [%[z]], #8\n\t"
                             "cmn %[k], %[a], lsl #1\n\t"
                             "adc %[over], %[over], #0\n\t"
                             "cmn %[k], %[b], lsl #1\n\t"
                             "adc %[over], %[over], #0\n\t"
                             "cmp %[z], %[end]\n\t"
                             "bne 1b"
                             : [a] "=&r"(a), [b] "=&r"(b), [z] "+r"(z), [over] "+r"(over)
                             : [k] "r"(0x01000000u), [end] "r"(end)
                             : "cc", "memory");
    }
#else
    do {
        over |= es_nonfinite_bit(*z++);
    } while (z != end);
    over &= 0x80000000u;
#endif
    return over;
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
    bad = d_new != 0u && es_copy_checked(x_new, v, d_new) != 0u ? 0x80000000u : 0u;
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
 * Apply the sigmoid or softmax link to z and write the prediction into slot `dst` (es_publish copies
 * an identity link's values itself); returns the label or -2 when the result is not finite
 * (overflow). The label is the FIRST index of the largest probability written to dst -- taken on
 * the float32 probabilities, not on z, so it agrees with the prediction returned beside it and with
 * ONNX ArgMax (select_last_index = 0) on a tie. `flags`: ES_LINK_CHECK tests z for NaN/Inf first (scores
 * a commit has already tested, a link on read, skip it); without ES_LINK_LABEL a softmax returns 0 and
 * does not look for its label (a caller that discards it).
 */
#define ES_LINK_CHECK 1u
#define ES_LINK_LABEL 2u
static ES_NOINLINE int32_t es_link_into(const es_model *m, float *z, volatile float *dst, uint32_t flags)
{
    uint32_t p;
    uint32_t best = 0u;
    const uint32_t n = m->n_outputs;
    float zmax = z[0];
    if ((flags & ES_LINK_CHECK) != 0u && es_any_nonfinite(z, n) != 0u) {
        return -2;
    }
    for (p = 1u; p < n; ++p) {
        const float zp = z[p];
        zmax = zp > zmax ? zp : zmax;
    }
#ifdef ES_IDENTITY_ONLY
    (void)dst;
    (void)best;
    (void)zmax;
    return -2; /* unreachable: es_init rejects other links in this build */
#else
    if (ES_IS_SIGMOID(m)) {
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
        /* softmax with the max subtracted: every exponent <= 0, the sum is in [1, P]. A largest term
           is exp(0) = 1 exactly, so its expf call is skipped (the same float; one call fewer at every
           exit, a third of the link's time with two or three classes). */
        float sum = 0.0f;
        float top = -1.0f;
        for (p = 0; p < n; ++p) {
            z[p] = z[p] == zmax ? 1.0f : expf(z[p] - zmax);
            sum += z[p];
        }
        if ((flags & ES_LINK_LABEL) == 0u) {
            for (p = 0; p < n; ++p) {
                dst[p] = z[p] / sum;
            }
            return 0;
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

/* The optional commit hook (declared in the header when ES_ON_COMMIT is defined); off by default. */
#ifndef ES_ON_COMMIT
#define ES_ON_COMMIT(s) ((void)(s))
#endif

/* The float32 top-two gap of `v` (n values; 1 for a single value): t1 - t2, the first maximum kept. */
static float es_top2_gap(const volatile float *v, uint32_t n, float floor_value)
{
    uint32_t p;
    float t1 = v[0];
    float t2 = floor_value;
    for (p = 1u; p < n; ++p) {
        const float x = v[p];
        if (x > t1) {
            t2 = t1;
            t1 = x;
        } else if (x > t2) {
            t2 = x;
        }
    }
    return n > 1u ? t1 - t2 : 1.0f;
}

/*
 * Per-input stopping, the logit gap: the float32 top-two gap of the raw scores z (before the link,
 * which overwrites them), |z[0]| for a sigmoid. Computed only when es_set_stop_statistic asked for it.
 */
static float es_score_gap(const es_model *m, const float *z)
{
    if (ES_IS_SIGMOID(m)) {
        return z[0] < 0.0f ? -z[0] : z[0]; /* no fabsf: an identity-only build has no math.h */
    }
    return es_top2_gap(z, m->n_outputs, -FLT_MAX); /* z is finite: every score is >= -FLT_MAX */
}

/*
 * Per-input stopping: is stage j confident under the thresholds of es_set_stop(_statistic)? The
 * statistic (the probability margin of the prediction `pred`, 1 for a single value, or the logit gap
 * `gap` taken before the link) >= threshold[j]; never for a regression. O(n_pred), the comparison
 * edgeseq.runtime.stopping makes in Python.
 */
static uint32_t es_stop_check(const es_state *s, uint32_t j, const volatile float *pred, float gap)
{
    const es_model *m = s->model;
    float stat;
    if (s->stop_threshold == NULL || ES_IS_IDENTITY(m)) {
        return 0u;
    }
    stat = s->stop_statistic == ES_STOP_LOGIT_GAP ? gap : es_top2_gap(pred, m->n_pred, -1.0f);
    return stat >= s->stop_threshold[j] ? 1u : 0u;
}

/* A sigmoid or softmax stage: the link into `dst` (es_link_into) and the stop test of stage j
   (s->confident); -2 on overflow (then s->confident is unchanged). */
static ES_NOINLINE int32_t es_link_stop(es_state *s, uint32_t j, volatile float *dst)
{
    const es_model *m = s->model;
    const float gap = s->stop_threshold != NULL && s->stop_statistic == ES_STOP_LOGIT_GAP
                      ? es_score_gap(m, s->z) : 0.0f; /* before the link */
    const int32_t label = es_link_into(m, s->z, dst, ES_LINK_CHECK | ES_LINK_LABEL);
    if (label != -2) {
        s->confident = es_stop_check(s, j, dst, gap);
    }
    return label;
}

/* A link-on-read stage j whose raw scores z are committed (es_set_stop(_statistic) is on): the stop
   test on them. The probability margin needs the probabilities: the link is applied for the test alone
   (softmax in place in s->z, where the scores are first copied unless they are there already -- the
   commit wrote them straight into its slot, which must stay as it is; sigmoid into two local floats),
   by the function a commit applies otherwise -- the same statistic in both modes. */
static ES_NOINLINE uint32_t es_raw_stop(es_state *s, uint32_t j, const float *z)
{
    const es_model *m = s->model;
    float pair[2];
    float *const prob = ES_IS_SIGMOID(m) ? pair : s->z;
    uint32_t p;
    if (z != s->z) {
        for (p = 0u; p < m->n_outputs; ++p) {
            s->z[p] = z[p];
        }
    }
    if (s->stop_statistic == ES_STOP_LOGIT_GAP) {
        return es_stop_check(s, j, s->z, es_score_gap(m, s->z));
    }
    (void)es_link_into(m, s->z, prob, 0u); /* z is finite: es_publish checked it */
    return es_stop_check(s, j, prob, 0.0f);
}

/* The slot a commit writes: the one NOT published (see INTERRUPT SAFETY in edgeseq_runtime.h). */
static ES_INLINE uint32_t es_unpublished(const es_state *s)
{
    const uint32_t target = (s->seq + 1u) & 1u;
    return target;
}

/* Publish slot `target` (written by the caller) as stage j with `label`: the one publish of every commit. */
static ES_INLINE void es_publish_slot(es_state *s, uint32_t j, int32_t label, uint32_t target)
{
    s->slot_prefix[target] = j;
    s->slot_label[target] = label;
    ES_SEQLOCK_PUBLISH(s->seq); /* see edgeseq_seqlock.h */
    ES_ON_COMMIT(s);
}

/*
 * Where a stage writes its scores z (P floats): straight into the unpublished slot when they are what
 * the commit publishes (an identity link or a link on read: es_publish then only checks them, no copy),
 * else into the scratch s->z, which the link reads. The slot is the caller's work buffer (never a
 * volatile object): the stage's plain stores complete before es_publish's release fence, and no
 * reader copies this slot until the counter names it.
 */
static ES_INLINE float *es_scores_out(const es_state *s)
{
    const es_model *m = s->model;
    if (ES_RAW_COMMIT(m)) {
        return (float *)(s->slot + (size_t)es_unpublished(s) * m->n_pred);
    }
    return s->z;
}

/*
 * Publish stage j of an identity link or a link on read, whose scores z (n_out floats) are already in
 * the unpublished slot `target`: the values as they are, no label (es_current finds it on read), a
 * regression never confident (es_stop_check's answer). The slot is the unpublished one, so an overflow
 * that leaves it written is never seen. The model's facts come as arguments, so a caller that runs
 * several stages keeps them in registers across the stage calls.
 */
static ES_INLINE es_status es_publish_raw(es_state *s, uint32_t j, uint32_t n_new, const float *z, uint32_t n_out,
                                          uint32_t target, int on_read)
{
    if (es_any_nonfinite(z, n_out) != 0u) { /* an output overflowed */
        return ES_ERR_OVERFLOW;
    }
    s->filled += n_new;
    if (on_read && s->stop_threshold != NULL) { /* else it stays 0: never confident (no call at all) */
        s->confident = es_raw_stop(s, j, z);
    }
    es_publish_slot(s, j, -1, target);
    return ES_OK;
}

/*
 * Publish stage j, whose scores are z: the link into the unpublished slot (z is then s->z), or for an
 * identity link or a link on read z as it is (es_scores_out: z is normally that slot already; else it
 * is copied there). On overflow nothing is published. `n_new` (the features of a linear push) joins
 * s->filled only once the stage publishes.
 */
static ES_INLINE es_status es_publish(es_state *s, uint32_t j, uint32_t n_new, const float *z)
{
    const es_model *m = s->model;
    const uint32_t target = es_unpublished(s);
    volatile float *const dst = s->slot + (size_t)target * m->n_pred;
    int32_t label = -1;
    if (ES_RAW_COMMIT(m)) {
        uint32_t p;
        if (z != (const float *)dst) { /* a layer-block head writes s->z */
            for (p = 0u; p < m->n_outputs; ++p) {
                dst[p] = z[p];
            }
        }
        return es_publish_raw(s, j, n_new, z, m->n_outputs, target, ES_ON_READ(m));
    } else {
        label = es_link_stop(s, j, dst);
        if (label == -2) {
            return ES_ERR_OVERFLOW;
        }
        s->filled += n_new;
    }
    es_publish_slot(s, j, label, target);
    return ES_OK;
}

/*
 * Linear model: compute prefix j's prediction from the committed features plus the new group's
 * `n_new` values into the unpublished slot, then publish it. On error nothing is published and
 * `filled` is kept.
 */
static es_status es_commit(es_state *s, uint32_t j, const float *v, uint32_t n_new)
{
    const es_model *m = s->model;
    float *const z = es_scores_out(s);
    if (es_affine(s->x, s->filled, v, n_new, j == 0u ? v : m->coef[j], m->intercept + (size_t)j * m->n_outputs,
                  m->n_outputs, z) != 0u) {
        return ES_ERR_NOT_FINITE;
    }
    return es_publish(s, j, n_new, z);
}

/*
 * The tree walk (see TREE STAGES and docs/c-runtime.md). A step from a split moves to the next node
 * (x <= threshold) or `right` nodes on; a leaf (right == 0, feature 0) stays where it is. es_init
 * proved that every split's children lie after it inside its tree, so every walk moves forward until
 * it rests on a leaf: it ends, and reads only inside the arrays, whatever the tables say.
 *
 * ES_TREE_LANES 8 walks eight trees in lockstep with a branch-free step until all eight rest on
 * leaves: an out-of-order core overlaps the eight chains of dependent loads that bound a single walk,
 * and no branch depends on a comparison. ES_TREE_LANES 1 walks one tree at a time with a branch per
 * step and stops at its leaf: the faster choice on in-order cores (Cortex-M), where eight lanes only
 * add the steps of the deepest tree of the eight. Both add the leaves in tree order: the same sums.
 */
#ifndef ES_TREE_LANES
#if defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#define ES_TREE_LANES 1
#else
#define ES_TREE_LANES 8
#endif
#endif
#if ES_TREE_LANES != 1 && ES_TREE_LANES != 8
#error "ES_TREE_LANES must be 1 or 8"
#endif
#define ES_TREE_STEP(nd)                                                                             \
    do {                                                                                             \
        const uint32_t r_ = (nd)->right;                                                             \
        const uint32_t go_ = 0u - (uint32_t) !(x[(nd)->feature] <= (nd)->value); /* all ones: right */ \
        (nd) += (r_ & go_) | ((uint32_t)(r_ != 0u) & ~go_);                                         \
    } while (0)

/*
 * Tree model, the table walk of stage k: add each of its trees' leaf to the state (tree order, float32), read
 * out z = b_k + s W_k -- and publish it.
 */
static ES_NOINLINE es_status es_tree_stage_tables(es_state *s, uint32_t k)
{
    const es_model *m = s->model;
    const es_trees *t = m->trees;
    const es_tree_node *const nodes = t->node;
    const float *const x = s->x;
    float *const state = s->tstate;
    const uint32_t stop = t->stage_tree[k + 1u];
    const size_t P = m->n_outputs;
    float *const z = es_scores_out(s);
    uint32_t tr = t->stage_tree[k];
#if ES_TREE_LANES == 8
    for (; tr + 8u <= stop; tr += 8u) { /* eight trees in lockstep: eight independent load chains */
        const uint32_t *const root = t->tree_root + tr;
        const uint32_t *const target = t->tree_target + tr;
        const es_tree_node *a = nodes + root[0], *b = nodes + root[1], *c = nodes + root[2], *d = nodes + root[3];
        const es_tree_node *e = nodes + root[4], *f = nodes + root[5], *g = nodes + root[6], *h = nodes + root[7];
        while ((a->right | b->right | c->right | d->right | e->right | f->right | g->right | h->right) != 0u) {
            ES_TREE_STEP(a);
            ES_TREE_STEP(b);
            ES_TREE_STEP(c);
            ES_TREE_STEP(d);
            ES_TREE_STEP(e);
            ES_TREE_STEP(f);
            ES_TREE_STEP(g);
            ES_TREE_STEP(h);
        }
        state[target[0]] += a->value; /* tree order, as the one-tree walk below adds them */
        state[target[1]] += b->value;
        state[target[2]] += c->value;
        state[target[3]] += d->value;
        state[target[4]] += e->value;
        state[target[5]] += f->value;
        state[target[6]] += g->value;
        state[target[7]] += h->value;
    }
#endif
    for (; tr < stop; ++tr) {
        const es_tree_node *nd = nodes + t->tree_root[tr];
        while (nd->right != 0u) {
            nd += x[nd->feature] <= nd->value ? 1u : nd->right; /* left is the next node */
        }
        state[t->tree_target[tr]] += nd->value;
    }
    s->stage = k;
    /* the readout is the linear dot product with no new values (v is not read: d_new = 0) */
    (void)es_affine(state, t->n_state, t->readout_b, 0u, t->readout_w + (size_t)k * t->n_state * P,
                    t->readout_b + (size_t)k * P, m->n_outputs, z);
    return es_publish(s, k, 0u, z);
}

/* Tree model: run stage k -- its generated code (es_init_code) when it has some, else the table walk
   -- and publish it. */
static ES_INLINE es_status es_tree_stage(es_state *s, uint32_t k)
{
    const es_tree_code *const code = s->tree_code;
    if (code != NULL && code->stage[k] != NULL) { /* the same additions and readout: the same bits */
        float *const z = es_scores_out(s);
        code->stage[k](s->x, s->tstate, z);
        s->stage = k;
        return es_publish(s, k, 0u, z);
    }
    return es_tree_stage_tables(s, k);
}

/*
 * The short path of a stage (s->fast_stage, set by es_init_code and es_set_stop: generated stage code,
 * scores committed as they are, no per-input stopping): stage k's function `f` computes its scores
 * straight into the unpublished slot, which is tested and published -- no link dispatch, no stop test,
 * no copy. Never confident (no stopping on this path). On overflow nothing is published (the caller
 * ends the sample, es_tree_over).
 */
static ES_INLINE es_status es_tree_stage_fast(es_state *s, const es_model *m, uint32_t k, es_tree_stage_fn f)
{
    const uint32_t target = es_unpublished(s);
    float *const z = (float *)(s->slot + (size_t)target * m->n_pred); /* see es_scores_out */
    s->stage = k; /* the writer's own record (no reader looks at it): stored before the call, so k need
                     not be kept across it */
    f(s->x, s->tstate, z);
    return es_publish_raw(s, s->stage, 0u, z, m->n_outputs, target, 0);
}

/* A tree stage overflowed: the sample is over (es_push says ES_ERR_FINISHED until es_reset). Cold. */
static ES_NOINLINE es_status es_tree_over(es_state *s, es_status st)
{
    s->next = s->model->n_groups;
    s->stage = s->model->trees->n_stages - 1u;
    return st;
}

/*
 * Tree model: run stages first..last, each committed, until one is confident (es_set_stop). On overflow
 * the sample is over (nothing more runs). A stage with a short-path function (s->fast_stage) runs it
 * (es_tree_stage_fast); every other stage runs through es_tree_stage. Out of line: a push that
 * completes no stage (most pushes when groups outnumber stages) does not pay its registers, and a push
 * that completes one short-path stage runs it inline (es_tree_push).
 */
static ES_NOINLINE es_status es_tree_run(es_state *s, uint32_t first, uint32_t last)
{
    uint32_t k;
    for (k = first; k <= last; ++k) {
        const es_tree_stage_fn *const fast = s->fast_stage;
        es_status st;
        if (fast != NULL && fast[k] != NULL) {
            st = es_tree_stage_fast(s, s->model, k, fast[k]);
        } else if (s->confident) { /* a confident stage ends the sample */
            return ES_OK;
        } else {
            st = es_tree_stage(s, k);
        }
        if (st != ES_OK) {
            return es_tree_over(s, st);
        }
    }
    return ES_OK;
}

/* Tree model: run stages k..stage_next - 1 (k < stage_next) as es_tree_run does; the common case of one
   short-path stage inline in the caller (a push, es_start), with no call of es_tree_run. A build for
   size (-Os) keeps every stage in es_tree_run: one copy of the stage code instead of one per caller. */
static ES_INLINE es_status es_tree_stages(es_state *s, const es_model *m, uint32_t k, uint32_t stage_next)
{
#ifndef __OPTIMIZE_SIZE__
    const es_tree_stage_fn *const fast = s->fast_stage;
    if (k + 1u == stage_next && fast != NULL && fast[k] != NULL) {
        const es_status st = es_tree_stage_fast(s, m, k, fast[k]);
        return st == ES_OK ? ES_OK : es_tree_over(s, st);
    }
#else
    (void)m;
#endif
    return es_tree_run(s, k, stage_next - 1u);
}

/* The short path of es_tree_run (s->fast_stage): the stage functions when the model has them, commits
   its scores as they are (an identity link or a link on read) and no per-input stopping is on. */
static const es_tree_stage_fn *es_fast_stages(const es_state *s)
{
    if (s->tree_code == NULL || s->stop_threshold != NULL || !ES_RAW_COMMIT(s->model)) {
        return NULL;
    }
    return s->tree_code->stage;
}

/* Commit stage 0 (and, for trees, the stages that need no group right after it) from scratch. */
static ES_NO_MEMSET es_status es_start(es_state *s)
{
    const es_model *m = s->model;
    uint32_t i;
    s->next = 0u;
    s->filled = 0u;
    s->confident = 0u;
    if (ES_IS_LAYERS(m)) {
        return es_layers_start(s);
    }
    if (!ES_IS_TREES(m)) {
        return es_commit(s, 0u, s->x, 0u);
    }
    for (i = 0u; i < m->trees->n_state; ++i) {
        s->tstate[i] = 0.0f;
    }
    /* stage 0 and the stages that need no group after it: up to the stage of group 0 minus one */
    return es_tree_stages(s, m, 0u, m->n_groups > 0u ? m->trees->group_stage[0] : m->trees->n_stages);
}

/* The stage functions of a code-form model (es_init_code): its own, one per stage, and a function for
   every stage with trees when the model has no node tables. Without code the tables must be there. */
static es_status es_check_code(const es_model *m, const es_tree_code *code)
{
    uint32_t k;
    const es_trees *t = m->trees;
    if (code == NULL) {
        return !ES_IS_TREES(m) || t->n_trees == 0u || t->node != NULL ? ES_OK : ES_ERR_BAD_MODEL;
    }
    if (!ES_IS_TREES(m) || code->model != m || code->stage == NULL || code->n_stages != t->n_stages) {
        return ES_ERR_BAD_MODEL;
    }
    for (k = 0u; k < t->n_stages; ++k) {
        if (code->stage[k] == NULL && t->node == NULL && t->stage_tree[k + 1u] != t->stage_tree[k]) {
            return ES_ERR_BAD_MODEL;
        }
    }
    return ES_OK;
}

static es_status es_init_with(es_state *s, const es_model *m, const es_tree_code *code, float *work,
                              size_t work_len)
{
    es_status st;
    size_t st_i;
    if (s == NULL || m == NULL || work == NULL) {
        return ES_ERR_NULL;
    }
    s->magic = 0u;
    st = es_check_model(m);
    if (st == ES_OK) {
        st = es_check_code(m, code);
    }
    if (st != ES_OK) {
        return st;
    }
    if (work_len < es_work_floats(m)) {
        return ES_ERR_BUFFER;
    }
    s->model = m;
    for (st_i = 0u; st_i < (size_t)m->n_features + m->n_outputs; ++st_i) {
        work[st_i] = 0.0f; /* once per model: a tree lane resting on a leaf reads x[0] */
    }
    s->x = work;
    s->z = work + m->n_features;
    s->slot = work + m->n_features + m->n_outputs;
    s->tstate = ES_IS_TREES(m) || ES_IS_LAYERS(m) ? work + m->n_features + m->n_outputs + 2u * (size_t)m->n_pred
                                                  : NULL; /* layers: two state buffers, then the conv scratch */
    s->stage = 0u;
    s->seq = 0u;
    s->stop_threshold = NULL;
    s->tree_code = code;
    s->stop_statistic = ES_STOP_MARGIN;
    s->fast_stage = es_fast_stages(s);
    st = es_start(s);
    if (st == ES_OK) {
        s->magic = ES_STATE_MAGIC;
    }
    return st;
}

es_status es_init(es_state *s, const es_model *m, float *work, size_t work_len)
{
    return es_init_with(s, m, NULL, work, work_len);
}

es_status es_init_code(es_state *s, const es_tree_code *code, float *work, size_t work_len)
{
    if (code == NULL) {
        return ES_ERR_NULL;
    }
    return es_init_with(s, code->model, code, work, work_len);
}

es_status es_reset(es_state *s)
{
    if (s == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    return es_start(s);
}

/* Fill *info with the group at sequence position s->next (ES_OK), or ES_DONE after the last group or
   once the committed stage is confident (es_set_stop): es_next_group and es_push_next share it. */
static ES_INLINE es_status es_fill_next(const es_state *s, es_group_info *info)
{
    const es_model *const m = s->model;
    const uint32_t j = s->next;
    if (j >= m->n_groups || s->confident) { /* confident: only after es_set_stop */
        return ES_DONE;
    }
    info->position = j;
    info->group = m->group_index[j];
    info->dim = m->group_dim[j];
    if (m->cum_cost == NULL) {
        info->cum_cost = 0.0;
    } else { /* the cost of the stage this group completes (for trees: the stage it belongs to) */
        info->cum_cost = m->cum_cost[ES_IS_TREES(m)    ? m->trees->group_stage[j]
                                     : ES_IS_LAYERS(m) ? m->layers->group_stage[j]
                                                       : j + 1u];
    }
    info->name = m->group_name != NULL ? m->group_name[j] : NULL;
    return ES_OK;
}

es_status es_next_group(const es_state *s, es_group_info *info)
{
    if (s == NULL || info == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    return es_fill_next(s, info);
}

/*
 * Tree model, group position j (its values checked by es_push_check): store and check the values (x
 * beyond `filled` is scratch, so a refused group changes nothing), then run every stage the group
 * completes -- those before the stage of the next group, or every stage left after the last group.
 * With `next`, then fill it as es_next_group would (ES_OK or ES_DONE), from the same lookups.
 */
static ES_INLINE es_status es_tree_push(es_state *s, const es_model *m, uint32_t j, const float *v,
                                        es_group_info *next)
{
    const es_trees *const t = m->trees;
    const uint32_t dim = m->group_dim[j];
    const uint32_t jn = j + 1u;
    uint32_t stage_next; /* runs up to stage_next - 1 */
    if (es_copy_checked(s->x + s->filled, v, dim) != 0u) {
        return ES_ERR_NOT_FINITE;
    }
    s->filled += dim;
    s->next = jn;
    if (jn < m->n_groups) {
        stage_next = t->group_stage[jn];
        if (s->stage + 1u < stage_next) {
            const es_status st = es_tree_stages(s, m, s->stage + 1u, stage_next);
            if (st != ES_OK) {
                return st;
            }
        }
        if (next == NULL) {
            return ES_OK;
        }
        if (s->confident) { /* only after es_set_stop */
            return ES_DONE;
        }
        next->position = jn;
        next->group = m->group_index[jn];
        next->dim = m->group_dim[jn];
        next->cum_cost = m->cum_cost != NULL ? m->cum_cost[stage_next] : 0.0;
        next->name = m->group_name != NULL ? m->group_name[jn] : NULL;
        return ES_OK;
    }
    stage_next = t->n_stages; /* the last group: every stage left */
    if (s->stage + 1u < stage_next) {
        const es_status st = es_tree_stages(s, m, s->stage + 1u, stage_next);
        if (st != ES_OK) {
            return st;
        }
    }
    return next == NULL ? ES_OK : ES_DONE;
}

/* The checks of every push call (es_push, es_push_next, es_push_all): ES_OK when the state may take
   values now. */
static ES_INLINE es_status es_push_ready(const es_state *s, const float *values)
{
    if (s == NULL || values == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    return s->next < s->model->n_groups ? ES_OK : ES_ERR_FINISHED;
}

/* es_push's checks: ES_OK when `group` with these n values may be pushed now (every check before any
   work, so a refused push changes nothing). */
static ES_INLINE es_status es_push_check(const es_state *s, uint32_t group, const float *values, size_t n)
{
    const es_model *m;
    uint32_t j;
    const es_status st = es_push_ready(s, values);
    if (st != ES_OK) {
        return st;
    }
    m = s->model;
    j = s->next;
    if (group != m->group_index[j]) {
        return ES_ERR_WRONG_GROUP;
    }
    return n == (size_t)m->group_dim[j] ? ES_OK : ES_ERR_WRONG_LENGTH;
}

/* es_push's work after es_push_check (es_push and es_push_next share it; inlined into both). */
static ES_INLINE es_status es_push_do(es_state *s, const float *values)
{
    const es_model *const m = s->model;
    const uint32_t dim = m->group_dim[s->next];
    es_status st;
    if (ES_IS_TREES(m)) {
        return es_tree_push(s, m, s->next, values, NULL);
    }
    if (ES_IS_LAYERS(m)) {
        return es_layers_push(s, values, dim);
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

es_status es_push(es_state *s, uint32_t group, const float *values, size_t n)
{
    const es_status st = es_push_check(s, group, values, n);
    return st == ES_OK ? es_push_do(s, values) : st;
}

es_status es_push_next(es_state *s, uint32_t group, const float *values, size_t n, es_group_info *next)
{
    es_status st;
    if (next == NULL) {
        return ES_ERR_NULL;
    }
    st = es_push_check(s, group, values, n);
    if (st != ES_OK) {
        return st;
    }
    if (ES_IS_TREES(s->model)) { /* the tree push fills *next from its own lookups */
        return es_tree_push(s, s->model, s->next, values, next);
    }
    st = es_push_do(s, values);
    return st == ES_OK ? es_fill_next(s, next) : st;
}

/*
 * Tree model, es_push_all after its values are stored (x[filled..] holds the remaining groups): run
 * every stage left, each committed, as the loop of es_push_next would. Without per-input stopping one
 * es_tree_run does it. With stopping the loop may end at a confident stage: run the stages group by
 * group as single pushes do, so `next` and `filled` end where that loop leaves them.
 */
static es_status es_tree_push_all(es_state *s, const es_model *m)
{
    const es_trees *const t = m->trees;
    uint32_t j;
    if (s->stop_threshold == NULL) {
        s->filled = m->n_features;
        s->next = m->n_groups;
        return s->stage + 1u < t->n_stages ? es_tree_run(s, s->stage + 1u, t->n_stages - 1u) : ES_OK;
    }
    for (j = s->next; j < m->n_groups && !s->confident; ++j) {
        const uint32_t jn = j + 1u;
        const uint32_t stage_next = jn < m->n_groups ? t->group_stage[jn] : t->n_stages;
        s->filled += m->group_dim[j];
        s->next = jn;
        if (s->stage + 1u < stage_next) {
            const es_status st = es_tree_run(s, s->stage + 1u, stage_next - 1u);
            if (st != ES_OK) {
                return st;
            }
        }
    }
    return ES_OK;
}

es_status es_push_all(es_state *s, const float *values, size_t n)
{
    const es_model *m;
    uint32_t j;
    uint32_t d;
    const es_status ready = es_push_ready(s, values);
    if (ready != ES_OK) {
        return ready;
    }
    m = s->model;
    if (n != (size_t)(m->n_features - s->filled)) { /* the suffix widths are distinct: n names the start */
        return ES_ERR_WRONG_LENGTH;
    }
    /* every value copied and tested before any stage runs (x beyond `filled` is scratch): a refused
       call changes nothing */
    if (es_copy_checked(s->x + s->filled, values, (uint32_t)n) != 0u) {
        return ES_ERR_NOT_FINITE;
    }
    if (ES_IS_TREES(m)) {
        const es_status st = es_tree_push_all(s, m);
        return st == ES_OK ? ES_DONE : st;
    }
    if (ES_IS_LAYERS(m)) { /* stores only: es_step runs the stages */
        s->filled = m->n_features;
        s->next = m->n_groups;
        return ES_DONE;
    }
    /* linear: prefix j + 1 from the stored features (d_new = 0: the same row-order sums as a push that
       copies its group inside the dot product), committed one group after another */
    for (j = s->next; j < m->n_groups && !s->confident; ++j) {
        float *const z = es_scores_out(s);
        es_status st;
        d = m->group_dim[j];
        (void)es_affine(s->x, s->filled + d, m->intercept, 0u, m->coef[j + 1u],
                        m->intercept + (size_t)(j + 1u) * m->n_outputs, m->n_outputs, z);
        st = es_publish(s, j + 1u, d, z); /* filled += d once published */
        if (st != ES_OK) {
            return st;
        }
        s->next = j + 1u;
    }
    return ES_DONE;
}

es_status es_set_stop(es_state *s, const float *threshold)
{
    return es_set_stop_statistic(s, threshold, ES_STOP_MARGIN);
}

es_status es_set_stop_statistic(es_state *s, const float *threshold, uint32_t statistic)
{
    if (s == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    if (statistic != ES_STOP_MARGIN && statistic != ES_STOP_LOGIT_GAP) {
        return ES_ERR_BAD_MODEL;
    }
    s->stop_threshold = threshold;
    s->stop_statistic = statistic;
    s->fast_stage = es_fast_stages(s);
    return es_start(s);
}

int es_confident(const es_state *s)
{
    return es_state_ok(s) && s->confident != 0u;
}

/* The committed slot: its first n floats into out (unless NULL), its stage and label. */
static ES_INLINE void es_read_slot(const es_state *s, float *out, uint32_t n, uint32_t *prefix, int32_t *label)
{
    const uint32_t stride = s->model->n_pred; /* a slot holds n_pred floats */
    uint32_t p;
    uint32_t slot;
    uint32_t pre;
    int32_t lab;
    /* seqlock read: load seq, acquire fence, copy the slot seq & 1, acquire fence, load seq again;
       retry if it changed. A copy that saw any store of a later commit into this slot also sees that
       commit's preceding counter increment (fence (2) in es_commit pairs with the second acquire). */
    ES_SEQLOCK_READ(s->seq, slot, {
        pre = s->slot_prefix[slot];
        lab = s->slot_label[slot];
        if (out != NULL) {
            const volatile float *src = s->slot + (size_t)slot * stride;
            for (p = 0; p < n; ++p) {
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
}

/* es_current of a model with its link on read: the committed raw scores into out, then the link a
   commit applies otherwise, in place (its scratch is out too): the same bits. */
static ES_NOINLINE es_status es_current_on_read(const es_state *s, float *out, uint32_t *prefix, int32_t *label)
{
    if (out == NULL && label != NULL) {
        return ES_ERR_NULL; /* the label is taken on the probabilities, computed in out */
    }
    es_read_slot(s, out, s->model->n_outputs, prefix, NULL);
    if (out != NULL) {
        const int32_t lab = es_link_into(s->model, out, out, label != NULL ? ES_LINK_LABEL : 0u); /* z checked at commit */
        if (label != NULL) {
            *label = lab;
        }
    }
    return ES_OK;
}

es_status es_current(const es_state *s, float *out, uint32_t *prefix, int32_t *label)
{
    if (s == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    if (ES_ON_READ(s->model)) {
        return es_current_on_read(s, out, prefix, label);
    }
    es_read_slot(s, out, s->model->n_pred, prefix, label);
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
    uint32_t n;
    if (m == NULL || prefix == NULL) {
        return ES_ERR_NULL;
    }
    if (!(budget >= 0.0)) { /* also true for NaN */
        return ES_ERR_BUDGET;
    }
    n = es_n_stages(m);
    if (n == 0u) {
        return ES_ERR_BAD_MODEL;
    }
    if (m->cum_cost == NULL) {
        *prefix = n - 1u; /* a model without costs: every stage is free */
        return ES_OK;
    }
    ES_LAST_AFFORDABLE(m->cum_cost, n, budget, prefix); /* Python's rule, edgeseq_seqlock.h */
    if (ES_IS_LAYERS(m)) {
        *prefix = es_layers_committing(m->layers, *prefix); /* a commit = 0 stage never answers */
    }
    return ES_OK;
}

es_status es_next(const es_state *s, es_group_info *info)
{
    const es_model *m;
    uint32_t k;
    es_status st;
    if (s == NULL || info == NULL) {
        return ES_ERR_NULL;
    }
    st = es_next_group(s, info);
    if (st == ES_ERR_NOT_INIT || !ES_IS_LAYERS(s->model)) {
        return st;
    }
    m = s->model;
    k = s->stage + 1u;
    if (k >= m->layers->n_stages || s->confident) { /* confident: only after es_set_stop */
        return ES_DONE;
    }
    if (st == ES_OK && m->layers->group_stage[s->next] <= k) {
        return ES_OK; /* stage k still needs this group */
    }
    info->position = k;
    info->group = UINT32_MAX;
    info->dim = 0u;
    info->cum_cost = m->cum_cost != NULL ? m->cum_cost[k] : 0.0;
    info->name = NULL;
    return ES_STEP;
}

es_status es_step(es_state *s)
{
    const es_model *m;
    uint32_t k;
    es_status st;
    if (s == NULL) {
        return ES_ERR_NULL;
    }
    if (!es_state_ok(s)) {
        return ES_ERR_NOT_INIT;
    }
    m = s->model;
    if (!ES_IS_LAYERS(m)) {
        return ES_DONE; /* linear and tree stages run inside es_push */
    }
    k = s->stage + 1u;
    if (k >= m->layers->n_stages) {
        return ES_DONE;
    }
    if (s->next < m->n_groups && m->layers->group_stage[s->next] <= k) {
        return ES_ERR_NEED_PUSH;
    }
    st = es_layer_stage_run(s, k);
    if (st != ES_OK) { /* overflow: the sample is over, as for trees */
        s->next = m->n_groups;
        s->stage = m->layers->n_stages - 1u;
    }
    return st;
}
