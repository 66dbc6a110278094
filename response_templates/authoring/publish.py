"""Open pull requests that add verified response templates to model repositories on the Hugging Face Hub.

For each selected model, the publisher reads the repository's ``tokenizer_config.json`` and chat template(s)
at the current head of ``main``, checks the library template against those chat templates with
:func:`response_templates.verify` (in `response_templates.authoring.verification`), and opens a pull request that adds a single key,
``response_template``, to ``tokenizer_config.json``. Nothing else in the file changes: the key is inserted as
text, with the file's own indentation, separators and line endings, and the result is checked to differ
from the original only by that key.

It never writes to ``main``, never overwrites a different existing template, and is safe to rerun: repos that
already hold the template, or that have an open pull request from us, are left alone.

Command line: ``python scripts/push_templates.py --help`` or ``response-templates push --help``.
"""

from __future__ import annotations

import difflib
import inspect
import json
import re
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..core.errors import PublishError, PublishUsageError
from ..integrations.transformers_patch import TOKENIZER_CONFIG

CHAT_TEMPLATE_FILE = "chat_template.jinja"
CHAT_TEMPLATE_DIR = "additional_chat_templates/"
LEGACY_CHAT_TEMPLATE_JSON = "chat_template.json"  # processors of older multimodal repos
KEY = "response_template"
PR_TITLE = "Add response_template to tokenizer_config.json"

OPENED = "opened"
WOULD_OPEN = "would open"  # dry run
UNCHANGED = "unchanged"
SKIPPED = "skipped"
FAILED = "failed"
_STATUS_ORDER = (OPENED, WOULD_OPEN, UNCHANGED, SKIPPED, FAILED)

PACKAGE_URL = "https://pypi.org/project/response-templates/"


@dataclass
class RepoResult:
    repo_id: str
    template: str
    status: str
    detail: str = ""
    url: str | None = None
    diff: str | None = None


# ----------------------------------------------------------------------------------------------------------
# Library access and selection


def library_entries() -> list[dict]:
    """All entries of the shipped template library, as metadata dicts ("name", "family", "models", ...)."""
    from ..library import get_entry, list_templates

    return [get_entry(name) for name in list_templates()]


def load_entry_file(path: str) -> dict:
    """A template data file in the library format (to publish a template before it ships), validated."""
    from ..library.entries import validate_entry

    try:
        with open(path, encoding="utf-8") as handle:
            entry = json.load(handle)
        validate_entry(entry, path)
    except (OSError, ValueError) as exc:  # LibraryError and JSON errors are ValueErrors
        raise PublishUsageError(f"cannot use template file {path}: {exc}") from exc
    return entry


def _entry_for_model(entries: Sequence[dict], model_id: str) -> dict | None:
    """The entry listing ``model_id``, else the one whose patterns match it (several matching: refused)."""
    # Same rule as the library's lookup: Hub ids compared without regard to letter case, as the Hub does.
    wanted = model_id.lower()
    for entry in entries:
        if any(model.lower() == wanted for model in entry.get("models", ())):
            return entry
    matched = [
        e for e in entries if any(re.fullmatch(p, model_id, re.IGNORECASE) for p in e.get("model_patterns", ()))
    ]
    if len(matched) > 1:
        names = ", ".join(e["name"] for e in matched)
        raise PublishUsageError(f"{model_id} matches the patterns of several templates ({names}); pick one with --template")
    return matched[0] if matched else None


def select_targets(
    entries: Sequence[dict],
    *,
    families: Sequence[str] = (),
    names: Sequence[str] = (),
    models: Sequence[str] = (),
) -> list[tuple[str, dict]]:
    """(repo id, entry) pairs to publish, in library order, each repo once.

    ``families`` and ``names`` narrow the entries (case-insensitive); ``models`` picks repos, which may also be
    served through an entry's ``model_patterns``. Raises PublishUsageError when a filter matches nothing.
    """
    chosen = list(entries)
    if families:
        wanted = {f.lower() for f in families}
        chosen = [e for e in chosen if str(e.get("family", "")).lower() in wanted]
        if not chosen:
            known = sorted({str(e.get("family")) for e in entries})
            raise PublishUsageError(f"no library template for family {', '.join(families)} (known: {', '.join(known)})")
    if names:
        wanted = {n.lower() for n in names}
        chosen = [e for e in chosen if e["name"].lower() in wanted]
        if not chosen:
            raise PublishUsageError(f"no library template named {', '.join(names)}")

    targets: list[tuple[str, dict]] = []
    if models:
        for model_id in models:
            entry = _entry_for_model(chosen, model_id)
            if entry is None:
                raise PublishUsageError(f"no selected library template serves {model_id}")
            targets.append((model_id, entry))
    else:
        targets = [(model_id, e) for e in chosen for model_id in e.get("models", ())]

    seen: set[str] = set()
    unique = []
    for repo_id, entry in targets:
        if repo_id not in seen:
            seen.add(repo_id)
            unique.append((repo_id, entry))
    return unique


# ----------------------------------------------------------------------------------------------------------
# Editing tokenizer_config.json


def insert_key(text: str, key: str, value: Any) -> str:
    """Return ``text`` (a JSON object) with ``key: value`` added as its last member, nothing else changed.

    The new member follows the file's style: indentation, ``": "`` vs ``":"``, line endings, escaped or raw
    non-ASCII. The result is checked: it parses to the old object plus the key, in the old key order.
    """
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom):]
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise PublishError(f"{TOKENIZER_CONFIG} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise PublishError(f"{TOKENIZER_CONFIG} is not a JSON object")
    if key in data:
        raise PublishError(f"{TOKENIZER_CONFIG} already has a {key!r} key")

    stripped = text.rstrip()
    close = len(stripped) - 1  # the object's closing brace
    last = close - 1
    while text[last] in " \t\r\n":
        last -= 1
    empty = text[last] == "{"
    newline = "\r\n" if "\r\n" in text else "\n"
    # Escape non-ASCII only if the file already does (transformers writes raw UTF-8).
    ensure_ascii = not any(ord(ch) > 127 for ch in body) and re.search(r"\\u[0-9a-fA-F]{4}", body) is not None
    first = re.match(r'\s*\{([ \t]*\r?\n)?([ \t]*)"(?:[^"\\]|\\.)*"([ \t]*):([ \t]*)', body)
    key_sep = ": "
    if first:
        key_sep = first.group(3) + ":" + first.group(4)
    multiline = bool(first and first.group(1))

    if multiline:
        indent = first.group(2)  # type: ignore[union-attr]  # multiline implies `first` matched
        rendered = json.dumps(value, indent=indent, separators=(",", key_sep), ensure_ascii=ensure_ascii)
        rendered = rendered.replace("\n", newline + indent)
        member = f"{indent}{json.dumps(key)}{key_sep}{rendered}"
        inserted = ("" if empty else ",") + newline + member
    else:
        item_sep = ", " if key_sep.endswith(" ") else ","
        rendered = json.dumps(value, separators=(item_sep, key_sep), ensure_ascii=ensure_ascii)
        member = f"{json.dumps(key)}{key_sep}{rendered}"
        inserted = member if empty else item_sep + member
    new_text = text[: last + 1] + inserted + text[last + 1 :]

    # Belt and braces: only the one key may differ.
    new_data = json.loads(new_text[len(bom):])
    if list(new_data) != list(data) + [key] or new_data[key] != value or any(
        new_data[k] != data[k] for k in data
    ):
        raise PublishError(f"internal error: editing {TOKENIZER_CONFIG} would change more than the {key!r} key")
    return new_text


def unified_diff(repo_id: str, old: str, new: str) -> str:
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{repo_id}/{TOKENIZER_CONFIG}",
        tofile=f"b/{repo_id}/{TOKENIZER_CONFIG}",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


# ----------------------------------------------------------------------------------------------------------
# Pull request text


def _package_version() -> str:
    try:
        from .._version import __version__
    except ImportError:
        return ""
    return f" {__version__}"


def _markdown_text(text: str) -> str:
    """Escape "<" outside code spans, or the Hub renders markers such as <tool_call> as (hidden) HTML tags."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") else part.replace("<", "&lt;") for part in parts)


def pr_description(repo_id: str, entry: dict, chat_template_names: Sequence[str], sha: str, cases: int | None,
                   compatibility: str | None = None) -> str:
    family = entry.get("family") or entry["name"]
    checked = ", ".join(f"`{n}`" for n in chat_template_names)
    supports = entry.get("supports") or {}
    parts = ["plain answers"]
    if supports.get("reasoning"):
        parts.append("reasoning")
    if supports.get("tool_calls"):
        parts.append("parallel tool calls" if supports.get("parallel_tool_calls") else "tool calls")
    what = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
    case_text = f" ({cases} cases)" if cases else ""
    notes = "".join(f"- {_markdown_text(note)}\n" for note in entry.get("notes") or ())
    notes_section = f"\n## Format notes\n\n{notes}" if notes else ""
    if compatibility:
        notes_section += f"\n## Serving engines\n\n{_markdown_text(compatibility)}\n"
    return f"""\
This pull request adds one key, `response_template`, to `tokenizer_config.json`. Nothing else in the file changes.

## What is it?

A response template is a small declarative JSON description of how this model writes its replies: which markers \
open and close the reasoning, the answer and the tool calls, and how each part is parsed. It is the inverse of the \
chat template. With it, the tokenizer turns raw generated text (or token ids) into a structured message:

```python
{{"role": "assistant", "reasoning_content": "...", "content": "...", "tool_calls": [...]}}
```

transformers reads the key natively from version 5.20 (`tokenizer.parse_response(...)`, and \
`tokenizer.get_response_parser(...)` for streaming). Older releases (4.46 and later) get the same methods by \
installing the [`response-templates`]({PACKAGE_URL}) package.

## How it was verified

This is the `{entry['name']}` template ({family}) of the response-templates{_package_version()} library. \
Before this pull request was opened, it was checked against this repository's own chat template ({checked}) at \
commit `{sha}`: assistant messages covering {what} were rendered with the chat template, the generated part was \
parsed back with the response template, and every message came back unchanged{case_text}.
{notes_section}
## How to try it

```python
from transformers import AutoTokenizer

# N is the number of this pull request
tok = AutoTokenizer.from_pretrained("{repo_id}", revision="refs/pr/N")
prompt = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
# ... generate `generated_text` from `prompt` ...
message = tok.parse_response(generated_text, prefix=prompt)
```

Without this pull request, with any transformers release from 4.46: `pip install response-templates`, then \
`response_templates.parse_response(generated_text, response_templates.get_template("{entry['name']}"), prefix=prompt)`.
"""


# ----------------------------------------------------------------------------------------------------------
# Talking to the Hub


def _supported(method, **kwargs) -> dict:
    """The keyword arguments ``method`` accepts: filters older huggingface_hub releases lack are done client-side."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def _silent_tqdm():
    try:
        from huggingface_hub.utils.tqdm import silent_tqdm
    except ImportError:  # older huggingface_hub: its per-file bars are harmless
        return None
    return silent_tqdm


@dataclass
class RepoSnapshot:
    sha: str
    config_text: str
    config: dict
    chat_templates: dict[str, str]  # name -> Jinja source


def fetch_snapshot(api, repo_id: str, cache_dir: str) -> RepoSnapshot:
    """Read tokenizer_config.json and the chat template(s) of ``repo_id`` at the head of main, pinned to its sha."""
    info = api.model_info(repo_id)
    sha = info.sha
    if not sha:
        raise PublishError("the Hub did not report the repository's commit sha")
    siblings = getattr(info, "siblings", None)
    names = None if siblings is None else {s.rfilename for s in siblings}
    # No per-file download bars under our own progress bar (older huggingface_hub has no tqdm_class).
    quiet = _supported(api.hf_hub_download, tqdm_class=_silent_tqdm()) if _silent_tqdm() else {}

    def read(path: str) -> str | None:
        if names is not None and path not in names:
            return None
        try:
            local = api.hf_hub_download(repo_id, path, revision=sha, cache_dir=cache_dir, **quiet)
        except Exception as exc:
            if names is None and type(exc).__name__ in ("RemoteEntryNotFoundError", "EntryNotFoundError"):
                return None
            raise
        # newline="": keep the file's own line endings, so that the pull request changes nothing else
        with open(local, encoding="utf-8", newline="") as handle:
            return handle.read()

    config_text = read(TOKENIZER_CONFIG)
    if config_text is None:
        raise PublishError(f"the repository has no {TOKENIZER_CONFIG}")
    try:
        config = json.loads(config_text.lstrip("\ufeff"))
    except ValueError as exc:
        raise PublishError(f"{TOKENIZER_CONFIG} is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise PublishError(f"{TOKENIZER_CONFIG} is not a JSON object")

    # Same precedence as transformers: separate template files win over the config's "chat_template".
    templates: dict[str, str] = {}
    default = read(CHAT_TEMPLATE_FILE)
    if default is not None:
        templates["default"] = default
    for path in sorted(names or ()):
        if path.startswith(CHAT_TEMPLATE_DIR) and path.endswith(".jinja"):
            templates[path[len(CHAT_TEMPLATE_DIR) : -len(".jinja")]] = read(path) or ""
    if not templates:
        templates = _templates_from_value(config.get("chat_template"))
    if not templates:
        legacy = read(LEGACY_CHAT_TEMPLATE_JSON)
        if legacy is not None:
            try:
                templates = _templates_from_value(json.loads(legacy).get("chat_template"))
            except (ValueError, AttributeError):
                templates = {}
    return RepoSnapshot(sha=sha, config_text=config_text, config=config, chat_templates=templates)


def _templates_from_value(value: Any) -> dict[str, str]:
    """The config's ``chat_template``: a string, or a list of {"name", "template"} (or a name -> source dict)."""
    if isinstance(value, str):
        return {"default": value}
    if isinstance(value, list):
        return {
            item["name"]: item["template"]
            for item in value
            if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("template"), str)
        }
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if isinstance(v, str)}
    return {}


def find_open_pr(api, repo_id: str, me: str | None):
    """Our open (or draft) pull request adding the key, if any. Matched by title, and by author when known."""
    # No status filter: whether the Hub's "open" includes drafts is not specified, so filter here.
    filters = _supported(api.get_repo_discussions, author=me, discussion_type="pull_request")
    for discussion in api.get_repo_discussions(repo_id, **filters):
        if not discussion.is_pull_request or discussion.status not in ("open", "draft"):
            continue
        if discussion.title.strip().lower() != PR_TITLE.lower():
            continue
        if me is not None and discussion.author != me:
            continue
        return discussion
    return None


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong with a repository, for the summary."""
    name = type(exc).__name__
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if name == "GatedRepoError":
        return "gated repository: accept its conditions on the Hub with this account, then rerun"
    if name == "RepositoryNotFoundError":
        return "repository not found (or private, or the token cannot read it)"
    if name == "RevisionNotFoundError":
        return "revision not found"
    if name in ("RemoteEntryNotFoundError", "EntryNotFoundError"):
        return f"file not found: {_first_line(exc)}"
    if status == 429:
        retry = response.headers.get("Retry-After") if response is not None else None
        wait = f" (Retry-After: {retry}s)" if retry else ""
        return f"rate limited by the Hub (HTTP 429){wait}: rerun later, finished repos are skipped"
    if status in (401, 403):
        return f"access denied (HTTP {status}): {_first_line(exc)}"
    if status is not None:
        return f"HTTP {status}: {_first_line(exc)}"
    cause = exc.__cause__
    if name == "LocalEntryNotFoundError" and cause is not None:
        return describe_error(cause)
    if isinstance(exc, (ConnectionError, TimeoutError)) or any(
        word in name for word in ("Connect", "Timeout", "Network", "Protocol")
    ):
        return f"network error: {name}: {_first_line(exc)}"
    return f"{name}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2])[:300] if lines else type(exc).__name__


def _report_text(report: Any) -> str:
    """A short description of a failed verification report, whatever its exact shape."""
    for attr in ("summary", "message"):
        value = getattr(report, attr, None)
        if isinstance(value, str) and value:
            return value
        if callable(value):
            try:
                return str(value())
            except TypeError:
                pass
    return str(report)


def _short_report(report: Any) -> str:
    first = _report_text(report).splitlines()[0] if _report_text(report) else "verification failed"
    failures = getattr(report, "failures", None) or []
    names = [f"{getattr(c, 'scenario', '?')}/{getattr(c, 'name', '?')}" for c in failures]
    text = first + (f"; failed cases: {', '.join(names[:5])}" + (" ..." if len(names) > 5 else "") if names else "")
    diff = getattr(failures[0], "diff", None) if failures else None
    if diff:
        text += f"; first difference: {str(diff[0])[:200]}"
    return text


def entry_verify_options(entry: dict, chat_template: str) -> dict | None:
    """The entry's verify options, with the overrides of a chat template it lists (matched by sha256)."""
    from .verification import entry_options

    return entry_options(entry, chat_template)


def _case_count(report: Any) -> int | None:
    """How many cases actually ran (skipped ones do not count)."""
    cases = getattr(report, "cases", None)
    try:
        return sum(getattr(case, "skipped", None) is None for case in cases) if cases is not None else None
    except TypeError:
        return None


def _default_verifier():
    from .verification import verify

    return verify


# ----------------------------------------------------------------------------------------------------------
# Which engines can serve the template


# What each engine's built-in response-template parser cannot take, said when it refuses a template.
_BUILT_IN_LIMITS = {  # engine: (its name, what its parser cannot take)
    "vllm": ("vLLM", "vLLM's `hf` parser routes a reasoning field named `thinking` (not `reasoning_content`) and "
             "refuses `join` or a `transform` on `thinking`/`content`"),
    "sglang": ("SGLang", "SGLang's `response_template` parser takes a reasoning field named `thinking` and plain-text "
               "`thinking`/`content` fields, and has no `python-call-list`"),
}


def engine_compatibility(entry: dict) -> str:
    """The `response-templates check` matrix of ``entry``'s template on the engines installed here (Markdown).

    The template is published in the form transformers documents (reasoning in ``reasoning_content``); the text
    says what other engines need when they refuse it or parse it differently."""
    from . import engines

    try:
        cases = engines.load_corpus(entry["name"])
    except (OSError, ValueError) as exc:
        return f"Engine compatibility was not measured: {exc}."
    reports = [
        engines.check_template(entry["name"], engine, template=entry["template"], cases=cases)
        for engine in engines.ENGINES
    ]
    measured = [r for r in reports if r.available]
    text = (
        "Measured with `response-templates check`: the corpus of this template parsed by each engine's own code, "
        "compared with this library's parser.\n\n" + engines.matrix_markdown(measured)
    )
    for engine, (name, limits) in _BUILT_IN_LIMITS.items():
        if any(r.engine == engine and r.status == engines.REJECTED for r in measured):
            text += (
                f"\n\n{limits}; to serve this model with {name} as it is, use the response-templates plugin "
                "(`--reasoning-parser response_templates --tool-call-parser response_templates`)."
            )
    missing = [r.engine for r in reports if not r.available]
    if missing:
        text += f"\n\nNot measured (not installed where this was published): {', '.join(missing)}."
    return text


# ----------------------------------------------------------------------------------------------------------
# The run


class Publisher:
    def __init__(
        self,
        api,
        *,
        dry_run: bool = False,
        me: str | None = None,
        verifier: Callable | None = None,
        chat_template_names: Sequence[str] = (),
        cache_dir: str | None = None,
        compatibility: Callable[[dict], str] | None = None,
    ):
        self.api = api
        self.dry_run = dry_run
        self.me = me
        self.verifier = verifier
        self.chat_template_names = list(chat_template_names)
        self.cache_dir = cache_dir
        self.err = sys.stderr
        self._bar = None  # the progress bar while a run is going on
        # entry -> the engine compatibility section (Markdown); see engine_compatibility
        self.compatibility = compatibility if compatibility is not None else engine_compatibility
        self._compatibility: dict[str, str] = {}

    def publish_repo(self, repo_id: str, entry: dict) -> RepoResult:
        name = entry["name"]
        try:
            return self._publish_repo(repo_id, entry)
        except PublishError as exc:
            return RepoResult(repo_id, name, FAILED, str(exc))
        except Exception as exc:  # one repo's trouble must not stop the run
            return RepoResult(repo_id, name, FAILED, describe_error(exc))

    def _publish_repo(self, repo_id: str, entry: dict) -> RepoResult:
        name, template = entry["name"], entry["template"]
        snap = fetch_snapshot(self.api, repo_id, self.cache_dir or tempfile.gettempdir())

        existing = snap.config.get(KEY)
        if existing is not None:
            if existing == template:
                return RepoResult(repo_id, name, UNCHANGED, f"{TOKENIZER_CONFIG} already holds this template")
            return RepoResult(
                repo_id, name, SKIPPED,
                f"{TOKENIZER_CONFIG} already holds a different {KEY}; not overwritten (compare it with '{name}')",
            )

        templates = snap.chat_templates
        if not templates:
            raise PublishError("the repository has no chat template to verify against")
        if self.chat_template_names:
            missing = [n for n in self.chat_template_names if n not in templates]
            if missing:
                raise PublishError(
                    f"no chat template named {', '.join(missing)} (the repository has: {', '.join(templates)})"
                )
            templates = {n: templates[n] for n in self.chat_template_names}

        pr = find_open_pr(self.api, repo_id, self.me)
        if pr is not None:
            return RepoResult(repo_id, name, SKIPPED, f"pull request #{pr.num} is already open", url=pr.url)

        problems, cases = [], 0
        for tname, source in templates.items():
            ok, text, count = self.verify_one(entry, tname, source)
            cases += count
            if not ok:
                problems.append(f"{tname}: {text}")
        if problems:
            hint = "" if self.chat_template_names or len(templates) == 1 else (
                " (use --chat-template NAME to verify only the named chat template the format is meant for)")
            raise PublishError("verification against the repository's chat template failed, not pushed: "
                               + "; ".join(problems) + hint)

        new_text = insert_key(snap.config_text, KEY, template)
        diff = unified_diff(repo_id, snap.config_text, new_text)
        if self.dry_run:
            return RepoResult(repo_id, name, WOULD_OPEN, f"verified against {', '.join(templates)}", diff=diff)

        from huggingface_hub import CommitOperationAdd

        info = self.api.create_commit(
            repo_id,
            operations=[CommitOperationAdd(path_in_repo=TOKENIZER_CONFIG, path_or_fileobj=new_text.encode("utf-8"))],
            commit_message=PR_TITLE,
            commit_description=pr_description(repo_id, entry, list(templates), snap.sha, cases or None,
                                              self.compatibility_of(entry)),
            create_pr=True,
            parent_commit=snap.sha,  # the PR starts from the exact file we edited
        )
        url = getattr(info, "pr_url", None)
        return RepoResult(repo_id, name, OPENED, f"verified against {', '.join(templates)}", url=url, diff=diff)

    def verify_one(self, entry: dict, tname: str, source: str) -> tuple[bool, str, int]:
        """Verify the entry's template against one chat template: (ok, short explanation, cases run)."""
        verify = self.verifier or _default_verifier()
        options = entry_verify_options(entry, source)
        try:
            report = verify(entry["template"], source, options=options, supports=entry.get("supports"))
        except Exception as exc:  # a broken template or bad options: refuse, with the reason
            return False, f"verification error: {type(exc).__name__}: {_first_line(exc)}", 0
        count = _case_count(report) or 0
        if report.ok:
            return True, "", count
        # The whole report (per-case diffs) goes to stderr; the summary gets one line.
        self.log(f"{entry['name']} vs chat template {tname!r}:\n{_report_text(report)}\n")
        return False, _short_report(report), count

    def log(self, text: str) -> None:
        _write(self.err, self._bar, text)

    def compatibility_of(self, entry: dict) -> str:
        """The engine matrix of one template, measured once per run."""
        key = json.dumps([entry["name"], entry["template"]], sort_keys=True)
        if key not in self._compatibility:
            try:
                self._compatibility[key] = self.compatibility(entry)
            except Exception as exc:  # the matrix informs; it never stops a publication
                self._compatibility[key] = f"Engine compatibility was not measured: {type(exc).__name__}: {exc}"
        return self._compatibility[key]

    def run(self, targets: Sequence[tuple[str, dict]], *, out=None, err=None) -> list[RepoResult]:
        out = out or sys.stdout
        err = self.err = err or sys.stderr
        results = []
        bar = None
        if _isatty(err) and targets:
            from tqdm.auto import tqdm

            bar = self._bar = tqdm(total=len(targets), unit="repo", file=err, leave=False)
        shown: set[str] = set()
        for index, (repo_id, entry) in enumerate(targets, 1):
            if bar is not None:
                bar.set_description(repo_id)
            if self.dry_run and entry["name"] not in shown:  # what the pull requests of this template will say
                shown.add(entry["name"])
                _write(out, bar, f"== serving engines: {entry['name']}\n{self.compatibility_of(entry)}\n")
            result = self.publish_repo(repo_id, entry)
            results.append(result)
            if self.dry_run and result.diff:
                _write(out, bar, result.diff)
            if bar is not None:
                bar.update(1)
            else:
                err.write(f"[{index}/{len(targets)}] {repo_id}: {result.status}\n")
                err.flush()
        if bar is not None:
            bar.close()
            self._bar = None
        return results


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _write(out, bar, text: str) -> None:
    if bar is not None:
        bar.write(text.rstrip("\n"), file=out)
    else:
        out.write(text)
    out.flush()


def summary_table(results: Sequence[RepoResult]) -> str:
    rows = [("STATUS", "REPOSITORY", "TEMPLATE", "DETAIL")]
    order = {status: i for i, status in enumerate(_STATUS_ORDER)}
    for r in sorted(results, key=lambda r: order.get(r.status, len(order))):
        detail = r.url if r.url and r.status == OPENED else r.detail
        if r.url and r.status != OPENED:
            detail = f"{r.detail}: {r.url}"
        rows.append((r.status, r.repo_id, r.template, detail))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3] for row in rows]
    counts = {status: sum(r.status == status for r in results) for status in _STATUS_ORDER}
    shown = [OPENED if not any(r.status == WOULD_OPEN for r in results) else WOULD_OPEN, UNCHANGED, SKIPPED, FAILED]
    lines.append(", ".join(f"{counts[s]} {s}" for s in shown))
    return "\n".join(line.rstrip() for line in lines) + "\n"
