/*
 * tests/support/test_workload.c -- see test_workload.h.
 */
#include "tests/support/test_workload.h"

#include <criterion/criterion.h>

#include "tests/support/test_util.h"

void rkv_test_agentic(rkv_workload *wl, uint32_t sessions, uint32_t turns_max,
                      const char *name)
{
    rkv_agentic_config ac;
    rkv_agentic_config_init(&ac);
    ac.sessions = sessions;
    ac.turns_max = turns_max;
    rkv_workload_init(wl);
    cr_assert_eq(rkv_workload_agentic(wl, &ac, rkv_test_seed(name)), RKV_OK);
}
