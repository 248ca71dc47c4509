/*
 * Vector table and reset handler of the bare-metal tests (qemu mps2-an385 / mps2-an386, and the
 * microbit's Cortex-M0 built with -DES_STACK_TOP=0x20004000u: the top of its 16 KB RAM).
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

#ifndef ES_STACK_TOP
#define ES_STACK_TOP 0x00400000u /* top of the MPS2 boards' 4 MB SSRAM */
#endif

/* Initial stack pointer, then the 15 system exceptions (index 15 = SysTick). */
__attribute__((section(".vectors"), used)) static const es_vector vectors[16] = {
    (es_vector)ES_STACK_TOP, /* initial stack pointer */
    es_reset_handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler,
    0, 0, 0, 0, fault_handler, fault_handler, 0, fault_handler, es_systick_handler};
