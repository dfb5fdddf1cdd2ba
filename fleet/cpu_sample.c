/*
 * fleet/cpu_sample.c -- rkv_cpu_sample (fleet/cpu_sample.h): a call is
 * picked when a xorshift64 draw is 0 modulo `every`.
 */
#include "fleet/cpu_sample.h"

void rkv_cpu_sample_init(rkv_cpu_sample *s, uint32_t every, uint64_t seed)
{
    s->every = every ? every : 1;
    s->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
    s->calls = s->timed = s->timed_ns = 0;
}

int rkv_cpu_sample_pick(rkv_cpu_sample *s)
{
    s->calls++;
    if (s->every == 1)
        return 1;
    uint64_t x = s->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s->rng = x;
    return x % s->every == 0;
}

void rkv_cpu_sample_add(rkv_cpu_sample *s, uint64_t ns)
{
    s->timed++;
    s->timed_ns += ns;
}

double rkv_cpu_sample_total_ns(const rkv_cpu_sample *s)
{
    if (!s->timed)
        return 0;
    return (double)s->timed_ns / (double)s->timed * (double)s->calls;
}
