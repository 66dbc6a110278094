"""Lookup never hands a model a template it was not checked against.

A Hub id may resolve (through `models` or `model_patterns`) only to an entry that lists the model's own chat
template (verified: MANIFEST.json of the chat templates folder says whose file it is), or that documents why the
model's format is the same (`same_format` evidence). Anything else gets None; guesses come only from `guess_for`,
marked as such.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import pytest

from response_templates import library
from response_templates.library import LibraryError, validate_entry

NAMES = library.list_templates()


def _manifest():
    folder = os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder:
        pytest.skip("RESPONSE_TEMPLATES_CHAT_TEMPLATES is not set (folder of real chat templates with MANIFEST.json)")
    path = Path(folder) / "MANIFEST.json"
    if not path.is_file():
        pytest.skip(f"{path} does not exist")
    return {item["file"]: item["model_repo"] for item in json.loads(path.read_text(encoding="utf-8"))}


def _is_hub_id(text):
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*", text))


def _violations(name, manifest):
    """What in entry `name` lets a model id resolve to it without verification or documented evidence."""
    entry = library.get_entry(name)
    evidence = entry.get("same_format", {})
    verified = {manifest[ct["file"]].lower() for ct in entry["chat_templates"] if ct["file"] in manifest}
    problems = []
    for model in entry["models"]:
        if model.lower() not in verified and model not in evidence:
            problems.append(f"{model}: its chat template is not among the verified ones and no same_format evidence")
    for pattern in entry.get("model_patterns", []):
        if pattern not in evidence:
            problems.append(f"pattern {pattern!r}: no same_format evidence for the models it covers")
    # A model whose own chat template is known (in the folder) resolves only to an entry that lists that file.
    for file, repo in manifest.items():
        if not _is_hub_id(repo) or library.name_for(repo) != name:
            continue
        files_of_repo = {f for f, r in manifest.items() if r.lower() == repo.lower()}
        listed = {ct["file"] for ct in entry["chat_templates"]}
        if not files_of_repo & listed and repo not in evidence:
            problems.append(f"{repo} resolves here but none of its chat templates {sorted(files_of_repo)} is verified")
    return problems


@pytest.mark.parametrize("name", NAMES)
def test_no_model_resolves_to_a_template_it_was_not_verified_against(name):
    problems = _violations(name, _manifest())
    assert not problems, f"{name}: " + "; ".join(problems)


def test_the_rule_catches_an_unverified_model_and_an_undocumented_pattern(monkeypatch):
    manifest = _manifest()
    entries = dict(library._entries())
    fake = copy.deepcopy(entries["qwen3"])
    fake["models"] = fake["models"] + ["Qwen/Qwen9-8B"]
    fake["model_patterns"] = ["Qwen/Qwen9-.*"]
    fake["same_format"] = {}
    entries["qwen3"] = fake
    monkeypatch.setattr(library, "_entries", lambda: entries)
    problems = _violations("qwen3", manifest)
    assert any("Qwen/Qwen9-8B" in p for p in problems)
    assert any("Qwen9-.*" in p for p in problems)


def test_a_model_with_another_chat_template_is_refused(monkeypatch):
    # A pattern that swallows a model whose own (different) chat template is known breaks the rule.
    manifest = _manifest()
    entries = dict(library._entries())
    fake = copy.deepcopy(entries["qwen3"])
    fake["model_patterns"] = ["Qwen/Qwen3.*"]
    fake["same_format"] = {"Qwen/Qwen3.*": "claimed"}
    entries = {"qwen3": fake}
    monkeypatch.setattr(library, "_entries", lambda: entries)
    problems = _violations("qwen3", manifest)
    assert any("Qwen/Qwen3-Coder-30B-A3B-Instruct" in p for p in problems), problems


# --- letter case, mirrors, guesses ---------------------------------------------------------------


@pytest.mark.parametrize("model", ["qwen/qwen3-8b", "QWEN/QWEN3-8B", "Qwen/Qwen3-8b", "qwen/qwen3-14b-fp8"])
def test_hub_ids_match_without_regard_to_letter_case(model):
    assert library.name_for(model) == "qwen3"


def test_a_mirror_is_served_only_when_its_files_are_known_to_be_the_same():
    # unsloth's SmolLM3 chat template was verified (it is listed); unsloth's Qwen3 copy was not.
    assert library.name_for("unsloth/SmolLM3-3B") == "smollm3"
    assert library.template_for("unsloth/Qwen3-8B") is None
    guess = library.guess_for("unsloth/Qwen3-8B")
    assert guess is not None and guess.name == "qwen3" and not guess.verified
    assert guess.reason.startswith("unverified")


def test_a_mirror_tokenizer_is_served_when_its_chat_template_fingerprint_agrees():
    folder = os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder:
        pytest.skip("RESPONSE_TEMPLATES_CHAT_TEMPLATES is not set")
    source = (Path(folder) / "Qwen--Qwen3-8B.jinja").read_bytes().decode("utf-8")

    class Tokenizer:
        name_or_path = "unsloth/Qwen3-8B"
        chat_template = source

    assert library.name_for(Tokenizer()) == "qwen3"
    Tokenizer.chat_template = source.replace("<tool_call>", "<tool_call_x>")  # a mirror that changed the file
    assert library.name_for(Tokenizer()) is None


def test_guess_for_marks_sure_answers_and_knows_nothing_of_unknown_ids():
    sure = library.guess_for("Qwen/Qwen3-8B")
    assert sure == library.Guess("qwen3", sure.reason, True)
    assert library.guess_for("someone/unknown-model") is None
    assert library.guess_for("bartowski/unknown-model-GGUF") is None
    guess = library.guess_for("lmstudio-community/QwQ-32B-GGUF")
    assert guess is not None and guess.name == "qwq" and not guess.verified
    with pytest.raises(TypeError, match="owner/name"):
        library.guess_for("no-slash")


def test_template_for_never_returns_a_guess():
    for model in ("unsloth/Qwen3-8B", "bartowski/Qwen_QwQ-32B-GGUF", "mlx-community/Qwen3-8B-4bit"):
        assert library.template_for(model) is None, model


# --- same_format validation -------------------------------------------------------------------


def test_same_format_must_name_a_listed_model_or_pattern():
    entry = copy.deepcopy(library.get_entry("qwen3"))
    entry["same_format"] = {"Qwen/Unlisted": "because"}
    with pytest.raises(LibraryError, match="same_format.*Qwen/Unlisted.*neither"):
        validate_entry(entry, "qwen3.json", stem="qwen3")


def test_same_format_evidence_must_be_text():
    entry = copy.deepcopy(library.get_entry("qwen3"))
    entry["same_format"] = {entry["models"][0]: "  "}
    with pytest.raises(LibraryError, match="same_format.*non-empty"):
        validate_entry(entry, "qwen3.json", stem="qwen3")
    entry["same_format"] = ["x"]
    with pytest.raises(LibraryError, match="same_format"):
        validate_entry(entry, "qwen3.json", stem="qwen3")


def test_a_newer_release_in_another_format_is_not_given_the_older_template():
    # Kimi K3 writes a different format from K2: whatever serves it, it must not be the K2 template.
    assert library.name_for("moonshotai/Kimi-K3") != "kimi-k2"
    assert library.name_for("moonshotai/kimi-k3") != "kimi-k2"


# --- current releases (issue 25) ------------------------------------------------------------


@pytest.mark.parametrize(
    "model, name",
    [
        ("deepseek-ai/DeepSeek-V4.1-Flash", "deepseek_v4"),
        ("deepseek-ai/deepseek-v4.1-flash", "deepseek_v4"),
        ("ibm-granite/granite-4.1-3b", "granite-4"),
        ("ibm-granite/granite-4.1-8b-GGUF", "granite-4"),
        ("google/gemma-2-27b-it", "gemma-2"),
        ("Salesforce/Llama-xLAM-2-70b-fc-r", "xlam"),
        ("Salesforce/xLAM-2-3b-fc-r", "xlam"),
        ("meetkai/functionary-small-v3.2", "functionary-v3.2"),
        # chat templates TRL 1.16.0 keeps as shipped by these checkpoints, verified here
        ("Qwen/Qwen3.8-27B", "qwen3.5"),
        ("Qwen/Qwen3.6-27B-FP8", "qwen3.5"),
        ("nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16", "nemotron3"),
        ("google/diffusiongemma-26B-A4B-it", "gemma-4"),
        ("LiquidAI/LFM2.5-VL-3B", "lfm2"),
        # plain-answer models: their end-of-turn markers must not reach content
        ("meta-llama/Meta-Llama-3-8B-Instruct", "llama3"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "chatml"),
        ("Qwen/Qwen2-VL-2B-Instruct", "chatml"),
        ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "chatml"),
        ("microsoft/Phi-3-mini-4k-instruct", "phi-3.5"),
        ("HuggingFaceTB/SmolVLM-Instruct", "smolvlm"),
        ("HuggingFaceM4/Idefics3-8B-Llama3", "smolvlm"),
        ("llava-hf/llava-v1.6-mistral-7b-hf", "mistral_v1"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistral_v1"),
        ("mistralai/Mistral-7B-Instruct-v0.2", "mistral_v1"),
        ("mistralai/Mathstral-7B-v0.1", "mistral_v3"),
        # chat templates pinned by sha256 in public code, equal to ones verified here
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3-instruct-2507"),
        ("Qwen/Qwen3-VL-2B-Instruct", "qwen3-instruct-2507"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", "qwen3-instruct-2507"),
    ],
)
def test_current_releases_resolve_to_the_format_they_write(model, name):
    assert library.name_for(model) == name
    assert library.template_for(model) == library.get_template(name)


@pytest.mark.parametrize(
    "model",
    [
        "deepseek-ai/DeepSeek-V4.1-Pro",  # no such Hub repository was found: no answer rather than a guess
        "deepseek-ai/DeepSeek-V4.1",
        "ibm-granite/granite-4.1-8b-base",  # a pretrained checkpoint writes no chat format
        "google/gemma-2-9b",
        "ibm-granite/granite-4.2-8b",  # a newer release whose chat template was not checked
        "Qwen/Qwen3.8-35B-A3B",  # TRL names only Qwen3.8-27B as shipping the Qwen3.8 template
        "Qwen/Qwen3-VL-8B-Thinking",  # the Thinking models ship another chat template, not read here
        "Qwen/Qwen3-Next-80B-A3B-Thinking",
        "meta-llama/Meta-Llama-3-8B",  # a pretrained checkpoint writes no chat format
        "microsoft/Phi-3-medium-128k-instruct",  # another Phi-3 chat template, not read here
    ],
)
def test_ids_without_evidence_give_no_answer(model):
    assert library.name_for(model) is None
