/*
 * Status codes and invariants of the integer runtime (edgeseq_runtime_i16.c) on hand-built models:
 * every error path returns its documented code and leaves the state unchanged, the budget rule on
 * bit patterns handles -0.0, +inf, NaN and negative budgets, descriptors that fail the headroom
 * bound or carry a negative table entry are refused, and pushes at the int16 limits of a model at
 * the headroom bound compute the exact sum (run under UBSan, which would report a signed overflow).
 * Exit status 0 and "status_i16 ok" when every check passes.
 */
#include <stdio.h>
#include <string.h>

#include "edgeseq_runtime_i16.h"

#include "check.h"

/* identity, J = 2: original group 1 (dim 2), then group 0 (dim 1); costs 0, 1.5, 2.5 */
static const uint32_t g_index[] = {1u, 0u};
static const uint32_t g_dim[] = {2u, 1u};
static const uint64_t g_cost[] = {UINT64_C(0), UINT64_C(0x3FF8000000000000), UINT64_C(0x4004000000000000)};
static const int16_t g_coef1[] = {2, -1};
static const int16_t g_coef2[] = {1, 1, 3};
static const int16_t *const g_coef[] = {0, g_coef1, g_coef2};
static const int32_t g_icpt[] = {1, 2, -3};
static const int32_t g_shift[] = {0, 0, 4};
static const char *const g_gname[] = {"b", "a"};
static const char *const g_oname[] = {"y"};
static const es16_model base = {ES16_ABI_VERSION, "hand", ES16_LINK_IDENTITY, 2u, 1u, 1u, 3u, g_index, g_dim, g_cost,
                                g_coef, g_icpt, g_shift, NULL, 0u, 0, NULL, NULL, g_gname, g_oname,
                                ES16_KIND_LINEAR, NULL};

/* at the bound: 2 * 32767 * 32768 + 65535 = 2^31 - 1 */
static const uint32_t t_index[] = {0u};
static const uint32_t t_dim[] = {2u};
static const int16_t t_coef1[] = {32767, 32767};
static const int16_t *const t_coef[] = {0, t_coef1};
static const int32_t t_icpt[] = {0, 65535};
static const int32_t t_shift[] = {0, 0};
static const char *const t_gname[] = {"g"};
static const es16_model tight = {ES16_ABI_VERSION, "tight", ES16_LINK_IDENTITY, 1u, 1u, 1u, 2u, t_index, t_dim, NULL,
                                 t_coef, t_icpt, t_shift, NULL, 0u, 0, NULL, NULL, t_gname, g_oname,
                                 ES16_KIND_LINEAR, NULL};

static int16_t x[4];
static int32_t work[8];

static int32_t value(const es16_state *st, uint32_t *prefix)
{
    int32_t out[2] = {0, 0};
    CHECK(es16_current(st, out, prefix, NULL) == ES16_OK);
    return out[0];
}

static uint32_t rule(const es16_model *m, uint64_t bits)
{
    uint32_t p = 99u;
    CHECK(es16_prefix_for_budget(m, bits, &p) == ES16_OK);
    return p;
}

int main(void)
{
    es16_state st;
    es16_model m;
    es16_group_info g;
    uint32_t prefix = 99u;
    const int16_t v1[] = {3, 4};
    const int16_t v0[] = {5};
    const int16_t lo[] = {-32768, -32768};
    const int16_t hi[] = {32767, 32767};
    int16_t table[2] = {3, -1};
    int32_t icpt_big[3] = {1, 2, 65536};
    const int16_t full[] = {32767, 32767, 32767};
    const int16_t *const full_coef[] = {0, g_coef1, full};

    memset(&st, 0, sizeof st);
    CHECK(es16_current(&st, NULL, &prefix, NULL) == ES16_ERR_NOT_INIT);
    CHECK(es16_init(NULL, &base, x, 4u, work, 8u) == ES16_ERR_NULL);
    CHECK(es16_init(&st, &base, x, 2u, work, 8u) == ES16_ERR_BUFFER);
    CHECK(es16_init(&st, &base, x, 4u, work, 2u) == ES16_ERR_BUFFER);
    m = base;
    m.abi_version = 99u;
    CHECK(es16_init(&st, &m, x, 4u, work, 8u) == ES16_ERR_BAD_MODEL);
    m = base; /* weights 3 x 32767 at the last prefix: 3 * 32767 * 32768 > 2^31 - 1 */
    m.coef = full_coef;
    CHECK(es16_init(&st, &m, x, 4u, work, 8u) == ES16_ERR_BAD_MODEL);
    m = base; /* |intercept| + 32768 * (1 + 1 + 3) fits, but not with the intercept at INT32_MAX */
    icpt_big[2] = 2147483647;
    m.intercept = icpt_big;
    CHECK(es16_init(&st, &m, x, 4u, work, 8u) == ES16_ERR_BAD_MODEL);
    m = base;
    m.link = ES16_LINK_SIGMOID; /* needs a table and 2 predictions */
    CHECK(es16_init(&st, &m, x, 4u, work, 8u) == ES16_ERR_BAD_MODEL);
    m.n_pred = 2u;
    m.link_table = table;
    m.link_table_len = 2u;
    CHECK(es16_init(&st, &m, x, 4u, work, 8u) == ES16_ERR_BAD_MODEL); /* a negative entry */
    table[1] = 0;
    CHECK(es16_init(&st, &m, x, 4u, work, 8u) == ES16_OK);

    CHECK(es16_init(&st, &base, x, 4u, work, 8u) == ES16_OK);
    CHECK(value(&st, &prefix) == 1 && prefix == 0u);
    CHECK(es16_next_group(&st, &g) == ES16_OK && g.group == 1u && g.dim == 2u && g.cum_cost_bits == g_cost[1]);
    CHECK(es16_push(&st, 0u, v1, 2u) == ES16_ERR_WRONG_GROUP);
    CHECK(es16_push(&st, 1u, v1, 1u) == ES16_ERR_WRONG_LENGTH);
    CHECK(es16_push(&st, 1u, NULL, 2u) == ES16_ERR_NULL);
    CHECK(value(&st, &prefix) == 1 && prefix == 0u); /* unchanged */
    CHECK(es16_push(&st, 1u, v1, 2u) == ES16_OK);
    CHECK(value(&st, &prefix) == 2 + 2 * 3 - 4 && prefix == 1u);
    CHECK(es16_push(&st, 0u, v0, 1u) == ES16_OK);
    CHECK(value(&st, &prefix) == -3 + 3 + 4 + 3 * 5 && prefix == 2u);
    CHECK(es16_push(&st, 0u, v0, 1u) == ES16_ERR_FINISHED);
    CHECK(es16_next_group(&st, &g) == ES16_DONE);
    CHECK(es16_output_shift(&base, 2u) == 4 && es16_output_shift(&base, 3u) == 0);
    CHECK(es16_reset(&st) == ES16_OK && value(&st, &prefix) == 1 && prefix == 0u);

    /* the budget rule on bit patterns */
    CHECK(rule(&base, UINT64_C(0)) == 0u);
    CHECK(rule(&base, UINT64_C(0x8000000000000000)) == 0u);  /* -0.0 */
    CHECK(rule(&base, UINT64_C(0x3FF7FFFFFFFFFFFF)) == 0u);  /* just below 1.5 */
    CHECK(rule(&base, UINT64_C(0x3FF8000000000000)) == 1u);  /* 1.5 exactly */
    CHECK(rule(&base, UINT64_C(0x4004000000000000)) == 2u);  /* 2.5 */
    CHECK(rule(&base, UINT64_C(0x7FF0000000000000)) == 2u);  /* +inf */
    prefix = 99u;
    CHECK(es16_prefix_for_budget(&base, UINT64_C(0x7FF8000000000000), &prefix) == ES16_ERR_BUDGET && prefix == 99u);
    CHECK(es16_prefix_for_budget(&base, UINT64_C(0xBFF0000000000000), &prefix) == ES16_ERR_BUDGET); /* -1.0 */
    CHECK(es16_prefix_for_budget(&base, UINT64_C(0x8000000000000001), &prefix) == ES16_ERR_BUDGET); /* -denormal */
    CHECK(es16_prefix_for_budget(&base, UINT64_C(0xFFF0000000000000), &prefix) == ES16_ERR_BUDGET); /* -inf */
    CHECK(rule(&tight, UINT64_C(0)) == 1u); /* no costs: every stage is free */

    /* the headroom bound is tight and holds at the int16 limits */
    CHECK(es16_init(&st, &tight, x, 4u, work, 8u) == ES16_OK);
    CHECK(es16_push(&st, 0u, lo, 2u) == ES16_OK);
    CHECK(value(&st, &prefix) == 65535 - 2 * 32767 * 32768 && prefix == 1u);
    CHECK(es16_reset(&st) == ES16_OK && es16_push(&st, 0u, hi, 2u) == ES16_OK);
    CHECK(value(&st, &prefix) == 65535 + 2 * 32767 * 32767);

    if (failures != 0) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("status_i16 ok\n");
    return 0;
}
