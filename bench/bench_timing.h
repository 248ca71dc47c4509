/*
 * Shared by the C speed benchmarks (c_runtime_speed.c, c_trees_speed.c): a monotonic clock in ns and
 * the minimum over REPEATS interleaved repeats (the repeat least disturbed by other processes on a
 * shared machine). Include once, after defining _POSIX_C_SOURCE.
 */
#ifndef EDGESEQ_BENCH_TIMING_H
#define EDGESEQ_BENCH_TIMING_H

#include <time.h>

#define REPEATS 21

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static double minimum(const double *v)
{
    double m = v[0];
    int r;
    for (r = 1; r < REPEATS; ++r) {
        m = v[r] < m ? v[r] : m;
    }
    return m;
}

#endif /* EDGESEQ_BENCH_TIMING_H */
