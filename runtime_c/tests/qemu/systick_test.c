/*
 * Interrupt test on an emulated Cortex-M: the SysTick exception reads es_current while the main
 * loop pushes groups, and checks every read bit for bit against the committed prediction of the
 * prefix it reports -- a torn mix of two commits, or a half-written slot, counts as torn.
 *
 * Build for qemu (mps2-an385/an386) with startup.c, mps2.ld, -DES_PREFIX=<c prefix>
 * -I<model dir>; run as `systick_test PERIOD PASSES` (SysTick reload in core cycles, anytime
 * passes over one feature row). Prints "reads R during_push D torn T passes P" and exits 1 when
 * T > 0 or no read landed inside a push (the test would then prove nothing).
 */
#include <stdio.h>
#include <stdlib.h>

#include "../read_check.h"
#include "startup.h"

void es_systick_handler(void)
{
    read_and_check();
}

int main(int argc, char **argv)
{
    const unsigned long period = argc >= 2 ? strtoul(argv[1], NULL, 10) : 1009u;
    const unsigned long passes = argc >= 3 ? strtoul(argv[2], NULL, 10) : 200u;
    unsigned long i;
    if (setup_reference() != 0) {
        printf("es_init or push failed\n");
        return 2;
    }
    ES_SYST_RVR = (uint32_t)period - 1u;
    ES_SYST_CVR = 0u;
    ES_SYST_CSR = 7u; /* enable, interrupt, core clock */
    for (i = 0; i < passes; ++i) {
        if (one_pass(0) != 0) {
            printf("push failed\n");
            return 2;
        }
    }
    ES_SYST_CSR = 0u;
    printf("reads %lu during_push %lu torn %lu passes %lu\n", (unsigned long)n_reads, (unsigned long)n_during_push,
           (unsigned long)n_torn, passes);
    return (n_torn > 0u || n_during_push == 0u) ? 1 : 0;
}
