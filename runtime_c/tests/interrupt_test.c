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

#define ES_TEST_FLAG sig_atomic_t
#include "read_check.h"

static volatile sig_atomic_t stop = 0;

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
    double t_end;
    pthread_t th;

    if (setup_reference() != 0) {
        printf("es_init or push failed\n");
        return 2;
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
        one_pass(0);
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
