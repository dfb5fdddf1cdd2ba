/*
 * retain/evict_names.c -- the names of the eviction policies
 * (rkv_evict_policy): one table, used by the command line (--evict-policy)
 * and by anyone who reads a policy from a configuration.
 *
 * Invariant: the table has one row per rkv_evict_policy value, and names are
 * distinct; a new policy adds its row here (nothing else parses names).
 */
#include <string.h>

#include "common/status.h"

static const struct {
    int policy;
    const char *name;
} evict_names[] = {
    {RKV_EVICT_LRU, "lru"},
    {RKV_EVICT_PRIORITY, "priority"},
    {RKV_EVICT_LEARNED, "learned"},
};
#define NUM_EVICT_NAMES (sizeof evict_names / sizeof evict_names[0])

rkv_status rkv_evict_policy_from_name(const char *name, int *out)
{
    if (!name || !out)
        return rkv_set_error(RKV_ERR_INVALID_ARG,
                             "rkv_evict_policy_from_name: NULL argument");
    for (size_t i = 0; i < NUM_EVICT_NAMES; i++)
        if (!strcmp(name, evict_names[i].name)) {
            *out = evict_names[i].policy;
            return RKV_OK;
        }
    char known[128] = "";
    for (size_t i = 0; i < NUM_EVICT_NAMES; i++) {
        if (i)
            strncat(known, i + 1 == NUM_EVICT_NAMES ? " or " : ", ",
                    sizeof known - strlen(known) - 1);
        strncat(known, evict_names[i].name, sizeof known - strlen(known) - 1);
    }
    return rkv_set_error(RKV_ERR_INVALID_ARG,
                         "unknown eviction policy '%.64s' (expected %s)", name,
                         known);
}

const char *rkv_evict_policy_name(int policy)
{
    for (size_t i = 0; i < NUM_EVICT_NAMES; i++)
        if (evict_names[i].policy == policy)
            return evict_names[i].name;
    return NULL;
}
