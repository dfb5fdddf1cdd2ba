/*
 * tests/test_readme_examples.c -- the documents (README.md and every .md
 * in docs/) quote the example programs instead of carrying their own code, and this
 * test keeps the quotes exact.
 *
 * A quote in a document is a marker line, then a fenced C block:
 *     <!-- snippet: examples/serve_loop.c#loop -->
 *     ```c
 *     ...
 *     ```
 * The block must equal, byte for byte, the lines of that file between the
 * comment lines "ANCHOR: loop" and "ANCHOR_END: loop" (each a C comment
 * alone on its line; without #name, the whole file). The examples
 * themselves are compiled and run as tests (example_*), so what the
 * documents show builds and works. When an example changes, copy the
 * region into the document that quotes it.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG_CAP 1024

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap * 2);
            if (b == NULL)
                free(buf);
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf != NULL)
        buf[n] = '\0';
    return buf;
}

/* The line starting at p without its newline, trimmed of blanks at both
 * ends, equals s. */
static int line_is(const char *p, const char *s)
{
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(s);
    if (strncmp(p, s, n) != 0)
        return 0;
    p += n;
    while (*p == ' ' || *p == '\t' || *p == '\r')
        p++;
    return *p == '\n' || *p == '\0';
}

static const char *next_line(const char *p)
{
    const char *nl = strchr(p, '\n');
    return nl != NULL ? nl + 1 : p + strlen(p);
}

/* The anchored region of src (or all of it for an empty name): start and
 * length. 0 if the anchors are missing. */
static int find_region(const char *src, const char *name, const char **start,
                       size_t *len)
{
    if (name[0] == '\0') {
        *start = src;
        *len = strlen(src);
        return 1;
    }
    char open[128], close[128];
    snprintf(open, sizeof open, "/* ANCHOR: %s */", name);
    snprintf(close, sizeof close, "/* ANCHOR_END: %s */", name);
    const char *p = src;
    while (*p != '\0' && !line_is(p, open))
        p = next_line(p);
    if (*p == '\0')
        return 0;
    const char *b = next_line(p);
    for (p = b; *p != '\0'; p = next_line(p)) {
        if (line_is(p, close)) {
            *start = b;
            *len = (size_t)(p - b);
            return 1;
        }
    }
    return 0;
}

/* Says where a and b (lengths na, nb) first differ, by line. */
static void describe_diff(const char *a, size_t na, const char *b, size_t nb,
                          char *msg, size_t cap, const char *what)
{
    size_t i = 0, line = 1, ls = 0;
    while (i < na && i < nb && a[i] == b[i]) {
        if (a[i] == '\n') {
            line++;
            ls = i + 1;
        }
        i++;
    }
    int la = 0, lb = 0;
    while (ls + (size_t)la < na && a[ls + la] != '\n' && la < 120)
        la++;
    while (ls + (size_t)lb < nb && b[ls + lb] != '\n' && lb < 120)
        lb++;
    snprintf(msg, cap,
             "%s: the README's quote differs at its line %zu:\n"
             "  README: %.*s\n  source: %.*s", what, line, la,
             i < na || ls < na ? a + ls : "", lb,
             i < nb || ls < nb ? b + ls : "");
}

/*
 * Checks every quote in readme against the files under srcdir. Returns the
 * number of quotes checked, or -1 with a message. quoted (may be NULL)
 * collects the quoted file paths, '\n'-separated.
 */
static int check_quotes(const char *readme, const char *srcdir, char *msg,
                        size_t cap, char *quoted, size_t qcap)
{
    static const char tag[] = "<!-- snippet: ";
    int count = 0;
    if (quoted != NULL)
        quoted[0] = '\0';
    for (const char *p = readme; *p != '\0'; p = next_line(p)) {
        if (strncmp(p, tag, sizeof tag - 1) != 0)
            continue;
        const char *ref = p + sizeof tag - 1;
        const char *end = strstr(ref, " -->");
        const char *eol = next_line(p);
        if (end == NULL || end > eol) {
            snprintf(msg, cap, "malformed snippet marker: %.60s", p);
            return -1;
        }
        char path[256], name[128] = "";
        size_t rn = (size_t)(end - ref);
        if (rn >= sizeof path) {
            snprintf(msg, cap, "snippet reference too long: %.60s", ref);
            return -1;
        }
        memcpy(path, ref, rn);
        path[rn] = '\0';
        char *hash = strchr(path, '#');
        if (hash != NULL) {
            snprintf(name, sizeof name, "%s", hash + 1);
            *hash = '\0';
        }
        if (!line_is(eol, "```c")) {
            snprintf(msg, cap, "%s: the marker is not followed by a ```c "
                     "block", path);
            return -1;
        }
        const char *body = next_line(eol), *q = body;
        while (*q != '\0' && !line_is(q, "```"))
            q = next_line(q);
        if (*q == '\0') {
            snprintf(msg, cap, "%s: unterminated code block", path);
            return -1;
        }
        char full[1024];
        snprintf(full, sizeof full, "%s/%s", srcdir, path);
        char *src = read_file(full);
        if (src == NULL) {
            snprintf(msg, cap, "%s: cannot read %.700s", path, full);
            return -1;
        }
        const char *rs;
        size_t rlen;
        if (!find_region(src, name, &rs, &rlen)) {
            snprintf(msg, cap, "%s: no region '%s' (ANCHOR / ANCHOR_END "
                     "lines)", path, name);
            free(src);
            return -1;
        }
        size_t blen = (size_t)(q - body);
        if (blen != rlen || memcmp(body, rs, rlen) != 0) {
            char what[400];
            snprintf(what, sizeof what, "%s#%s", path, name);
            describe_diff(body, blen, rs, rlen, msg, cap, what);
            free(src);
            return -1;
        }
        free(src);
        if (quoted != NULL && strlen(quoted) + strlen(path) + 2 < qcap) {
            strcat(quoted, path);
            strcat(quoted, "\n");
        }
        count++;
        p = q;
    }
    return count;
}

Test(readme, quotes_equal_the_examples)
{
    /* README.md, then every .md in docs/ */
    char docs[32][64];
    int nd = 0;
    snprintf(docs[nd++], sizeof docs[0], "README.md");
    DIR *d = opendir(RKV_SOURCE_DIR "/docs");
    cr_assert_not_null(d, "cannot list docs/");
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len > 3 && len < 40 && strcmp(e->d_name + len - 3, ".md") == 0) {
            cr_assert_lt(nd, 32, "more documents than the test expects");
            snprintf(docs[nd++], sizeof docs[0], "docs/%.50s", e->d_name);
        }
    }
    closedir(d);
    char all[2048] = "";
    int total = 0;
    for (int i = 0; i < nd; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%.63s", RKV_SOURCE_DIR, docs[i]);
        char *doc = read_file(path);
        cr_assert_not_null(doc, "cannot read %s", docs[i]);
        char msg[MSG_CAP] = "", quoted[1024];
        int n = check_quotes(doc, RKV_SOURCE_DIR, msg, sizeof msg, quoted,
                             sizeof quoted);
        free(doc);
        cr_assert_geq(n, 0, "%s: %s", docs[i], msg);
        total += n;
        if (strlen(all) + strlen(quoted) < sizeof all)
            strcat(all, quoted);
    }
    cr_assert_gt(total, 0, "no document quotes an example");
    /* each example is quoted at least once (docs/embedding.md,
     * docs/retention.md) */
    cr_assert_not_null(strstr(all, "examples/agent_loop.c\n"),
                       "no document quotes examples/agent_loop.c");
    cr_assert_not_null(strstr(all, "examples/serve_loop.c\n"),
                       "no document quotes examples/serve_loop.c");
    cr_assert_not_null(strstr(all, "examples/agent_retention.c\n"),
                       "no document quotes examples/agent_retention.c");
}

/* The checker itself: a quote that drifted, a missing region, a marker
 * without a block are all reported. */
Test(readme, checker_reports_drift)
{
    char *src = read_file(RKV_SOURCE_DIR "/examples/serve_loop.c");
    cr_assert_not_null(src);
    const char *rs;
    size_t rlen;
    cr_assert(find_region(src, "loop", &rs, &rlen));
    cr_assert_gt(rlen, 100);
    size_t cap = rlen + 256;
    char *doc = malloc(cap);
    cr_assert_not_null(doc);
    char msg[MSG_CAP];

    /* exact: accepted */
    snprintf(doc, cap, "text\n<!-- snippet: examples/serve_loop.c#loop -->\n"
             "```c\n%.*s```\nmore\n", (int)rlen, rs);
    cr_assert_eq(check_quotes(doc, RKV_SOURCE_DIR, msg, sizeof msg, NULL, 0),
                 1, "%s", msg);
    /* one character changed: refused, naming the line */
    char *x = strstr(doc, "rkv_sched_step");
    cr_assert_not_null(x);
    x[4] = 'X';
    cr_assert_eq(check_quotes(doc, RKV_SOURCE_DIR, msg, sizeof msg, NULL, 0),
                 -1);
    cr_assert_not_null(strstr(msg, "rkv_Xched_step"), "%s", msg);
    x[4] = 't';
    /* a line missing at the end: refused */
    snprintf(doc, cap, "<!-- snippet: examples/serve_loop.c#loop -->\n"
             "```c\n%.*s```\n", (int)rlen - 2, rs);
    cr_assert_eq(check_quotes(doc, RKV_SOURCE_DIR, msg, sizeof msg, NULL, 0),
                 -1);
    /* unknown region, unknown file, no block */
    snprintf(doc, cap, "<!-- snippet: examples/serve_loop.c#nope -->\n"
             "```c\n```\n");
    cr_assert_eq(check_quotes(doc, RKV_SOURCE_DIR, msg, sizeof msg, NULL, 0),
                 -1);
    snprintf(doc, cap, "<!-- snippet: examples/none.c -->\n```c\n```\n");
    cr_assert_eq(check_quotes(doc, RKV_SOURCE_DIR, msg, sizeof msg, NULL, 0),
                 -1);
    snprintf(doc, cap, "<!-- snippet: examples/serve_loop.c#loop -->\n"
             "text\n");
    cr_assert_eq(check_quotes(doc, RKV_SOURCE_DIR, msg, sizeof msg, NULL, 0),
                 -1);
    free(doc);
    free(src);
}
