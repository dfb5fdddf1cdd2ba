/*
 * cli/escape.h -- names from the command line and from traces, written
 * into JSON strings and SVG (XML) text so the output is always valid, even
 * when a name is not valid UTF-8.
 *
 * Each complete, valid UTF-8 sequence is copied; every other byte (a stray
 * continuation byte, an overlong form, a surrogate, a truncated sequence,
 * a code point above U+10FFFF) becomes U+FFFD, one per byte. JSON escapes
 * '"', '\\' and control bytes (\u00XX); XML escapes & < > " and replaces
 * the control bytes XML 1.0 forbids (all below 0x20 except tab, LF, CR)
 * with U+FFFD.
 */
#ifndef RKV_CLI_ESCAPE_H
#define RKV_CLI_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is invalid. */
size_t rkv_utf8_seq(const unsigned char *s, size_t n);

/* "s" with quotes, as described above. */
void rkv_json_string(FILE *f, const char *s);
/* XML character data / attribute text, as described above. */
void rkv_xml_text(FILE *f, const char *s);

#endif
