/*
 * edgeseq integer runtime: the anytime loop for cores without an FPU (Cortex-M0/M0+, small RISC-V),
 * for models exported with `edgeseq export --c-dtype int16` (DESIGN section 11).
 *
 * No float or double type appears in this runtime or in an int16 generated model: features arrive
 * as int16, weights are int16, sums are int32, links are table look-ups and integer divisions, and
 * budgets are compared as the IEEE-754 bit patterns of the float64 costs (uint64; for non-negative
 * doubles, +inf included, the order of the bit patterns is the order of the values, so the rule
 * "last stage with cum_cost <= budget" is decided exactly as Python decides it, with no soft-float).
 *
 *     static int16_t x[mymodel_N_FEATURES];
 *     static int32_t work[mymodel_WORK_WORDS];
 *     static es16_state st;
 *     es16_init(&st, &mymodel_model, x, mymodel_N_FEATURES, work, mymodel_WORK_WORDS);
 *     es16_group_info g;
 *     while (es16_next_group(&st, &g) == ES_OK && g.cum_cost_bits <= budget_bits) {
 *         extract_group_q(g.group, feats);   // g.dim int16: sat16(rint(x * 2^s_i) - O_i), see below
 *         if (es16_push(&st, g.group, feats, g.dim) != ES_OK) break;
 *     }
 *     // elsewhere, e.g. in a timer ISR:  es16_current(&st, out, &prefix, &label);
 *
 * FEATURES. Who quantises: the extractor. Feature i of the full prefix (sequence order) is delivered
 * as x_q = sat16(rint(x * 2^s_i) - O_i), s_i and O_i from the generated <prefix>_feature_shift[] and
 * <prefix>_feature_offset[] (also in manifest.json). An extractor that already computes in fixed
 * point with 2^-s_i resolution subtracts the integer O_i and saturates; nothing else.
 *
 * ARITHMETIC. Prefix j: z_q[p] = intercept[j][p] + sum_i x_q[i] * coef_j[i][p], int16 x int16 products
 * summed in int32. Headroom: |x_q| <= 32768, so every partial sum is bounded by
 * |intercept| + 32768 * sum_i |coef| -- the generator proves that bound <= 2^31 - 1 for every prefix
 * and output, and es16_init checks it again (in 64-bit arithmetic) before accepting a descriptor, so no
 * signed overflow can happen whatever int16 values are pushed. z ~ z_q * 2^-weight_shift[j].
 * Predictions (int32, es16_current):
 *   identity: z_q itself, P values; the real value is z_q * 2^-weight_shift[j] (es16_output_shift);
 *   sigmoid: [p0, p1] in units of 2^-15 (p0 + p1 = 32768); label 1 exactly when z_q > 0;
 *   softmax: P probabilities in units of 2^-15 (rounded quotients, so they sum to 32768 +- P/2);
 *            label = the FIRST index of the largest z_q (integer argmax, no table involved).
 * The link table (int16, in the model) is indexed by |z| (sigmoid) or z_max - z (softmax) in steps of
 * 2^-link_table_shift, saturated at its last entry. A Python simulation (edgeseq.export.quantize) is
 * bit-identical to this file; the tests compare the two on host and emulated Cortex-M0/M3.
 *
 * COST OF A PUSH completing prefix j: d_j * P int16 x int16 -> int32 multiply-adds (one MULS and one
 * ADDS each on ARMv6-M), then the link: sigmoid one table read; softmax P table reads and P 32-bit
 * unsigned divisions (libgcc's __aeabi_uidiv on cores without a divider).
 *
 * COMMIT, READS, THREADING: exactly the float runtime's (edgeseq_runtime.h, INTERRUPT SAFETY), through
 * the shared macros of edgeseq_seqlock.h: a push computes into the unpublished slot and publishes it
 * by one counter increment; es16_current may run in an interrupt handler. All memory is the caller's:
 * an es16_state, an int16 feature buffer of n_features and an int32 work buffer of
 * es16_work_words(model) = n_outputs + 2 * n_pred words. No heap, no stdio, no libm, no globals.
 */
#ifndef EDGESEQ_RUNTIME_I16_H
#define EDGESEQ_RUNTIME_I16_H

#include <stddef.h>
#include <stdint.h>

#include "edgeseq_seqlock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when es16_model's layout changes. */
#define ES16_ABI_VERSION 1u

/* Links, status codes: the same values as the float runtime's es_link / es_status. */
#define ES16_LINK_IDENTITY 0u
#define ES16_LINK_SIGMOID 1u
#define ES16_LINK_SOFTMAX 2u

typedef enum {
    ES16_OK = 0,
    ES16_DONE = 1,
    ES16_ERR_NULL = -1,
    ES16_ERR_WRONG_GROUP = -2,
    ES16_ERR_WRONG_LENGTH = -3,
    ES16_ERR_FINISHED = -5,
    ES16_ERR_BAD_MODEL = -6,  /* inconsistent descriptor, other ABI version, or the headroom bound fails */
    ES16_ERR_BUFFER = -7,
    ES16_ERR_NOT_INIT = -8,
    ES16_ERR_BUDGET = -10     /* the budget's bit pattern is a NaN or a negative number */
} es16_status;

typedef struct es16_model {
    uint32_t abi_version;            /* ES16_ABI_VERSION */
    const char *name;
    uint32_t link;                   /* ES16_LINK_* */
    uint32_t n_groups;               /* J */
    uint32_t n_outputs;              /* P */
    uint32_t n_pred;                 /* P, or 2 for sigmoid */
    uint32_t n_features;             /* features of the full prefix */
    const uint32_t *group_index;     /* [J] original group index, sequence order */
    const uint32_t *group_dim;       /* [J] */
    const uint64_t *cum_cost_bits;   /* [J+1] IEEE-754 binary64 bit patterns of the cumulative costs */
    const int16_t *const *coef;      /* [J+1] coef[j]: d_j x P row-major; coef[0] may be NULL */
    const int32_t *intercept;        /* [(J+1) x P] */
    const int32_t *weight_shift;     /* [J+1] S_j: z = z_q * 2^-S_j */
    const int16_t *link_table;       /* sigmoid / softmax table; NULL for identity */
    uint32_t link_table_len;
    int32_t link_table_shift;        /* table step 2^-link_table_shift */
    const int32_t *feature_shift;    /* [n_features] s_i (what the extractor needs; not read here) */
    const int32_t *feature_offset;   /* [n_features] O_i */
    const char *const *group_name;   /* [J] */
    const char *const *output_name;  /* [n_pred] */
} es16_model;

/* Runtime state; opaque, public only for static allocation. */
typedef struct es16_state {
    const es16_model *model;
    int16_t *x;               /* [n_features] pushed values, sequence order */
    int32_t *z;               /* [n_outputs] */
    volatile int32_t *slot;   /* [2 * n_pred] */
    uint32_t next;
    uint32_t filled;
    volatile uint32_t slot_prefix[2];
    volatile int32_t slot_label[2];
    volatile uint32_t seq;
    uint32_t magic;
} es16_state;

typedef struct es16_group_info {
    uint32_t position;
    uint32_t group;
    uint32_t dim;
    uint64_t cum_cost_bits;   /* bit pattern of the cumulative cost once this group is pushed: start it
                                 only if cum_cost_bits <= the budget's bit pattern (budget >= +0.0) */
    const char *name;
} es16_group_info;

/* int32 words of work buffer: n_outputs + 2 * n_pred; 0 if model is NULL or the sum overflows. */
size_t es16_work_words(const es16_model *model);

/* Validate the model (sizes, shifts, the int32 headroom bound of every prefix), bind the buffers,
   commit prefix 0. */
es16_status es16_init(es16_state *state, const es16_model *model, int16_t *x, size_t x_len, int32_t *work,
                      size_t work_len);
es16_status es16_next_group(const es16_state *state, es16_group_info *info);
/* Push the group's int16 values (n = its dimension); commits the new prefix. On error nothing changes. */
es16_status es16_push(es16_state *state, uint32_t group, const int16_t *values, size_t n);
/* Copy the last committed prediction (n_pred int32), its prefix and label; safe from an interrupt. */
es16_status es16_current(const es16_state *state, int32_t *out, uint32_t *prefix, int32_t *label);
es16_status es16_reset(es16_state *state);
/* The budget rule on bit patterns: *prefix = last j with cum_cost_bits[j] <= budget_bits. budget_bits
   is the binary64 bit pattern of the budget (-0.0 counts as +0.0); NaN or negative: ES16_ERR_BUDGET. */
es16_status es16_prefix_for_budget(const es16_model *model, uint64_t budget_bits, uint32_t *prefix);
/* S_j of prefix j (identity models: the real prediction is out * 2^-S_j); 0 for a bad argument. */
int32_t es16_output_shift(const es16_model *model, uint32_t prefix);

#ifdef __cplusplus
}
#endif

#endif /* EDGESEQ_RUNTIME_I16_H */
