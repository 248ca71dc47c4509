/*
 * Status codes and invariants of the runtime on hand-built models (no generated code needed):
 * every error path returns its documented code and leaves the state unchanged.
 * Exit status 0 and "status_test ok" when every check passes.
 */
#include <stdio.h>
#include <string.h>

#include "edgeseq_runtime.h"

#include "check.h"

/* identity, J = 2 groups in sequence order: original group 1 (dim 2), then group 0 (dim 1) */
static const uint32_t g_index[] = {1u, 0u};
static const uint32_t g_dim[] = {2u, 1u};
static const double g_cost[] = {0.0, 1.5, 2.5};
static const float g_coef1[] = {2.0f, -1.0f};
static const float g_coef2[] = {1.0f, 1.0f, 3.0e38f};
static const float *const g_coef[] = {0, g_coef1, g_coef2};
static const float g_icpt[] = {0.5f, 1.0f, -1.0f};
static const char *const g_gname[] = {"b", "a"};
static const char *const g_oname[] = {"y"};
static const es_model base = {ES_ABI_VERSION, "hand", ES_LINK_IDENTITY, 2u, 1u, 1u, 3u,
                              g_index, g_dim, g_cost, g_coef, g_icpt, g_gname, g_oname, ES_KIND_LINEAR, NULL, NULL};

static float current_value(const es_state *st, uint32_t *prefix)
{
    float out[2] = {0.0f, 0.0f};
    CHECK(es_current(st, out, prefix, NULL) == ES_OK);
    return out[0];
}

static void test_errors(void)
{
    static float work[16];
    es_state st;
    es_group_info g;
    uint32_t prefix = 99u;
    const float ok2[2] = {1.0f, 2.0f};
    float bad[2] = {1.0f, 0.0f};
    union { uint32_t u; float f; } nan_bits, inf_bits;
    nan_bits.u = 0x7fc00000u;
    inf_bits.u = 0xff800000u;

    memset(&st, 0, sizeof st);
    CHECK(es_push(&st, 1u, ok2, 2u) == ES_ERR_NOT_INIT);
    CHECK(es_current(&st, bad, &prefix, NULL) == ES_ERR_NOT_INIT);
    CHECK(es_next_group(&st, &g) == ES_ERR_NOT_INIT);
    CHECK(es_reset(&st) == ES_ERR_NOT_INIT);
    CHECK(es_init(NULL, &base, work, 16u) == ES_ERR_NULL);
    CHECK(es_init(&st, NULL, work, 16u) == ES_ERR_NULL);
    CHECK(es_init(&st, &base, NULL, 16u) == ES_ERR_NULL);
    CHECK(es_work_floats(&base) == 3u + 1u + 2u);
    CHECK(es_init(&st, &base, work, 5u) == ES_ERR_BUFFER);
    CHECK(es_init(&st, &base, work, 6u) == ES_OK);

    CHECK(current_value(&st, &prefix) == 0.5f && prefix == 0u);
    CHECK(es_next_group(&st, NULL) == ES_ERR_NULL);
    CHECK(es_next_group(&st, &g) == ES_OK);
    CHECK(g.position == 0u && g.group == 1u && g.dim == 2u && g.cum_cost == 1.5 && strcmp(g.name, "b") == 0);
    CHECK(es_push(&st, 0u, ok2, 2u) == ES_ERR_WRONG_GROUP);
    CHECK(es_push(&st, 1u, ok2, 1u) == ES_ERR_WRONG_LENGTH);
    CHECK(es_push(&st, 1u, ok2, 3u) == ES_ERR_WRONG_LENGTH);
    CHECK(es_push(&st, 1u, NULL, 2u) == ES_ERR_NULL);
    CHECK(es_push(NULL, 1u, ok2, 2u) == ES_ERR_NULL);
    bad[1] = nan_bits.f;
    CHECK(es_push(&st, 1u, bad, 2u) == ES_ERR_NOT_FINITE);
    bad[1] = inf_bits.f;
    CHECK(es_push(&st, 1u, bad, 2u) == ES_ERR_NOT_FINITE);
    CHECK(current_value(&st, &prefix) == 0.5f && prefix == 0u); /* nothing committed */
    CHECK(es_current(NULL, bad, &prefix, NULL) == ES_ERR_NULL);

    CHECK(es_push(&st, 1u, ok2, 2u) == ES_OK);
    CHECK(current_value(&st, &prefix) == 1.0f + 2.0f * 1.0f - 1.0f * 2.0f && prefix == 1u);
    CHECK(es_prefix(&st) == 1u);
    CHECK(es_next_group(&st, &g) == ES_OK && g.group == 0u && g.position == 1u);
    /* 3e38 * 10 overflows float: refused, prefix 1 stays committed, a finite retry then works */
    {
        const float huge[1] = {10.0f};
        const float small[1] = {1.0e-38f};
        CHECK(es_push(&st, 0u, huge, 1u) == ES_ERR_OVERFLOW);
        CHECK(current_value(&st, &prefix) == 1.0f && prefix == 1u);
        CHECK(es_push(&st, 0u, small, 1u) == ES_OK);
        float v;
        prefix = 0u;
        v = current_value(&st, &prefix) - 5.0f; /* -1 + 1*1 + 1*2 + 3e38 * 1e-38 */
        CHECK(v < 1e-5f && v > -1e-5f && prefix == 2u);
        CHECK(es_next_group(&st, &g) == ES_DONE);
        CHECK(es_push(&st, 0u, small, 1u) == ES_ERR_FINISHED);
    }
    CHECK(es_reset(&st) == ES_OK);
    CHECK(current_value(&st, &prefix) == 0.5f && prefix == 0u);
    CHECK(es_current(&st, NULL, &prefix, NULL) == ES_OK && prefix == 0u);
}

static void test_bad_models(void)
{
    static float work[16];
    es_state st;
    es_model m;
    uint32_t dims_short[2] = {2u, 0u};
    m = base;
    m.abi_version = ES_ABI_VERSION + 1u;
    CHECK(es_init(&st, &m, work, 16u) == ES_ERR_BAD_MODEL);
    /* a failed init leaves the state unusable rather than half-initialised */
    CHECK(es_reset(&st) == ES_ERR_NOT_INIT);
    m = base;
    m.link = (es_link)7;
    CHECK(es_init(&st, &m, work, 16u) == ES_ERR_BAD_MODEL);
    m = base;
    m.n_features = 4u;
    CHECK(es_init(&st, &m, work, 16u) == ES_ERR_BAD_MODEL);
    m = base;
    m.group_dim = dims_short;
    CHECK(es_init(&st, &m, work, 16u) == ES_ERR_BAD_MODEL);
    m = base;
    m.link = ES_LINK_SIGMOID; /* needs n_pred == 2 */
    CHECK(es_init(&st, &m, work, 16u) == ES_ERR_BAD_MODEL);
    m = base;
    m.n_outputs = 0u;
    CHECK(es_init(&st, &m, work, 16u) == ES_ERR_BAD_MODEL);
}

static void test_links(void)
{
    /* sigmoid: z = intercept; extreme z must give exact 0/1 without NaN, labels by z > 0 */
    static const float icpt[] = {-200.0f};
    static const float *const coef[] = {0};
    static const char *const onames[] = {"no", "yes"};
    static float work[16];
    es_model m = {ES_ABI_VERSION, "sig", ES_LINK_SIGMOID, 0u, 1u, 2u, 0u,
                  g_index, g_dim, g_cost, coef, icpt, g_gname, onames, ES_KIND_LINEAR, NULL, NULL};
    es_state st;
    float out[4];
    int32_t label = 9;
    CHECK(es_init(&st, &m, work, 16u) == ES_OK);
    CHECK(es_current(&st, out, NULL, &label) == ES_OK);
    CHECK(out[0] == 1.0f && out[1] >= 0.0f && out[1] < 1e-30f && label == 0);
    {
        /* softmax with one huge logit: subtracting the max keeps it finite */
        static const float icpt3[] = {1.0e30f, 0.0f, -1.0e30f};
        static const char *const on3[] = {"a", "b", "c"};
        es_model s3 = {ES_ABI_VERSION, "soft", ES_LINK_SOFTMAX, 0u, 3u, 3u, 0u,
                       g_index, g_dim, g_cost, coef, icpt3, g_gname, on3, ES_KIND_LINEAR, NULL, NULL};
        CHECK(es_init(&st, &s3, work, 16u) == ES_OK);
        CHECK(es_current(&st, out, NULL, &label) == ES_OK);
        CHECK(out[0] == 1.0f && out[1] == 0.0f && out[2] == 0.0f && label == 0);
    }
}

static volatile double zero = 0.0; /* volatile: NaN and inf made at run time, no constant folding */

static void test_budget(void)
{
    uint32_t j = 99u;
    CHECK(es_prefix_for_budget(NULL, 1.0, &j) == ES_ERR_NULL);
    CHECK(es_prefix_for_budget(&base, 1.0, NULL) == ES_ERR_NULL);
    CHECK(es_prefix_for_budget(&base, -1.0, &j) == ES_ERR_BUDGET && j == 99u);
    CHECK(es_prefix_for_budget(&base, 0.0 / zero, &j) == ES_ERR_BUDGET && j == 99u);
    CHECK(es_prefix_for_budget(&base, 0.0, &j) == ES_OK && j == 0u);
    CHECK(es_prefix_for_budget(&base, 1.4999999999999998, &j) == ES_OK && j == 0u);
    CHECK(es_prefix_for_budget(&base, 1.5, &j) == ES_OK && j == 1u);
    CHECK(es_prefix_for_budget(&base, 2.5, &j) == ES_OK && j == 2u);
    CHECK(es_prefix_for_budget(&base, 1.0 / zero, &j) == ES_OK && j == 2u);
}

int main(void)
{
    test_budget();
    test_errors();
    test_bad_models();
    test_links();
    if (failures) {
        printf("status_test: %d failures\n", failures);
        return 1;
    }
    printf("status_test ok\n");
    return 0;
}
