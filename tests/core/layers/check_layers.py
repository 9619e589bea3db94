#!/usr/bin/env python3
"""Fails when the modules of a library depend on each other in a cycle.

Two graphs are checked; each must be acyclic:
  --objects O...  one node per object file; an edge A -> B when A uses a global symbol that
                  B defines (read from `nm`), so calls count, not only includes.
  --includes DIR  one node per file in DIR; an edge A -> B when A has #include "B".
A cycle is printed as `cycle: a.c -> b.c -> a.c` with, for objects, the symbols that make
each edge. Exit status: 0 acyclic, 1 a cycle, 2 usage or tool errors."""
import os
import re
import subprocess
import sys


def source_name(path):
    name = os.path.basename(path)
    for suffix in ('.c.o', '.o'):
        if name.endswith(suffix):
            return name[:-len(suffix)] + '.c'
    return name


def object_graph(paths):
    # One nm for every object: "FILE: SYMBOL TYPE ..." per line.
    out = subprocess.run(['nm', '-A', '-P'] + list(paths), capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit('check_layers: nm: %s' % out.stderr.strip())
    defined, used = {}, {source_name(p): set() for p in paths}
    for line in out.stdout.splitlines():
        where, _, rest = line.partition(': ')
        f = rest.split()
        if len(f) < 2:
            continue
        name, sym, kind = source_name(where), f[0], f[1]
        if kind == 'U':
            used[name].add(sym)
        elif kind.isupper() and kind not in 'UVW':
            defined[sym] = name
    graph = {}
    for name, syms in used.items():
        edges = graph.setdefault(name, {})
        for s in syms:
            owner = defined.get(s)
            if owner and owner != name:
                edges.setdefault(owner, []).append(s)
    return graph


def include_graph(folder):
    graph = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(('.c', '.h')):
            continue
        edges = graph.setdefault(name, {})
        with open(os.path.join(folder, name), encoding='utf-8') as f:
            for line in f:
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and os.path.exists(os.path.join(folder, m.group(1))):
                    edges.setdefault(m.group(1), []).append('#include')
    return graph


def find_cycle(graph):
    """A cycle as a list of nodes (first repeated at the end), or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, {})):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def main(argv):
    if len(argv) < 3 or argv[1] not in ('--objects', '--includes'):
        print(__doc__, file=sys.stderr)
        return 2
    graph = object_graph(argv[2:]) if argv[1] == '--objects' else include_graph(argv[2])
    cycle = find_cycle(graph)
    if not cycle:
        print('check_layers: %d nodes, no cycle' % len(graph))
        return 0
    print('cycle: ' + ' -> '.join(cycle))
    for a, b in zip(cycle, cycle[1:]):
        print('  %s -> %s: %s' % (a, b, ', '.join(sorted(set(graph[a][b]))[:4])))
    return 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
