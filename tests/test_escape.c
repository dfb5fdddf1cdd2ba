/*
 * tests/test_escape.c -- JSON and XML escaping of names (cli/escape.c):
 * valid UTF-8 passes through, every invalid byte becomes U+FFFD, so the
 * output is valid JSON / XML whatever a file is called.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/escape.h"

static char *render(void (*fn)(FILE *, const char *), const char *s)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert_not_null(f);
    fn(f, s);
    fclose(f);
    return buf;
}

static void assert_valid_utf8(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = rkv_utf8_seq((const unsigned char *)s + i, n - i);
        cr_assert_gt(k, 0, "invalid UTF-8 at byte %zu of '%s'", i, s);
        i += k;
    }
}

Test(escape, json_valid_utf8_and_specials)
{
    char *j = render(rkv_json_string, "a\"b\\c\n\x01 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    cr_assert_str_eq(j, "\"a\\\"b\\\\c\\u000a\\u0001 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
    free(j);
}

Test(escape, json_invalid_bytes_become_fffd)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"\xff", "\"\\ufffd\""},
        {"a\xfe\xff" "b", "\"a\\ufffd\\ufffdb\""},
        {"\xc0\x80", "\"\\ufffd\\ufffd\""},          /* overlong NUL */
        {"\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\""}, /* surrogate */
        {"\xe2\x82", "\"\\ufffd\\ufffd\""},          /* truncated */
        {"\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""}, /* > U+10FFFF */
        {"\x80x", "\"\\ufffdx\""},                   /* stray continuation */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *j = render(rkv_json_string, cases[i].in);
        cr_assert_str_eq(j, cases[i].out, "case %zu", i);
        assert_valid_utf8(j);
        free(j);
    }
}

Test(escape, xml_escapes_and_repairs)
{
    char *x = render(rkv_xml_text, "<a & \"b\"> \xff\x01\t\xc3\xa9");
    cr_assert_str_eq(x, "&lt;a &amp; &quot;b&quot;&gt; \xef\xbf\xbd\xef\xbf\xbd\t\xc3\xa9");
    assert_valid_utf8(x);
    free(x);
}
