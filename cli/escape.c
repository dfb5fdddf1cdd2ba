/*
 * cli/escape.c -- JSON and XML escaping with UTF-8 repair (see escape.h).
 * Pure functions of their input; nothing is allocated.
 */
#include "cli/escape.h"

#include <string.h>

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

size_t rkv_utf8_seq(const unsigned char *s, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; /* no overlong forms */
        else if (c == 0xed)
            hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f; /* nothing above U+10FFFF */
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

void rkv_json_string(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t n = strlen((const char *)s);
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = rkv_utf8_seq(s + i, n - i);
        if (k == 0) {
            fputs("\\ufffd", f);
            i++;
            continue;
        }
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fwrite(s + i, 1, k, f);
        i += k;
    }
    fputc('"', f);
}

void rkv_xml_text(FILE *f, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t n = strlen((const char *)s);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = rkv_utf8_seq(s + i, n - i);
        if (k == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r')) {
            fputs(replacement, f);
            i++;
            continue;
        }
        switch (c) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fwrite(s + i, 1, k, f);
        }
        i += k;
    }
}
