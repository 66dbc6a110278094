"""transformers' own test file for the response parser, run against this package.

The file (tests/utils/test_chat_parsing.py of the transformers repository, at the 5.25 release) is third-party code,
so it is not copied here: point RESPONSE_TEMPLATES_TRANSFORMERS_TESTS at a copy of it (a file, or a folder holding
test_chat_parsing.py). tests/transformers_suite_plugin.py swaps our parser in for transformers' own and replaces
the Hub tokenizers the file loads with a tiny one built offline. Skipped, saying so, when the variable is unset.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import response_templates as rt
from oracle import reference_module

reference_module()  # the file tests 5.25's behaviour: on earlier releases this skips, saying why

TESTS = Path(__file__).resolve().parent


def _test_file() -> Path:
    where = os.environ.get("RESPONSE_TEMPLATES_TRANSFORMERS_TESTS")
    if not where:
        pytest.skip("RESPONSE_TEMPLATES_TRANSFORMERS_TESTS is not set (a copy of transformers' tests/utils/test_chat_parsing.py)")
    path = Path(where)
    if path.is_dir():
        path = path / "test_chat_parsing.py"
    if not path.is_file():
        pytest.skip(f"RESPONSE_TEMPLATES_TRANSFORMERS_TESTS: no file {path}")
    return path


def test_transformers_own_test_file_passes_with_our_parser(tmp_path):
    path = _test_file()
    env = dict(os.environ)
    package = Path(rt.__file__).resolve().parent.parent  # the response_templates this session imports (the wheel in CI)
    env["PYTHONPATH"] = os.pathsep.join([str(package), str(TESTS), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "transformers_suite_plugin",
         "--rootdir", str(tmp_path), str(path)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=1800,
    )  # fmt: skip
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else result.stderr[-2000:]
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed is not None and int(passed.group(1)) >= 50, summary  # the file has ~80 tests: they really ran
