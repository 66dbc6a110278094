"""Public names of the package stay what they are whatever was imported first (issue 14.2)."""

import subprocess
import sys

import pytest

ORDERS = {
    "package only": "import response_templates as rt",
    "submodule first": "import response_templates.authoring.verification\nimport response_templates as rt",
    "submodule after": "import response_templates as rt\nimport response_templates.authoring.verification",
    "from-import": "from response_templates.authoring.verification import verify\nimport response_templates as rt",
    "cli and publisher": "import response_templates.cli, response_templates.authoring.publish\nimport response_templates as rt",
}

CHECK = """
import inspect
assert inspect.isfunction(rt.verify), rt.verify
assert inspect.isfunction(rt.verify_entry), rt.verify_entry
assert inspect.isclass(rt.VerifyReport), rt.VerifyReport
from response_templates import verify, verify_entry, VerifyReport
assert verify is rt.verify and verify_entry is rt.verify_entry and VerifyReport is rt.VerifyReport
report = rt.verify(rt.get_entry("qwen3"), "{% for m in messages %}{{ m['content'] }}{% endfor %}")
assert isinstance(report, rt.VerifyReport), type(report)
import types
for name in rt.__all__:
    assert not isinstance(getattr(rt, name), types.ModuleType), name
print("ok")
"""


@pytest.mark.parametrize("order", sorted(ORDERS))
def test_verify_is_the_function_after_any_import_order(order):
    # A fresh interpreter: the import order is what a user's program does, not what this test session did.
    result = subprocess.run([sys.executable, "-c", ORDERS[order] + "\n" + CHECK], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_no_public_name_is_also_a_submodule():
    import pkgutil

    import response_templates as rt

    submodules = {info.name for info in pkgutil.iter_modules(rt.__path__)}
    assert not submodules & set(rt.__all__), submodules & set(rt.__all__)
