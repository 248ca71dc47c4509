/* The CHECK of the C status tests (status_test.c, status_i16.c): report a failed condition with its
   line and count it; main returns non-zero when `failures` is. Include once per test program. */
#ifndef ES_TEST_CHECK_H
#define ES_TEST_CHECK_H

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                      \
    do {                                                                 \
        if (!(cond)) {                                                   \
            printf("FAIL line %d: %s\n", __LINE__, #cond);               \
            ++failures;                                                  \
        }                                                                \
    } while (0)

#endif /* ES_TEST_CHECK_H */
