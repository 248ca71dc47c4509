/*
 * The two rules every edgeseq C runtime shares, in one place so the float runtime
 * (edgeseq_runtime.c) and the integer runtime (edgeseq_runtime_i16.c) cannot drift apart:
 *
 *  - the seqlock commit: a prediction is written into the slot that is NOT published
 *    (slot (seq + 1) & 1), then ES_SEQLOCK_PUBLISH increments seq between two release fences;
 *    ES_SEQLOCK_READ copies slot seq & 1 between two acquire fences and retries when seq moved.
 *    The memory-ordering argument is in edgeseq_runtime.h (INTERRUPT SAFETY AND MEMORY ORDERING);
 *  - the budget rule: the LAST stage j with threshold[j] <= budget (ES_LAST_AFFORDABLE), with no
 *    early exit, exactly as Python's resolve_prefix states it.
 *
 * Both are macros because the slots (float or int32) and thresholds (double or the uint64 bit
 * patterns of doubles) differ in type between the runtimes; the statements do not.
 */
#ifndef EDGESEQ_SEQLOCK_H
#define EDGESEQ_SEQLOCK_H

#include <stdint.h>

#ifndef ES_FENCE_RELEASE
#if defined(__GNUC__) && defined(__ATOMIC_RELEASE)
#define ES_FENCE_RELEASE() __atomic_thread_fence(__ATOMIC_RELEASE)
#define ES_FENCE_ACQUIRE() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#else
#define ES_FENCE_RELEASE() ((void)0)
#define ES_FENCE_ACQUIRE() ((void)0)
#endif
#endif

/* Publish the slot written at (seq + 1) & 1. Fence (1) makes the slot visible before the counter
   that publishes it; fence (2) makes the new counter visible before any later store into the slot
   it just retired (the next commit writes slot (seq + 1) & 1, which a reader that loaded the
   previous seq may still be copying; without (2) a weakly ordered core could expose those stores
   first and that reader would accept a torn copy). */
#define ES_SEQLOCK_PUBLISH(seq)                                                                    \
    do {                                                                                           \
        ES_FENCE_RELEASE(); /* (1) */                                                              \
        (seq) = (seq) + 1u;                                                                        \
        ES_FENCE_RELEASE(); /* (2) */                                                              \
    } while (0)

/* Run `copy` (statements reading slot `slot_var`) until no publish happened during it. */
#define ES_SEQLOCK_READ(seq, slot_var, copy)                                                       \
    do {                                                                                           \
        uint32_t es_before_;                                                                       \
        uint32_t es_after_;                                                                        \
        do {                                                                                       \
            es_before_ = (seq);                                                                    \
            ES_FENCE_ACQUIRE(); /* the counter before the slot it designates (pairs with (1)) */   \
            (slot_var) = es_before_ & 1u;                                                          \
            copy                                                                                   \
            ES_FENCE_ACQUIRE(); /* finish reading the slot before re-reading the counter */        \
            es_after_ = (seq);                                                                     \
        } while (es_after_ != es_before_);                                                         \
    } while (0)

/* *out = the last j < n with table[j] <= budget (0 if none): no early exit, so a hand-made table
   that is not monotone still gives Python's answer. */
#define ES_LAST_AFFORDABLE(table, n, budget, out)                                                  \
    do {                                                                                           \
        uint32_t es_j_;                                                                            \
        uint32_t es_best_ = 0u;                                                                    \
        for (es_j_ = 0u; es_j_ < (n); ++es_j_) {                                                   \
            if ((table)[es_j_] <= (budget)) {                                                      \
                es_best_ = es_j_;                                                                  \
            }                                                                                      \
        }                                                                                          \
        *(out) = es_best_;                                                                         \
    } while (0)

#endif /* EDGESEQ_SEQLOCK_H */
