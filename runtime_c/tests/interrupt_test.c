/*
 * Interrupt test: readers call es_current while pushes are in progress; every value read must be
 * bit-identical to the committed prediction of the prefix it reports -- never a torn mix.
 *
 * Build with -DES_PREFIX=<c prefix> -I<model dir> -I<runtime dir> (POSIX; link -lpthread -lm).
 *   interrupt_test signal SECONDS   a SIGALRM timer (setitimer, 20 us) plays the interrupt handler
 *   interrupt_test thread SECONDS   a second thread reads continuously (needs the seqlock retry)
 * Prints "reads R during_push D torn T" and exits 1 when T > 0 or too few reads hit a push.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "edgeseq_select.h"

static float features[ES_N_FEATURES];
static float reference[ES_N_GROUPS + 1u][ES_N_PRED];
static int32_t reference_label[ES_N_GROUPS + 1u];
static float work[ES_WORK_FLOATS];
static es_state shared;
static volatile sig_atomic_t in_push = 0;
static volatile sig_atomic_t stop = 0;
static volatile unsigned long n_reads = 0, n_during_push = 0, n_torn = 0;

/* The read every context performs: compare bits with the reference of the reported prefix. */
static void read_and_check(void)
{
    float out[ES_N_PRED];
    uint32_t prefix = 0;
    int32_t label = 0;
    const int pushing = in_push;
    if (es_current(&shared, out, &prefix, &label) != ES_OK || prefix > ES_N_GROUPS ||
        memcmp(out, reference[prefix], sizeof out) != 0 || label != reference_label[prefix]) {
        n_torn = n_torn + 1u;
    }
    n_reads = n_reads + 1u;
    if (pushing) {
        n_during_push = n_during_push + 1u;
    }
}

static void on_alarm(int sig)
{
    (void)sig;
    read_and_check();
}

static void *reader(void *arg)
{
    (void)arg;
    while (!stop) {
        read_and_check();
    }
    return NULL;
}

/* one full anytime pass over `features` */
static void one_pass(es_state *st)
{
    es_group_info g;
    size_t off = 0;
    es_reset(st);
    while (es_next_group(st, &g) == ES_OK) {
        in_push = 1;
        es_push(st, g.group, features + off, g.dim);
        in_push = 0;
        off += g.dim;
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const int use_thread = argc >= 2 && strcmp(argv[1], "thread") == 0;
    const double seconds = argc >= 3 ? atof(argv[2]) : 0.5;
    uint32_t i;
    uint32_t state = 12345u;
    es_group_info g;
    size_t off = 0;
    double t_end;
    pthread_t th;

    for (i = 0; i < ES_N_FEATURES; ++i) { /* deterministic values of mixed sign */
        state = state * 1664525u + 1013904223u;
        features[i] = (float)((int32_t)(state >> 8) - (1 << 23)) / (float)(1 << 22);
    }
    if (es_init(&shared, &ES_MODEL, work, ES_WORK_FLOATS) != ES_OK) {
        printf("es_init failed\n");
        return 2;
    }
    es_current(&shared, reference[0], NULL, &reference_label[0]);
    for (i = 1; es_next_group(&shared, &g) == ES_OK; ++i) {
        if (es_push(&shared, g.group, features + off, g.dim) != ES_OK) {
            printf("push failed\n");
            return 2;
        }
        off += g.dim;
        es_current(&shared, reference[i], NULL, &reference_label[i]);
    }

    if (use_thread) {
        if (pthread_create(&th, NULL, reader, NULL) != 0) {
            return 2;
        }
    } else {
        struct sigaction sa;
        struct itimerval it;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alarm;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        it.it_interval.tv_sec = 0;
        it.it_interval.tv_usec = 20;
        it.it_value = it.it_interval;
        setitimer(ITIMER_REAL, &it, NULL);
    }
    t_end = now() + seconds;
    while (now() < t_end) {
        one_pass(&shared);
    }
    if (use_thread) {
        stop = 1;
        pthread_join(th, NULL);
    } else {
        struct itimerval off_timer;
        memset(&off_timer, 0, sizeof off_timer);
        setitimer(ITIMER_REAL, &off_timer, NULL);
    }
    printf("reads %lu during_push %lu torn %lu\n", (unsigned long)n_reads, (unsigned long)n_during_push,
           (unsigned long)n_torn);
    return (n_torn == 0u && n_during_push >= 20u) ? 0 : 1;
}
