#!/usr/bin/env python3
"""Compares every struct radixkv/_structs.py declares with the C headers.

Generates a C program that prints sizeof and offsetof of each declared
struct and field, compiles it against include/radixkv.h with the build's
compiler, runs it, and compares with ctypes' sizeof / field offsets. Exit 0
when all match; else lists each difference and exits 1. Loads _structs.py by
path, never the shared library, so it runs in sanitizer builds too.

    check_struct_layout.py --cc CC -I DIR [-I DIR ...]
"""
import argparse
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load_structs(path=None):
    path = path or os.path.join(HERE, "..", "radixkv", "_structs.py")
    spec = importlib.util.spec_from_file_location("rkv_structs_check", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def c_program(structs):
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <radixkv.h>",
             "int main(void) {"]
    for s in structs:
        cname = s._c_name_
        lines.append(f'    printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        rename = getattr(s, "_c_field_names_", {})
        for name, *_ in s._fields_:
            cf = rename.get(name, name)
            lines.append(f'    printf("{cname} {name} %zu\\n", offsetof({cname}, {cf}));')
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def python_layout(structs):
    out = {}
    for s in structs:
        out[(s._c_name_, "sizeof")] = ctypes.sizeof(s)
        for name, *_ in s._fields_:
            out[(s._c_name_, name)] = getattr(s, name).offset
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    ap.add_argument("-I", dest="incs", action="append", default=[])
    ap.add_argument("--structs-file", help="check this module instead of "
                    "radixkv/_structs.py (the test that the check can fail)")
    args = ap.parse_args(argv)
    mod = load_structs(args.structs_file)
    structs = mod.all_structs()
    if not structs:
        print("check_struct_layout: no structs declared")
        return 1
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "layout.c")
        exe = os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write(c_program(structs))
        cmd = [args.cc, "-std=c11", "-o", exe, src] + [f"-I{i}" for i in args.incs]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("check_struct_layout: compiling failed:\n" + r.stderr)
            return 1
        r = subprocess.run([exe], capture_output=True, text=True, check=True)
    c = {}
    for line in r.stdout.splitlines():
        cname, field, value = line.split()
        c[(cname, field)] = int(value)
    py = python_layout(structs)
    bad = [(k, py[k], c.get(k)) for k in sorted(py) if py[k] != c.get(k)]
    for (cname, field), pv, cv in bad:
        print(f"check_struct_layout: {cname}.{field}: Python {pv}, C {cv}")
    print(f"check_struct_layout: {len(structs)} structs, {len(py)} sizes and "
          f"offsets, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
