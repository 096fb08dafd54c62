/*
 * startup.c — vector table and reset handler for the Cortex-M smoke test.
 *
 * Reset copies .data from flash to RAM, turns the FPU on (the code is built
 * with -mfloat-abi=hard, so the first float instruction would fault with it
 * off) and enters newlib's rdimon crt0, which zeroes .bss, opens the
 * semihosting stdio, runs main and passes its return to exit. A fault ends
 * the run through semihosting instead of hanging the simulator.
 */
#include <stdint.h>
#include <string.h>

extern uint32_t __data_load__[], __data_start__[], __data_end__[];
extern char __stack[];
void _mainCRTStartup(void);
void Reset_Handler(void);

#define CPACR (*(volatile uint32_t *)0xE000ED88u)

void Reset_Handler(void)
{
    memcpy(__data_start__, __data_load__, (size_t)((char *)__data_end__ - (char *)__data_start__));
    CPACR |= 0xFu << 20; /* CP10, CP11: full access */
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    _mainCRTStartup();
    for (;;) {}
}

/* SYS_EXIT with ADP_Stopped_RunTimeErrorUnknown: QEMU exits with status 1. */
static void fault_handler(void)
{
    static const char msg[] = "cortex-m: fault\n";
    register uint32_t r0 __asm__("r0") = 0x04; /* SYS_WRITE0 */
    register const void *r1 __asm__("r1") = msg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    register uint32_t e0 __asm__("r0") = 0x18;
    register uint32_t e1 __asm__("r1") = 0x20023;
    __asm__ volatile("bkpt 0xab" : "+r"(e0) : "r"(e1) : "memory");
    for (;;) {}
}

struct vectors {
    void *stack;
    void (*handler[15])(void);
};

__attribute__((section(".vectors"), used)) static const struct vectors vectors = {
    __stack,
    {Reset_Handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler}
};
