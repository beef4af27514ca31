#!/usr/bin/env python3
"""version.py KRONOSD VERSION SRCDIR — the version is meson's project(version) everywhere.

C reads it from the generated kronos_version.h (KR_VERSION), so `kronosd --version` must
print it. The Python client ships from this tree with the daemon: its module's __version__
must be the same, and its pyproject.toml must take the version from the module rather than
write one of its own.
"""
import ast
import pathlib
import re
import subprocess
import sys

kronosd, version, src = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
failed = 0


def check(what, got):
    global failed
    ok = got == version
    print(f"{'ok' if ok else 'not ok'} - {what}: {got!r} (meson: {version!r})")
    failed += not ok


out = subprocess.run([kronosd, "--version"], capture_output=True, text=True, check=True).stdout
m = re.match(r"kronosd (\S+) ", out)
check("kronosd --version", m.group(1) if m else out)

module = src / "clients/python/kronosd_client.py"
found = None
for node in ast.parse(module.read_text()).body:
    if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets):
        found = ast.literal_eval(node.value)
check("clients/python/kronosd_client.py __version__", found)

pyproject = (src / "clients/python/pyproject.toml").read_text()
own = re.search(r'^version\s*=\s*"([^"]*)"', pyproject, re.M)
dynamic = re.search(r'^dynamic\s*=\s*\[[^]]*"version"', pyproject, re.M)
attr = 'version = {attr = "kronosd_client.__version__"}' in pyproject
ok = own is None and dynamic is not None and attr
print(f"{'ok' if ok else 'not ok'} - clients/python/pyproject.toml takes the module's version")
failed += not ok
sys.exit(1 if failed else 0)
