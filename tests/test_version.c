/*
 * tests/test_version.c -- rkv_version() is the version of CMake's
 * project(VERSION), the one source of truth, and agrees with the
 * RKV_VERSION_* macros of the header a program compiles against.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "radixkv.h"

Test(version, macros_and_function_agree)
{
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", RKV_VERSION_MAJOR, RKV_VERSION_MINOR,
             RKV_VERSION_PATCH);
    cr_assert_str_eq(rkv_version(), want);
    cr_assert_str_eq(RKV_VERSION_STRING, want);
}

Test(version, comes_from_cmake_project_version)
{
    FILE *f = fopen(RKV_SOURCE_DIR "/CMakeLists.txt", "r");
    cr_assert_not_null(f);
    char line[512], found[64] = "";
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "project(radixkv VERSION ");
        if (p) {
            cr_assert_eq(sscanf(p, "project(radixkv VERSION %63[0-9.]", found), 1);
            break;
        }
    }
    fclose(f);
    cr_assert_str_neq(found, "", "project(radixkv VERSION x.y.z) in CMakeLists.txt");
    cr_assert_str_eq(rkv_version(), found);
}
