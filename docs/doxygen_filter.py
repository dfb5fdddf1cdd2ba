#!/usr/bin/env python3
"""docs/doxygen_filter.py FILE -- prints a public header with its plain C
comments turned into Doxygen comments, so the reference is generated from
the comments as they are written (no Doxygen markup in the headers).

Doxygen reads only /** ... */ (and ///) as documentation. This filter, run
by Doxygen on every header (docs/Doxyfile.in, FILTER_PATTERNS), rewrites
each plain /* comment by where it stands:
  - the file's first comment            -> /** @file NAME ...  (the file's
    page; NAME is the path below include/);
  - after code on its line              -> /**< ...       (the member,
    enumerator, macro or function before it);
  - alone, followed by a declaration    -> /** ...        (that declaration);
  - alone, followed by a blank line, an #include / #if / #endif or the end
    of the file, outside braces         -> /** @file NAME @details ...  (a
    note on the file's page, such as the block ownership protocol);
  - alone inside braces, before a blank line, or on a preprocessor
    conditional line                    -> left a plain comment.
A comment above a run of declarations (no blank line between them)
documents the whole run: the calls become a member group whose first
member's comment Doxygen gives to all (DISTRIBUTE_GROUP_DOC); calls right
below a type and without a comment of their own (a stats struct, then the
call that fills it) get the type's comment (@copydoc). Ranges (" .. ") and
lines opening with "+ " are escaped so Markdown does not read them as lists.
It only inserts text inside lines, so line numbers (and Doxygen's warning
locations) stay those of the header. Strings and character literals are
skipped; the headers have no nested comments.
"""
import re
import sys

NAME = ""
INSERT = {}  # index of a newline -> text to write before it
STANDALONE_PP = re.compile(r"\s*#\s*(include|if|ifdef|ifndef|else|elif|endif|pragma|undef)\b")


def rewrite(text):
    out = []
    i, n = 0, len(text)
    depth = 0          # brace depth outside comments and strings
    first = True       # the next comment is the file's first
    line_start = 0     # index where the current line starts
    INSERT.clear()
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(INSERT.pop(i, ""))
            line_start = i + 1
            out.append(c)
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            body = text[i + 2:j]
            before = text[line_start:i]
            op = opener(text, i, j, before, depth, first, body)
            out.append(op + (escape(body) if op != "/*" else body))
            first = False
            i = j
        elif c == "#" and not text[line_start:i].strip():
            # a preprocessor line: its braces (RKV_BEGIN_DECLS) are no code
            j = text.find("\n", i)
            j = n if j < 0 else j
            k = text.find("/*", i, j)
            k = j if k < 0 else k
            out.append(text[i:k])
            i = k
        else:
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    type_then_calls(text, i)
            out.append(c)
            i += 1
    return "".join(out)


def opener(text, start, end, before, depth, first, body):
    if body.startswith("*") or body.startswith("!"):
        return "/*"  # already a Doxygen comment
    if before.strip():
        if re.match(r"\s*#\s*define\b", before):
            return "/**<"
        if re.match(r"\s*#", before):
            return "/*"  # #endif /* GUARD */
        return "/**<"
    if first:
        return "/** @file " + NAME
    rest = text[end:]
    nl = rest.find("\n")
    following = rest[nl + 1:] if nl >= 0 else ""
    next_line = following.split("\n", 1)[0]
    if not next_line.strip() or STANDALONE_PP.match(next_line):
        return "/*" if depth > 0 else "/** @file " + NAME + " @details"
    if depth == 0:
        decls = run(text, end + nl + 1 if nl >= 0 else len(text))
        if decls and decls[0][1] and len(decls) >= 2:
            # a type, then the calls that use it: they share its comment
            INSERT[decls[0][0]] = " /**@{*/ /** @copydoc %s */" % decls[0][2]
            INSERT[decls[-1][0]] = INSERT.get(decls[-1][0], "") + " /**@}*/"
        elif len(decls) >= 2 and not any(d[1] for d in decls):
            INSERT[decls[-1][0]] = INSERT.get(decls[-1][0], "") + " /**@}*/"
            return "/**@{*/ /**"
    return "/**"


def type_then_calls(text, brace):
    """At the closing brace of a type: calls declared right below it, with
    no comment of their own, are the calls that fill or take it
    (rkv_tree_stats, then rkv_tree_get_stats): they share its comment."""
    k = text.find(";", brace)
    e = text.find("\n", k)
    if k < 0 or e < 0 or e in INSERT:
        return
    names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text[brace:k])
    decls = run(text, e + 1)
    if names and decls and not any(d[1] for d in decls):
        INSERT[e] = " /**@{*/ /** @copydoc %s */" % names[-1]
        INSERT[decls[-1][0]] = INSERT.get(decls[-1][0], "") + " /**@}*/"


def run(text, p):
    """The declarations (one-line macros included) from p up to a blank
    line, a comment line, another preprocessor line or the end, as (index
    of the newline ending it, has braces, last identifier). A comment above
    such a run documents it as a whole: a run of calls becomes a member
    group (DISTRIBUTE_GROUP_DOC), a type followed by calls (a struct and the
    call that fills it) gives the calls the type's comment."""
    depth, decls, braces, ident = 0, [], False, ""
    n = len(text)
    while p < n:
        e = text.find("\n", p)
        e = n if e < 0 else e
        line = text[p:e]
        s = line.strip()
        if re.match(r"#\s*define\b", s) and depth == 0 and not s.endswith("\\"):
            decls.append((e, False, ""))  # a one-line macro of the run
            p = e + 1
            continue
        if not s or s.startswith("/*") or s.startswith("#"):
            break
        code = line.split("/*", 1)[0]
        for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*|[{};]", code):
            t = m.group()
            if t == "{":
                depth += 1
                braces = True
            elif t == "}":
                depth -= 1
            elif t == ";" and depth == 0:
                decls.append((e, braces, ident))
                braces = False
            elif depth == 0:
                ident = t
        p = e + 1
    while decls and decls[-1][2] == "":
        decls.pop()  # a group must close on a declaration, not in a macro
    return decls if depth == 0 else []


def escape(body):
    """Keeps Markdown from reading ranges and sums as list syntax: " .. "
    (a range, "1 .. 2^28") would end a list, a line opening with "+ "
    (a formula continued) would start one."""
    body = re.sub(r"(?<=\s)\.\.(?=\s|$)", r"\\.\\.", body)
    return re.sub(r"(?m)^(\s*\*?\s+)\+ ", r"\1\\+ ", body)


def main():
    global NAME
    # the file's name as Doxygen shows it: relative to include/
    path = sys.argv[1].replace("\\", "/")
    NAME = path.rsplit("/include/", 1)[-1] if "/include/" in path else path.rsplit("/", 1)[-1]
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(rewrite(f.read()))


if __name__ == "__main__":
    main()
