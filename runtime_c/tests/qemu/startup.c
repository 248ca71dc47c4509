/*
 * Vector table and reset handler of the bare-metal tests (qemu mps2-an385 / mps2-an386).
 * Reset enables the FPU when the build uses one (Cortex-M4F), then enters newlib's _start;
 * faults end the run through semihosting with a message, so a test never hangs on a fault.
 * The SysTick entry calls es_systick_handler, which a test defines (a weak default returns).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "startup.h"

extern void _start(void);

#define CPACR (*(volatile uint32_t *)0xE000ED88u)

void es_reset_handler(void);
void es_reset_handler(void)
{
#if defined(__ARM_FP)
    CPACR |= 0xFu << 20; /* full access to CP10 and CP11: the FPU */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    _start();
    for (;;) {
    }
}

static void fault_handler(void)
{
    printf("FAULT\n");
    exit(3);
}

__attribute__((weak)) void es_systick_handler(void)
{
}

typedef void (*es_vector)(void);

/* Initial stack pointer, then the 15 system exceptions (index 15 = SysTick). */
__attribute__((section(".vectors"), used)) static const es_vector vectors[16] = {
    (es_vector)0x00400000u, /* top of the 4 MB SSRAM */
    es_reset_handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler,
    0, 0, 0, 0, fault_handler, fault_handler, 0, fault_handler, es_systick_handler};
