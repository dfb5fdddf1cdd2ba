/*
 * common/version.c -- rkv_version(): the version this library was built
 * as (RKV_VERSION_STRING, generated from CMake's project(VERSION), so the
 * header a program compiled against and the library it runs with can be
 * compared).
 */
#include "radixkv.h"

const char *rkv_version(void)
{
    return RKV_VERSION_STRING;
}
