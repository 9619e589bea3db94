#!/usr/bin/env python3
"""core_layers: libsbx's files call and include each other without a cycle, and the check
finds the cycles of the ping/pong fixture (so it can fail).

test_layers.py CHECKER CORE_DIR FIXTURE_DIR FIXTURE_OBJECTS... -- CORE_OBJECTS..."""
import subprocess
import sys


def run(*args):
    p = subprocess.run([sys.executable, CHECKER] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def expect(what, got, rc, first_line):
    code, out = got
    line = out.splitlines()[0] if out else ''
    if code != rc or not line.startswith(first_line):
        print('FAIL %s: exit %d, expected %d; output:\n%s' % (what, code, rc, out))
        return 1
    print('ok   %s: %s' % (what, line))
    return 0


CHECKER, core_dir, fixture_dir = sys.argv[1:4]
rest = sys.argv[4:]
cut = rest.index('--')
fixture_objs, core_objs = rest[:cut], rest[cut + 1:]
bad = 0
bad += expect('fixture objects call each other', run('--objects', *fixture_objs), 1,
              'cycle: ping.c -> pong.c -> ping.c')
bad += expect('fixture headers include each other', run('--includes', fixture_dir), 1,
              'cycle: ping.h -> pong.h -> ping.h')
bad += expect('libsbx objects', run('--objects', *core_objs), 0, 'check_layers: ')
bad += expect('core includes', run('--includes', core_dir), 0, 'check_layers: ')
sys.exit(1 if bad else 0)
