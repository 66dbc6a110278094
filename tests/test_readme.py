"""The README's generated parts are up to date with the template library."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_library_table_is_current():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "library_table.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_readme_names_the_two_setup_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install . && python examples/quickstart.py" in readme
    assert "bash .ci/run" in readme
    assert (ROOT / "examples" / "quickstart.py").is_file()
