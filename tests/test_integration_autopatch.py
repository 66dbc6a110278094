"""Activation without any import of ours: the .pth hook, checked in fresh interpreters.

The .pth tests need the installed wheel (CI installs it; `pip install .` does too) and skip on a bare source tree.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import response_templates

pytest.importorskip("transformers")
from tokenizer_factory import RESPONSE_TEMPLATE, build_tokenizer_dir  # noqa: E402

PTH_NAME = "response_templates_autopatch.pth"
# Where the package under test lives: the installed one in CI, else the source tree (put on PYTHONPATH).
PACKAGE_PARENT = str(Path(response_templates.__file__).resolve().parent.parent)


def installed_pth() -> Path | None:
    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    for directory in dirs:
        path = Path(directory) / PTH_NAME
        if path.is_file():
            return path
    return None


needs_pth = pytest.mark.skipif(
    installed_pth() is None, reason=f"{PTH_NAME} is not installed in this environment (run from the installed wheel)"
)


def run_python(code: str, tmp_path: Path, *, env_extra: dict | None = None, source_tree: bool = False) -> dict:
    """Run `code` in a fresh interpreter (cwd outside the repo) and return the JSON it prints last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESPONSE_TEMPLATES_") and k != "PYTHONPATH"}
    if source_tree:
        env["PYTHONPATH"] = PACKAGE_PARENT
    env.update(env_extra or {})
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


STARTUP = """
    import json, sys
    print(json.dumps({
        "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("response_templates", "transformers", "regex")),
        "finder": any(getattr(f, "_response_templates_autopatch", False) for f in sys.meta_path),
    }))
"""

USE_TRANSFORMERS_ONLY = """
    import json, sys
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained({path!r}, local_files_only=True)
    out = '<think>\\nhm\\n</think>\\n\\nHi!<|im_end|>'
    method = getattr(type(tok), "parse_response", None)  # absent on 4.x when unpatched
    result = {{"module": getattr(method, "__module__", None), "template": getattr(tok, "response_template", None) is not None}}
    if result["module"] == "response_templates.integrations.transformers_patch":
        result["text"] = tok.parse_response(out, prefix="")
        result["ids"] = tok.parse_response(tok.encode(out, add_special_tokens=False), prefix=[])
    print(json.dumps(result))
"""


@needs_pth
def test_startup_only_installs_a_finder(tmp_path):
    state = run_python(STARTUP, tmp_path)
    assert state["finder"]
    # nothing heavy at start-up: not our package (only the stdlib hook module), not transformers, not regex
    assert state["modules"] == ["response_templates.integrations._autopatch"]


@needs_pth
def test_transformers_alone_gets_parse_response(tmp_path):
    path = build_tokenizer_dir(tmp_path / "tok", response_template=RESPONSE_TEMPLATE)
    result = run_python(USE_TRANSFORMERS_ONLY.format(path=str(path)), tmp_path)
    expected = {"role": "assistant", "reasoning_content": "hm", "content": "Hi!"}
    assert result == {"module": "response_templates.integrations.transformers_patch", "template": True, "text": expected, "ids": expected}


@needs_pth
def test_disable_variable_turns_the_hook_off(tmp_path):
    state = run_python(STARTUP, tmp_path, env_extra={"RESPONSE_TEMPLATES_DISABLE": "1"})
    assert not state["finder"]
    path = build_tokenizer_dir(tmp_path / "tok", response_template=RESPONSE_TEMPLATE)
    result = run_python(USE_TRANSFORMERS_ONLY.format(path=str(path)), tmp_path, env_extra={"RESPONSE_TEMPLATES_DISABLE": "1"})
    assert result["module"] != "response_templates.integrations.transformers_patch"


def test_import_does_not_import_transformers(tmp_path):
    code = """
        import json, sys
        import response_templates
        from response_templates.integrations import transformers_patch as integration
        loaded = "transformers" in sys.modules
        import transformers.tokenization_utils_base as base
        method = getattr(base.PreTrainedTokenizerBase, "parse_response", None)
        print(json.dumps({"loaded": loaded, "patched": getattr(method, "__module__", None)}))
    """
    for env in ({}, {"RESPONSE_TEMPLATES_DISABLE": "1"}):
        result = run_python(code, tmp_path, env_extra=env, source_tree=True)
        assert result["loaded"] is False
        if env:  # RESPONSE_TEMPLATES_DISABLE=1: no automatic patching at all
            assert result["patched"] != "response_templates.integrations.transformers_patch"
        else:  # importing the package patches lazily, through the same hook
            assert result["patched"] == "response_templates.integrations.transformers_patch"


def test_import_after_transformers_patches_at_once(tmp_path):
    code = """
        import json
        import transformers.tokenization_utils_base as base
        import response_templates.integrations.transformers_patch
        print(json.dumps({"patched": base.PreTrainedTokenizerBase.parse_response.__module__}))
    """
    result = run_python(code, tmp_path, env_extra={"RESPONSE_TEMPLATES_DISABLE": "0"}, source_tree=True)
    assert result["patched"] == "response_templates.integrations.transformers_patch"


def test_explicit_patch_works_when_disabled(tmp_path):
    code = """
        import json
        from response_templates.integrations import transformers_patch as integration
        integration.patch()
        import transformers.tokenization_utils_base as base
        print(json.dumps({"patched": base.PreTrainedTokenizerBase.parse_response.__module__}))
    """
    result = run_python(code, tmp_path, env_extra={"RESPONSE_TEMPLATES_DISABLE": "1"}, source_tree=True)
    assert result["patched"] == "response_templates.integrations.transformers_patch"
