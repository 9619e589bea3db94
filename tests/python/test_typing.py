"""The package's type hints are complete and resolve (stdlib only, no type checker): every
public function and method of the names `sbx` exports and of the adapters' entry points
annotates each parameter and its return, and typing.get_type_hints evaluates every
annotation (a misspelt or unimported name fails here, not in a user's checker). The package
says it is typed (py.typed, PEP 561)."""
import inspect
import os
import typing
import unittest

import sbx
from sbx import host
from sbx.adapters import loongsage, nemo_gym, nexau

# What the exported names hand out, and what the adapters' users call.
MORE = [host.Sandbox, host.AsyncSandbox, loongsage.create_sandbox_client, nemo_gym.SbxProvider,
        nexau.SbxSandbox]


def public_callables():
    """(qualified name, function) for every public function and method to check."""
    objs = [getattr(sbx, n) for n in sbx.__all__] + MORE
    for obj in objs:
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue
        if inspect.isfunction(obj):
            yield obj.__qualname__, obj
            continue
        for name, member in vars(obj).items():
            if name.startswith("_") and name != "__init__":
                continue
            if isinstance(member, (staticmethod, classmethod)):
                member = member.__func__
            elif isinstance(member, property):
                member = member.fget
            if inspect.isfunction(member):
                yield "%s.%s" % (obj.__name__, name), member


class Typing(unittest.TestCase):
    def test_every_public_callable_is_annotated(self):
        missing = []
        checked = 0
        for qual, fn in public_callables():
            checked += 1
            sig = inspect.signature(fn)
            for p in sig.parameters.values():
                if p.name in ("self", "cls") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.annotation is inspect.Parameter.empty:
                    missing.append("%s(%s)" % (qual, p.name))
            if fn.__name__ != "__init__" and sig.return_annotation is inspect.Signature.empty:
                missing.append("%s -> ?" % qual)
        self.assertGreater(checked, 50)
        self.assertEqual(missing, [])

    def test_every_annotation_resolves(self):
        bad = []
        for qual, fn in public_callables():
            try:
                # Names imported only under TYPE_CHECKING (jobs.py's Host) are the package's.
                typing.get_type_hints(fn, localns=vars(sbx))
            except Exception as e:  # NameError, TypeError: the annotation cannot be evaluated
                bad.append("%s: %s" % (qual, e))
        self.assertEqual(bad, [])

    def test_package_is_marked_typed(self):
        self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(sbx.__file__), "py.typed")))


if __name__ == "__main__":
    unittest.main()
