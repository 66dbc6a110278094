"""End-to-end tests of the Hub publisher (response_templates.authoring.publish, scripts/push_templates.py).

The real huggingface_hub client talks to tests/hub_server.py, a Hub look-alike on 127.0.0.1 that records every
request, commit and pull request. No network is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

huggingface_hub = pytest.importorskip("huggingface_hub")
import huggingface_hub.constants as hf_constants  # noqa: E402
from hub_server import FakeHub  # noqa: E402

from response_templates.authoring import publish  # noqa: E402
from response_templates.authoring.publish import KEY, PR_TITLE, insert_key  # noqa: E402
from response_templates.cli import push as push_command  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "hf_test_secret_token_0123456789"
USER = "template-bot"

# Our own tiny chat format: a chat template and the response template that reads it back.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|turn|>{{ m.role }}\n{{ m.content }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|turn|>assistant\n{% endif %}"
)
TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|turn|>assistant\n",
    "fields": {"content": {"close_pattern": "\\s*<\\|end\\|>.*", "content": "text"}},
}
# Reads the content as JSON: the real verify() rejects it against CHAT_TEMPLATE.
BAD_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|turn|>assistant\n",
    "fields": {"content": {"close_pattern": "<\\|end\\|>", "content": "json"}},
}
NO_TOOLS = {"reasoning": False, "tool_calls": False, "parallel_tool_calls": False}


def make_entry(models, template=TEMPLATE, name="toy", family="Toy"):
    return {"name": name, "family": family, "description": "test format", "models": list(models),
            "supports": dict(NO_TOOLS), "chat_templates": [], "template": template}


def tokenizer_config(**extra) -> str:
    config = {"add_bos_token": False, "bos_token": None, "eos_token": "<|end|>", "model_max_length": 4096,
              "chat_template": CHAT_TEMPLATE, "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "ünk"}
    config.update(extra)
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


@pytest.fixture(autouse=True)
def _hub_env(monkeypatch, tmp_path):
    # Whatever the machine's settings: online, no proxy for 127.0.0.1, no saved token or cache of the user.
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)


@pytest.fixture
def hub():
    with FakeHub(tokens={TOKEN: USER}) as server:
        yield server


def run(hub, argv=(), entries=None, token=TOKEN, verifier=None):
    api = huggingface_hub.HfApi(endpoint=hub.endpoint, token=token)
    return push_command.main(list(argv), api=api, entries=entries, verifier=verifier)


def posts(hub):
    return [r for r in hub.requests if r.method not in ("GET", "HEAD")]


# ---------------------------------------------------------------------------------------------------------
# Opening the pull request


def test_opens_pr_that_adds_only_the_key(hub, capsys):
    original = tokenizer_config()
    repo = hub.add_repo("org/toy-1", {"tokenizer_config.json": original, "config.json": "{}"})
    main_sha = repo.refs["main"]

    assert run(hub, entries=[make_entry(["org/toy-1"])]) == 0

    # One commit, on a PR branch created from the commit we read, touching only tokenizer_config.json.
    assert len(hub.commits) == 1
    commit = hub.commits[0]
    assert commit["create_pr"] is True and commit["revision"] == "main" and commit["parent"] == main_sha
    assert list(commit["files"]) == ["tokenizer_config.json"]
    assert repo.refs["main"] == main_sha  # nothing written to main
    assert hub.file("org/toy-1", "tokenizer_config.json") == original.encode()

    new = hub.file("org/toy-1", "tokenizer_config.json", "refs/pr/1").decode("utf-8")
    assert new == commit["files"]["tokenizer_config.json"].decode("utf-8")
    old_data, new_data = json.loads(original), json.loads(new)
    assert list(new_data) == list(old_data) + [KEY]
    assert new_data[KEY] == TEMPLATE
    assert {k: v for k, v in new_data.items() if k != KEY} == old_data
    # Text-level: the old file with one comma and the new member, same indentation and trailing newline.
    assert new.endswith("\n}\n") and '\n  "response_template": {\n    "defaults": {' in new
    assert '"unk_token": "ünk"' in new
    removed = [line for line in original.splitlines() if line not in new.splitlines()]
    assert removed == ['  "unk_token": "ünk"']  # only gained a trailing comma

    # Every write carried create_pr and the token; the PR is titled and described.
    writes = posts(hub)
    assert [w.path for w in writes] == ["/api/models/org/toy-1/preupload/main", "/api/models/org/toy-1/commit/main"]
    assert all(w.query.get("create_pr") == "1" and w.authorized for w in writes)
    pr = hub.repos["org/toy-1"].discussions[0]
    assert pr["title"] == PR_TITLE and pr["isPullRequest"] and pr["author"]["name"] == USER
    body = pr["description"]
    assert "`response_template`" in body and "Nothing else in the file changes" in body
    assert "How it was verified" in body and main_sha in body and "`default`" in body
    assert "How to try it" in body and 'AutoTokenizer.from_pretrained("org/toy-1", revision="refs/pr/' in body

    out = capsys.readouterr()
    assert f"{hub.endpoint}/org/toy-1/discussions/1" in out.out
    assert "1 opened, 0 unchanged, 0 skipped, 0 failed" in out.out
    assert TOKEN not in out.out + out.err


def test_dry_run_prints_diff_and_writes_nothing(hub, capsys):
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    hub.add_repo("org/toy-2", {"tokenizer_config.json": tokenizer_config()})

    assert run(hub, ["--dry-run"], entries=[make_entry(["org/toy-1", "org/toy-2"])]) == 0

    assert posts(hub) == [] and hub.commits == []
    out = capsys.readouterr().out
    assert "--- a/org/toy-1/tokenizer_config.json" in out and "+++ b/org/toy-2/tokenizer_config.json" in out
    assert '-  "unk_token": "ünk"\n+  "unk_token": "ünk",\n+  "response_template": {' in out
    assert "2 would open" in out and "nothing was written" in out
    # The engine matrix is printed once per template (this toy template has no corpus to measure it with).
    assert out.count("== serving engines: toy") == 1 and "no corpus for template 'toy'" in out


def test_dry_run_works_without_token(hub, monkeypatch, capsys):
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    hub.add_repo("org/gated", {"tokenizer_config.json": tokenizer_config()}, gated=True)  # 401 without a token
    assert run(hub, ["--dry-run"], entries=[make_entry(["org/toy-1", "org/gated"])], token=None) == 1
    assert posts(hub) == [] and not any(r.authorized for r in hub.requests)
    out = capsys.readouterr().out
    assert "would open  org/toy-1" in out and "failed      org/gated" in out and "gated repository" in out


def test_pr_starts_from_the_commit_that_was_verified(hub):
    """If main moves between reading and committing, the PR still applies to the file we read and edited."""
    original = tokenizer_config()
    repo = hub.add_repo("org/toy-1", {"tokenizer_config.json": original})
    read_sha = repo.refs["main"]

    class RacingApi(huggingface_hub.HfApi):
        def create_commit(self, *args, **kwargs):
            moved = dict(repo.commits[read_sha], **{"README.md": b"changed meanwhile"})
            repo.commits["f" * 40] = moved
            repo.refs["main"] = "f" * 40
            return super().create_commit(*args, **kwargs)

    api = RacingApi(endpoint=hub.endpoint, token=TOKEN)
    assert push_command.main([], api=api, entries=[make_entry(["org/toy-1"])]) == 0
    assert hub.commits[0]["parent"] == read_sha and hub.commits[0]["header"]["parentCommit"] == read_sha
    assert repo.refs["main"] == "f" * 40  # main itself untouched
    assert hub.file("org/toy-1", "README.md", "refs/pr/1") is None


def test_no_token_refuses_to_push(hub, monkeypatch, capsys):
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    assert run(hub, entries=[make_entry(["org/toy-1"])], token=None) == 2
    assert "no Hub token" in capsys.readouterr().err
    assert hub.requests == []


def test_invalid_token_is_reported_without_printing_it(hub, capsys):
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    wrong = "hf_wrong_secret_987654321"
    assert run(hub, entries=[make_entry(["org/toy-1"])], token=wrong) == 2
    err = capsys.readouterr().err
    assert "cannot identify the Hub account" in err and wrong not in err
    assert posts(hub) == []


# ---------------------------------------------------------------------------------------------------------
# Verification


def test_failed_verification_pushes_nothing(hub, capsys):
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    entry = make_entry(["org/toy-1"], template=BAD_TEMPLATE)

    assert run(hub, entries=[entry]) == 1
    assert posts(hub) == [] and hub.commits == []
    out = capsys.readouterr()
    assert "failed" in out.out and "verification against the repository's chat template failed" in out.out
    assert "default/plain" in out.out  # the failing case is named
    assert "parse failed" in out.err  # the full per-case report goes to stderr

    # Same in a dry run: no diff is offered for a template that does not verify.
    assert run(hub, ["--dry-run"], entries=[entry]) == 1
    assert "+++ b/" not in capsys.readouterr().out


def test_verification_uses_the_repo_chat_template(hub):
    """The separate chat_template.jinja wins over the config's; named templates come from the config's list."""
    seen = {}

    def recorder(template, chat_template, options=None, supports=None):
        seen.setdefault(len(seen), (chat_template, options, supports))

        class Report:
            ok, cases = True, [1]
        return Report()

    hub.add_repo("org/file", {"tokenizer_config.json": tokenizer_config(chat_template="config one"),
                              "chat_template.jinja": "file one"})
    named = [{"name": "default", "template": "plain"}, {"name": "tool_use", "template": "with tools"}]
    hub.add_repo("org/named", {"tokenizer_config.json": tokenizer_config(chat_template=named)})
    hub.add_repo("org/dir", {"tokenizer_config.json": tokenizer_config(chat_template="config one"),
                             "chat_template.jinja": "main file", "additional_chat_templates/rag.jinja": "rag file"})
    entry = make_entry(["org/file", "org/named", "org/dir"])
    entry["verify"] = {"render_kwargs": {"x": 1}}
    # Overrides for a chat template the entry lists, recognised by its sha256 (final newline or not).
    entry["chat_templates"] = [{"file": "rag.jinja", "sha256": hashlib.sha256(b"rag file\n").hexdigest(),
                                "verify": {"cases": ["plain"]}}]

    assert run(hub, ["--dry-run"], entries=[entry], verifier=recorder) == 0
    sources = [s for s, _, _ in seen.values()]
    assert sources == ["file one", "plain", "with tools", "main file", "rag file"]
    assert all(s == NO_TOOLS for _, _, s in seen.values())
    assert [o for _, o, _ in seen.values()] == [{"render_kwargs": {"x": 1}}] * 4 + [
        {"render_kwargs": {"x": 1}, "cases": ["plain"]}]

    # --chat-template restricts verification to the named template.
    seen.clear()
    assert run(hub, ["--dry-run", "--model", "org/named", "--chat-template", "tool_use"],
               entries=[entry], verifier=recorder) == 0
    assert [s for s, _, _ in seen.values()] == ["with tools"]


def test_repo_without_chat_template_fails(hub, capsys):
    config = json.dumps({"eos_token": "<|end|>"}, indent=2)
    hub.add_repo("org/none", {"tokenizer_config.json": config})
    hub.add_repo("org/noconfig", {"config.json": "{}"})
    assert run(hub, entries=[make_entry(["org/none", "org/noconfig"])]) == 1
    out = capsys.readouterr().out
    assert "no chat template to verify against" in out and "has no tokenizer_config.json" in out
    assert posts(hub) == []


# ---------------------------------------------------------------------------------------------------------
# Idempotence and existing state


def test_rerun_is_idempotent(hub, capsys):
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    entries = [make_entry(["org/toy-1"])]
    assert run(hub, entries=entries) == 0
    assert len(hub.commits) == 1
    capsys.readouterr()

    # Our PR is open: skipped, nothing written.
    writes_before = len(posts(hub))
    assert run(hub, entries=entries) == 0
    assert len(posts(hub)) == writes_before and len(hub.commits) == 1
    assert "pull request #1 is already open" in capsys.readouterr().out

    # The maintainers merge it: main now holds the template, reported as unchanged.
    repo = hub.repos["org/toy-1"]
    repo.refs["main"] = repo.refs["refs/pr/1"]
    repo.discussions[0]["status"] = "merged"
    assert run(hub, entries=entries) == 0
    assert len(posts(hub)) == writes_before
    assert "already holds this template" in capsys.readouterr().out


def test_open_pr_found_across_pages(monkeypatch, capsys):
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    with FakeHub(tokens={TOKEN: USER}, discussions_page_size=2) as hub:
        hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
        hub.add_discussion("org/toy-1", PR_TITLE, USER)  # oldest: last page
        for i in range(5):
            hub.add_discussion("org/toy-1", f"Other PR {i}", USER)
        assert run(hub, entries=[make_entry(["org/toy-1"])]) == 0
        assert posts(hub) == []
        listing = [r.query for r in hub.requests if r.path.endswith("/discussions")]
        assert [q.get("p") for q in listing] == ["0", "1", "2"]
        assert all(q.get("author") == USER and q.get("type") == "pull_request" for q in listing)


def test_other_peoples_or_closed_prs_do_not_block(hub):
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    hub.add_discussion("org/toy-1", PR_TITLE, "someone-else")
    hub.add_discussion("org/toy-1", PR_TITLE, USER, status="closed")
    hub.add_discussion("org/toy-1", PR_TITLE, USER, is_pull_request=False)
    assert run(hub, entries=[make_entry(["org/toy-1"])]) == 0
    assert len(hub.commits) == 1 and hub.commits[0]["pr_num"] == 4


def test_existing_templates_are_never_overwritten(hub, capsys):
    other = {"fields": {"content": {"content": "text"}}}
    hub.add_repo("org/same", {"tokenizer_config.json": tokenizer_config(response_template=TEMPLATE)})
    hub.add_repo("org/other", {"tokenizer_config.json": tokenizer_config(response_template=other)})
    assert run(hub, entries=[make_entry(["org/same", "org/other"])]) == 0
    assert posts(hub) == []
    out = capsys.readouterr().out
    assert "unchanged  org/same" in out and "already holds this template" in out
    assert "skipped    org/other" in out and "already holds a different response_template; not overwritten" in out


# ---------------------------------------------------------------------------------------------------------
# Errors are per repository


def test_missing_gated_and_rate_limited_repos_are_reported_and_the_run_goes_on(hub, capsys):
    hub.add_repo("org/gated", {"tokenizer_config.json": tokenizer_config()}, gated=True)
    hub.add_repo("org/busy", {"tokenizer_config.json": tokenizer_config()}).fail_status = 429
    hub.add_repo("org/broken", {"tokenizer_config.json": tokenizer_config()}).fail_status = 500
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    entries = [make_entry(["org/missing", "org/gated", "org/busy", "org/broken", "org/toy-1"])]

    assert run(hub, entries=entries) == 1
    out = capsys.readouterr().out
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith(("failed", "opened"))}
    assert rows["org/missing"].startswith("failed") and "repository not found" in rows["org/missing"]
    assert rows["org/gated"].startswith("failed") and "gated repository" in rows["org/gated"]
    assert rows["org/busy"].startswith("failed") and "rate limited by the Hub (HTTP 429)" in rows["org/busy"]
    assert "Retry-After: 30s" in rows["org/busy"]
    assert rows["org/broken"].startswith("failed") and "HTTP 500" in rows["org/broken"]
    assert rows["org/toy-1"].startswith("opened")
    assert "1 opened, 0 unchanged, 0 skipped, 4 failed" in out
    assert [c["repo"] for c in hub.commits] == ["org/toy-1"]

    # Once the rate limit is gone, a rerun finishes the job without touching finished repos.
    hub.repos["org/busy"].fail_status = None
    assert run(hub, ["--model", "org/busy", "--model", "org/toy-1"], entries=entries) == 0
    assert [c["repo"] for c in hub.commits] == ["org/toy-1", "org/busy"]


def test_network_error_is_reported_per_repo(capsys):
    # Nothing listens on this endpoint any more.
    with FakeHub() as dead:
        endpoint = dead.endpoint
    api = huggingface_hub.HfApi(endpoint=endpoint, token=TOKEN)
    code = push_command.main(["--dry-run"], api=api, entries=[make_entry(["org/a", "org/b"])])
    assert code == 1
    out = capsys.readouterr().out
    assert out.count("network error") == 2


# ---------------------------------------------------------------------------------------------------------
# Selection


def test_selection_by_family_template_and_model():
    a = make_entry(["org/a1", "org/a2"], name="alpha", family="Alpha")
    b = make_entry(["org/b1"], name="beta", family="Beta")
    b["model_patterns"] = [r"org/b[0-9]+-extra"]
    pick = publish.select_targets
    assert [m for m, _ in pick([a, b])] == ["org/a1", "org/a2", "org/b1"]
    assert [m for m, _ in pick([a, b], families=["beta"])] == ["org/b1"]
    assert [m for m, _ in pick([a, b], names=["ALPHA"])] == ["org/a1", "org/a2"]
    assert [(m, e["name"]) for m, e in pick([a, b], models=["org/b7-extra", "org/a2"])] == [
        ("org/b7-extra", "beta"), ("org/a2", "alpha")]
    with pytest.raises(publish.PublishUsageError, match="no selected library template serves org/zzz"):
        pick([a, b], models=["org/zzz"])
    c = make_entry([], name="gamma", family="Gamma")
    c["model_patterns"] = [r"org/b.*"]
    with pytest.raises(publish.PublishUsageError, match="several templates \\(beta, gamma\\)"):
        pick([a, b, c], models=["org/b7-extra"])
    assert [e["name"] for _, e in pick([a, b, c], names=["gamma"], models=["org/b7-extra"])] == ["gamma"]
    assert [e["name"] for _, e in pick([a, b, c], models=["org/b1"])] == ["beta"]  # listed beats patterns
    # Hub ids ignore letter case, as in the library's lookup: the publisher serves the same repos.
    assert [(m, e["name"]) for m, e in pick([a, b], models=["ORG/A2", "Org/B7-Extra"])] == [
        ("ORG/A2", "alpha"), ("Org/B7-Extra", "beta")]
    with pytest.raises(publish.PublishUsageError, match="no library template for family Delta"):
        pick([a, b], families=["Delta"])


def test_usage_errors_exit_2(hub, capsys, tmp_path):
    assert run(hub, ["--model", "org/unknown"], entries=[make_entry(["org/a"])]) == 2
    assert "no selected library template serves org/unknown" in capsys.readouterr().err
    broken = make_entry(["org/a"])
    del broken["supports"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    assert run(hub, ["--template-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"cannot use template file {path}" in err and "supports" in err
    assert hub.requests == []


# ---------------------------------------------------------------------------------------------------------
# Editing tokenizer_config.json as text


@pytest.mark.parametrize("indent", [2, 4, "\t"])
def test_insert_key_keeps_indentation_and_order(indent):
    old = json.dumps({"b": 1, "a": [1, 2], "c": {"d": "é"}}, indent=indent, ensure_ascii=False) + "\n"
    new = insert_key(old, KEY, {"x": {"y": [1, "ü"]}})
    assert new == json.dumps({"b": 1, "a": [1, 2], "c": {"d": "é"}, KEY: {"x": {"y": [1, "ü"]}}},
                             indent=indent, ensure_ascii=False) + "\n"


def test_insert_key_other_styles():
    # Compact, no trailing newline.
    assert insert_key('{"a": 1}', KEY, {"b": [1, 2]}) == '{"a": 1, "response_template": {"b": [1, 2]}}'
    assert insert_key('{"a":1}', KEY, {"b": [1, 2]}) == '{"a":1,"response_template":{"b":[1,2]}}'
    assert insert_key("{}\n", KEY, {"b": 1}) == '{"response_template": {"b": 1}}\n'
    # CRLF line endings and extra blank lines at the end are kept.
    old = '{\r\n  "a": 1\r\n}\r\n\r\n'
    expected = '{\r\n  "a": 1,\r\n  "response_template": {\r\n    "b": 1\r\n  }\r\n}\r\n\r\n'
    assert insert_key(old, KEY, {"b": 1}) == expected
    # A file that escapes non-ASCII keeps escaping; one that does not stays raw.
    escaped = '{\n  "a": "\\u00e9"\n}'
    assert insert_key(escaped, KEY, "é") == '{\n  "a": "\\u00e9",\n  "response_template": "\\u00e9"\n}'
    assert insert_key('{\n  "a": "é"\n}', KEY, "é") == '{\n  "a": "é",\n  "response_template": "é"\n}'
    # A byte-order mark survives.
    assert insert_key('\ufeff{"a": 1}', KEY, 2) == '\ufeff{"a": 1, "response_template": 2}'


def test_insert_key_refuses_bad_input():
    with pytest.raises(publish.PublishError, match="already has"):
        insert_key('{"response_template": 1}', KEY, 2)
    with pytest.raises(publish.PublishError, match="not a JSON object"):
        insert_key("[1, 2]", KEY, 2)
    with pytest.raises(publish.PublishError, match="not valid JSON"):
        insert_key('{"a": 1,}', KEY, 2)


# ---------------------------------------------------------------------------------------------------------
# The real library and the script


TEMPLATES_DIR = ROOT / "response_templates" / "library" / "templates"


def _chat_templates_dir_or_skip() -> Path:
    folder = os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder:
        pytest.skip("RESPONSE_TEMPLATES_CHAT_TEMPLATES is not set: real chat templates are not available")
    return Path(folder)


def _real_case(folder: Path):
    """A shipped template file and a real chat template it was verified against (qwen2.5 first, if shipped)."""
    files = sorted(TEMPLATES_DIR.glob("*.json"), key=lambda p: (p.stem != "qwen2.5", p.stem))
    for path in files:
        entry = json.loads(path.read_text(encoding="utf-8"))
        for item in entry.get("chat_templates") or []:
            chat = folder / item["file"]
            if chat.is_file() and entry.get("models") and "verify" not in item:
                return path, entry, chat.read_text(encoding="utf-8")
    pytest.skip("no shipped template has its chat template file in RESPONSE_TEMPLATES_CHAT_TEMPLATES")


def test_real_template_is_verified_and_published(hub, capsys):
    path, entry, chat_template = _real_case(_chat_templates_dir_or_skip())
    model = entry["models"][0]
    original = tokenizer_config(chat_template=chat_template)
    hub.add_repo(model, {"tokenizer_config.json": original})
    api = huggingface_hub.HfApi(endpoint=hub.endpoint, token=TOKEN)

    assert push_command.main(["--template-file", str(path), "--model", model], api=api) == 0, capsys.readouterr()
    assert len(hub.commits) == 1 and hub.commits[0]["create_pr"]
    new = json.loads(hub.file(model, "tokenizer_config.json", "refs/pr/1"))
    assert new[KEY] == entry["template"] and {k: v for k, v in new.items() if k != KEY} == json.loads(original)
    description = hub.repos[model].discussions[0]["description"]
    assert f"`{entry['name']}` template" in description
    # The engine matrix of `response-templates check`, measured on the template's corpus.
    assert "## Serving engines" in description and "| template | transformers | transformers-serve |" in description
    assert f"| {entry['name']} | same (" in description


def test_library_entries_select_cleanly():
    try:
        entries = publish.library_entries()
    except ImportError as exc:  # the library module is written in parallel
        pytest.skip(f"response_templates.library is not available yet: {exc}")
    assert entries, "the template library is empty"
    for entry in entries:
        assert isinstance(entry["template"], dict) and isinstance(entry["models"], list), entry["name"]
    targets = publish.select_targets(entries)
    assert len({repo for repo, _ in targets}) == len(targets)
    assert {e["name"] for _, e in targets} == {e["name"] for e in entries if e["models"]}


def test_script_end_to_end_in_a_subprocess(hub, tmp_path):
    """scripts/push_templates.py with HF_ENDPOINT and HF_TOKEN in the environment, as a maintainer runs it."""
    entry = make_entry(["org/toy-1", "org/toy-bad"])
    entry_file = tmp_path / "toy.json"
    entry_file.write_text(json.dumps(entry), encoding="utf-8")
    bad = make_entry(["org/toy-bad"], template=BAD_TEMPLATE, name="toy-bad")
    bad_file = tmp_path / "toy-bad.json"
    bad_file.write_text(json.dumps(bad), encoding="utf-8")
    hub.add_repo("org/toy-1", {"tokenizer_config.json": tokenizer_config()})
    hub.add_repo("org/toy-bad", {"tokenizer_config.json": tokenizer_config()})

    env = dict(os.environ, HF_ENDPOINT=hub.endpoint, HF_TOKEN=TOKEN, HF_HOME=str(tmp_path / "home"),
               HF_HUB_OFFLINE="0", NO_PROXY="127.0.0.1,localhost")
    script = [sys.executable, str(ROOT / "scripts" / "push_templates.py")]

    dry = subprocess.run(script + ["--dry-run", "--template-file", str(entry_file), "--model", "org/toy-1"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "+++ b/org/toy-1/tokenizer_config.json" in dry.stdout and hub.commits == []

    real = subprocess.run(script + ["--template-file", str(bad_file), "--template-file", str(entry_file)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert real.returncode == 1  # org/toy-bad (served by the bad entry first) fails verification
    assert [c["repo"] for c in hub.commits] == ["org/toy-1"]
    assert "opened" in real.stdout and "verification against the repository's chat template failed" in real.stdout
    assert TOKEN not in real.stdout + real.stderr + dry.stdout + dry.stderr


def test_crlf_tokenizer_config_keeps_its_line_endings(tmp_path):
    import types

    config = tmp_path / "tokenizer_config.json"
    config.write_bytes(b'{\r\n  "a": 1,\r\n  "chat_template": "x"\r\n}\r\n')

    class Api:
        def model_info(self, repo_id, **kwargs):
            return types.SimpleNamespace(sha="abc", siblings=[types.SimpleNamespace(rfilename="tokenizer_config.json")])

        def hf_hub_download(self, repo_id, path, revision=None, cache_dir=None, **kwargs):
            return str(config)

    snapshot = publish.fetch_snapshot(Api(), "org/repo", str(tmp_path))
    updated = publish.insert_key(snapshot.config_text, "response_template", {"b": 1})
    assert "\r\n" in updated and "\n" not in updated.replace("\r\n", "")
    assert updated.startswith('{\r\n  "a": 1,\r\n')
