"""Commands that used to need a checkout (issue 29): `response-templates check` found its corpora only in
tests/data/corpora of the current directory (or of a path that no longer exists since the package moved to layers),
so from an installed wheel it exited 2; the wheel now ships them as package data (library/corpora.py). `verify` of a
library template needs the models' chat templates, which cannot ship: its help and its error say what to get."""

from __future__ import annotations

import json

import pytest

from response_templates.authoring import engines
from response_templates.cli import main
from response_templates.library import corpora, list_templates


def test_the_corpora_are_found_whatever_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_CORPORA", raising=False)
    monkeypatch.chdir(tmp_path)
    folder = engines.corpora_dir()
    assert folder == corpora.corpora_dir()
    assert {path.stem for path in folder.glob("*.json")} >= set(list_templates())
    assert len(engines.load_corpus("qwen3")) >= 5


def test_an_installed_wheel_ships_the_corpora():
    if corpora.CHECKOUT.is_dir():
        pytest.skip("running from a checkout: the package data is checked when the tests run against the wheel (CI)")
    assert corpora.PACKAGED.is_dir()
    for name in list_templates():
        data = json.loads((corpora.PACKAGED / f"{name}.json").read_text(encoding="utf-8"))
        assert data["template"] == name and data["cases"]


def test_packaged_corpora_come_first_then_the_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_CORPORA", raising=False)
    packaged, checkout = tmp_path / "packaged", tmp_path / "checkout"
    monkeypatch.setattr(corpora, "PACKAGED", packaged)
    monkeypatch.setattr(corpora, "CHECKOUT", checkout)
    with pytest.raises(FileNotFoundError, match=r"--corpora DIR.*RESPONSE_TEMPLATES_CORPORA") as info:
        engines.corpora_dir()
    assert str(packaged) in str(info.value) and "reinstall" in str(info.value)
    checkout.mkdir()
    assert engines.corpora_dir() == checkout
    packaged.mkdir()
    assert engines.corpora_dir() == packaged
    monkeypatch.setenv("RESPONSE_TEMPLATES_CORPORA", str(tmp_path))
    assert engines.corpora_dir() == tmp_path


def test_verify_of_a_library_template_without_chat_templates_says_what_to_get(capsys, monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_CHAT_TEMPLATES", raising=False)
    assert main(["verify", "--template", "qwen3"]) == 2
    error = capsys.readouterr().err
    assert "Qwen--Qwen3-8B.jinja" in error and "not shipped" in error
    assert "--chat-templates-dir" in error and "--chat-template FILE" in error and "Hub model OWNER/NAME" in error


def test_verify_help_says_what_it_needs(capsys):
    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "not shipped with this package" in help_text and "RESPONSE_TEMPLATES_CHAT_TEMPLATES" in help_text


def test_check_runs_without_a_corpora_option_from_another_directory(capsys, tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    if engines.engine_unavailable("transformers"):
        pytest.skip(engines.engine_unavailable("transformers"))
    monkeypatch.delenv("RESPONSE_TEMPLATES_CORPORA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--engine", "transformers", "--json", "qwen3"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["status"] == "same" and row["cases"] >= 5
