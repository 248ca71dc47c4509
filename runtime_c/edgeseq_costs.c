/* edgeseq device cost measurement; see edgeseq_costs.h for the contract. */
#include "edgeseq_costs.h"

static uint32_t interval(const es_clock *clock, uint32_t start)
{
    return (clock->read(clock->ctx) - start) & clock->mask;
}

/* Median of v[0..n-1] (n >= 1), sorting v in place: insertion sort, n is bounded by the caller. */
static uint32_t median(uint32_t *v, uint32_t n)
{
    uint32_t i, j;
    for (i = 1; i < n; ++i) {
        uint32_t x = v[i];
        for (j = i; j > 0 && v[j - 1] > x; --j) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
    if (n % 2u == 1u) {
        return v[n / 2u];
    }
    return (uint32_t)(((uint64_t)v[n / 2u - 1u] + (uint64_t)v[n / 2u]) / 2u);
}

static int valid_mask(uint32_t mask)
{
    return mask != 0u && (mask & (mask + 1u)) == 0u; /* 2^k - 1, k >= 1 */
}

es_costs_status es_measure_costs(uint32_t n_groups, const uint32_t *dim, es_extract_fn extract, void *extract_ctx,
                                 const es_clock *clock, uint32_t warmup, uint32_t repeats, float *features,
                                 size_t features_len, uint32_t *samples, uint32_t *cost_out, uint32_t *overhead_out,
                                 uint32_t *failed_group)
{
    uint32_t g, r;
    if (dim == NULL || extract == NULL || clock == NULL || clock->read == NULL || features == NULL ||
        samples == NULL || cost_out == NULL || overhead_out == NULL || repeats == 0u ||
        repeats > ES_COSTS_MAX_REPEATS || n_groups > ES_COSTS_MAX_GROUPS || !valid_mask(clock->mask)) {
        return ES_COSTS_BAD_ARGUMENT;
    }
    for (g = 0; g < n_groups; ++g) {
        if (dim[g] > features_len) {
            if (failed_group != NULL) {
                *failed_group = g;
            }
            return ES_COSTS_BUFFER_TOO_SMALL;
        }
    }
    for (r = 0; r < repeats; ++r) {
        samples[r] = interval(clock, clock->read(clock->ctx));
    }
    *overhead_out = median(samples, repeats);
    for (g = 0; g < n_groups; ++g) {
        for (r = 0; r < warmup; ++r) {
            extract(extract_ctx, g, features, dim[g]);
        }
        for (r = 0; r < repeats; ++r) {
            uint32_t start = clock->read(clock->ctx);
            extract(extract_ctx, g, features, dim[g]);
            samples[r] = interval(clock, start);
        }
        cost_out[g] = median(samples, repeats);
        if (cost_out[g] == 0u) {
            if (failed_group != NULL) {
                *failed_group = g;
            }
            return ES_COSTS_CLOCK_STUCK;
        }
    }
    return ES_COSTS_OK;
}

/* --- a bounded JSON writer: counts what the whole text needs, stores what fits ----------------- */
typedef struct json_out {
    char *buf;
    size_t cap;
    size_t len; /* bytes the text needs so far */
} json_out;

static void put(json_out *o, char c)
{
    if (o->len + 1u < o->cap) {
        o->buf[o->len] = c;
    }
    ++o->len;
}

static void put_text(json_out *o, const char *s)
{
    while (*s != '\0') {
        put(o, *s++);
    }
}

static void put_u32(json_out *o, uint32_t v)
{
    char digits[10];
    int n = 0;
    do {
        digits[n++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0u);
    while (n > 0) {
        put(o, digits[--n]);
    }
}

static void put_string(json_out *o, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    put(o, '"');
    for (; *s != '\0'; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            put(o, '\\');
            put(o, (char)c);
        } else if (c < 0x20u) {
            put_text(o, "\\u00");
            put(o, hex[c >> 4]);
            put(o, hex[c & 0xFu]);
        } else {
            put(o, (char)c); /* UTF-8 bytes pass through */
        }
    }
    put(o, '"');
}

size_t es_costs_json(uint32_t n_groups, const char *const *name, const uint32_t *cost, uint32_t overhead,
                     uint32_t repeats, const char *machine, const char *unit, char *buf, size_t cap)
{
    json_out o;
    uint32_t g;
    if (name == NULL || cost == NULL || machine == NULL || unit == NULL || (buf == NULL && cap > 0u)) {
        return 0u;
    }
    for (g = 0; g < n_groups; ++g) {
        if (name[g] == NULL) {
            return 0u;
        }
    }
    o.buf = buf;
    o.cap = cap;
    o.len = 0u;
    put_text(&o, "{\"format\":\"edgeseq-device-costs\",\"version\":1,\"machine\":");
    put_string(&o, machine);
    put_text(&o, ",\"unit\":");
    put_string(&o, unit);
    put_text(&o, ",\"repeats\":");
    put_u32(&o, repeats);
    put_text(&o, ",\"overhead\":");
    put_u32(&o, overhead);
    put_text(&o, ",\"groups\":[");
    for (g = 0; g < n_groups; ++g) {
        put_text(&o, g == 0u ? "{\"name\":" : ",{\"name\":");
        put_string(&o, name[g]);
        put_text(&o, ",\"median\":");
        put_u32(&o, cost[g]);
        put(&o, '}');
    }
    put_text(&o, "]}");
    if (cap > 0u) {
        buf[o.len < cap ? o.len : cap - 1u] = '\0';
    }
    return o.len;
}
