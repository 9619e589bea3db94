"""The ctypes mirror of host.h (bindings/python/sbx/_lib.py) matches the C structs: every
mirrored struct has the C size, and the same members at the same offsets, in the ABI version
the headers say. The C side comes from the `sbx_layout` program ($SBX_LAYOUT)."""
import os
import subprocess
import unittest

from sbx import _lib

MIRRORS = {
    "sbx_error": _lib.Error,
    "sbx_kv": _lib.KV,
    "sbx_host_options": _lib.HostOptions,
    "sbx_create_opts": _lib.CreateOpts,
    "sbx_exec_opts": _lib.ExecOpts,
    "sbx_exec_result": _lib.ExecResult,
    "sbx_job_info": _lib.JobInfo,
    "sbx_file_info": _lib.FileInfo,
    "sbx_plugin_info": _lib.PluginInfo,
    "sbx_session_record": _lib.SessionRecord,
    "sbx_call": _lib.Call,
    "sbx_completion": _lib.Completion,
}


def c_layout():
    """{type: (size, {member: offset})} and the ABI version, from the C program."""
    out = subprocess.run([os.environ["SBX_LAYOUT"]], capture_output=True, text=True,
                         check=True).stdout
    types, abi = {}, None
    for line in out.splitlines():
        name, value = line.split()
        if name == "SBX_ABI":
            abi = value
        elif "." in name:
            t, member = name.split(".")
            types[t][1][member] = int(value)
        else:
            types[name] = (int(value), {})
    return types, abi


class LayoutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.types, cls.abi = c_layout()

    def test_every_mirrored_struct_is_measured(self):
        self.assertEqual(sorted(self.types), sorted(MIRRORS))

    def test_sizes_match(self):
        for name, cls in MIRRORS.items():
            with self.subTest(struct=name):
                self.assertEqual(self.types[name][0], _lib.ctypes.sizeof(cls))

    def test_members_and_offsets_match(self):
        for name, cls in MIRRORS.items():
            want = self.types[name][1]
            got = {f[0]: getattr(cls, f[0]).offset for f in cls._fields_}
            with self.subTest(struct=name):
                self.assertEqual(got, want)

    def test_abi_version_matches(self):
        self.assertEqual("%d.%d" % (_lib.ABI_MAJOR, _lib.ABI_MINOR), self.abi)


if __name__ == "__main__":
    unittest.main()
