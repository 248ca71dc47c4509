/* Hooks of the bare-metal startup (startup.c) for the qemu tests. */
#ifndef ES_QEMU_STARTUP_H
#define ES_QEMU_STARTUP_H

#include <stdint.h>

#define ES_SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define ES_SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define ES_SYST_CVR (*(volatile uint32_t *)0xE000E018u)

/* Called from the SysTick exception (define it in the test; the default does nothing). */
void es_systick_handler(void);

#endif
