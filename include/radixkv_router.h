/*
 * radixkv_router.h -- kept so that code written against 0.1's two headers
 * still builds: the router's API is include/radixkv/router.h, and
 * <radixkv.h> includes it.
 */
#ifndef RADIXKV_ROUTER_COMPAT_H
#define RADIXKV_ROUTER_COMPAT_H
#include "radixkv/router.h"
#endif
