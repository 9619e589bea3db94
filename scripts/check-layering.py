#!/usr/bin/env python3
"""Checks the layout of the files of each folder given (a plugin, the support library).

A file `name.c` and its header `name.h` are one unit; `#include "other.h"` (a header of the
same folder) in either makes the unit depend on `other`. Two rules:
  - each non-static function a .c file defines is declared in its own header, if in any
    (no shared header declaring several files' functions, which would hide the graph);
  - the includes then are the dependency graph, and it must point down: no cycle (a
    includes b's header while b, directly or not, includes a's).
  - with DIR:PREFIX, every non-static function starts with PREFIX (sbx_plugin_register,
    a plugin's one export, aside).
Each breach is printed; the exit status is 1 when there is one.

usage: check-layering.py DIR[:PREFIX]...
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def graph(folder):
    deps = {}
    for name in sorted(os.listdir(folder)):
        stem, ext = os.path.splitext(name)
        if ext not in ('.c', '.h'):
            continue
        with open(os.path.join(folder, name), encoding='utf-8') as f:
            text = f.read()
        unit = deps.setdefault(stem, set())
        for inc in INCLUDE.findall(text):
            if not os.path.exists(os.path.join(folder, inc)):
                continue  # a header of another folder
            other = os.path.splitext(os.path.basename(inc))[0]
            if other != stem:
                unit.add(other)
    return deps


DEFINITION = re.compile(r'^(?!static\b)[A-Za-z_][\w \t\*]*?\b(\w+)\([^;{]*\)\s*\{', re.M)
DECLARATION = re.compile(r'^[A-Za-z_][\w \t\*]*?\b(\w+)\([^;{]*\)[^;{]*;', re.M)


def misplaced(folder):
    """(function, file defining it, header declaring it) where the two names differ."""
    declared = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith('.h'):
            with open(os.path.join(folder, name), encoding='utf-8') as f:
                for fn in DECLARATION.findall(f.read()):
                    declared.setdefault(fn, name)
    out = []
    for name in sorted(os.listdir(folder)):
        if not name.endswith('.c'):
            continue
        with open(os.path.join(folder, name), encoding='utf-8') as f:
            for fn in DEFINITION.findall(f.read()):
                h = declared.get(fn)
                if h and os.path.splitext(h)[0] != os.path.splitext(name)[0]:
                    out.append((fn, name, h))
    return out


def cycles(deps):
    found, state, stack = [], {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(deps.get(u, ())):
            if state.get(v) == 1:
                found.append(stack[stack.index(v):] + [v])
            elif v in deps and not state.get(v):
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(deps):
        if not state.get(u):
            visit(u)
    return found


def unprefixed(folder, prefix):
    out = []
    for name in sorted(os.listdir(folder)):
        if name.endswith('.c'):
            with open(os.path.join(folder, name), encoding='utf-8') as f:
                for fn in DEFINITION.findall(f.read()):
                    if not fn.startswith(prefix) and fn != 'sbx_plugin_register':
                        out.append((fn, name))
    return out


def main(args):
    bad = 0
    for arg in args:
        folder, _, prefix = arg.partition(':')
        for fn, c in unprefixed(folder, prefix) if prefix else ():
            print('%s: %s() in %s does not start with %s' % (folder, fn, c, prefix))
            bad = 1
        for fn, c, h in misplaced(folder):
            print('%s: %s() is defined in %s but declared in %s' % (folder, fn, c, h))
            bad = 1
        for c in cycles(graph(folder)):
            print('%s: include cycle: %s' % (folder, ' -> '.join(c)))
            bad = 1
    return bad


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
