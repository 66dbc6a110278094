"""The `response-templates` command line."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from response_templates import ResponseParser, parse_response
from response_templates.cli import main
from response_templates.library import get_entry, get_template, list_templates
from response_templates.integrations.openai_adapter import accumulate_chunks, to_openai_message

QWEN3_OUTPUT = (
    "<think>\nThe user wants the weather.\n</think>\n\nChecking.\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}}\n</tool_call><|im_end|>'
)
QWEN3_PROMPT = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
TOOLS = [{
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}},
}]
# A small template of our own, for --template FILE.
BRACKETS = {
    "start_anchor": "<s>",
    "defaults": {"role": "assistant"},
    "fields": {"reasoning_content": {"open": "[think]", "close": "[/think]"}, "content": {}},
}


def run(argv, capsys, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path, name: str, content) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def assert_one_line_error(code: int, err: str, *words: str) -> None:
    assert code != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("response-templates: error: "), err
    for word in words:
        assert word in lines[0]


# --- list / show -------------------------------------------------------------------------------------------


def test_list_names_every_template(capsys):
    code, out, _ = run(["list"], capsys)
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert names == list_templates()


def test_list_json(capsys):
    code, out, _ = run(["list", "--json"], capsys)
    assert code == 0
    assert [item["name"] for item in json.loads(out)] == list_templates()


def test_show_prints_the_entry(capsys):
    code, out, _ = run(["show", "qwen3"], capsys)
    assert code == 0 and json.loads(out) == get_entry("qwen3")


def test_show_unknown(capsys):
    code, _, err = run(["show", "no-such-template"], capsys)
    assert code == 2
    assert_one_line_error(code, err, "no-such-template", "qwen3")


# --- parse -------------------------------------------------------------------------------------------------


def test_parse_by_model_from_file(tmp_path, capsys):
    path = write(tmp_path, "out.txt", QWEN3_OUTPUT)
    code, out, _ = run(["parse", "--model", "Qwen/Qwen3-8B", "--prefix", QWEN3_PROMPT, path], capsys)
    assert code == 0
    assert json.loads(out) == parse_response(QWEN3_OUTPUT, get_template("qwen3"), prefix=QWEN3_PROMPT)


def test_parse_template_file_from_stdin_with_prefix_file(tmp_path, capsys, monkeypatch):
    template = write(tmp_path, "brackets.json", BRACKETS)
    prefix = write(tmp_path, "prompt.txt", "<s>old<s>[think] pre")
    code, out, _ = run(["parse", "--template", template, "--prefix-file", prefix, "--compact"], capsys,
                       stdin=" filled [/think] answer", monkeypatch=monkeypatch)
    assert code == 0
    assert out.count("\n") == 1
    assert json.loads(out) == {"role": "assistant", "reasoning_content": "pre filled", "content": "answer"}


def test_parse_library_entry_file(tmp_path, capsys, monkeypatch):
    entry = write(tmp_path, "entry.json", get_entry("qwen3"))
    code, out, _ = run(["parse", "--template", entry], capsys, stdin=QWEN3_OUTPUT, monkeypatch=monkeypatch)
    assert code == 0 and json.loads(out)["tool_calls"][0]["function"]["name"] == "get_weather"


def test_parse_tools_cast_arguments(tmp_path, capsys, monkeypatch):
    tools = write(tmp_path, "tools.json", TOOLS)
    code, out, _ = run(["parse", "--template", "qwen3", "--tools", tools], capsys, stdin=QWEN3_OUTPUT,
                       monkeypatch=monkeypatch)
    assert code == 0
    assert json.loads(out)["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "days": 3}


def test_parse_truncated_drops_the_unfinished_call(capsys, monkeypatch):
    cut = QWEN3_OUTPUT[: QWEN3_OUTPUT.index('"days"')]
    code, out, _ = run(["parse", "--template", "qwen3", "--truncated"], capsys, stdin=cut, monkeypatch=monkeypatch)
    assert code == 0
    assert json.loads(out) == {"role": "assistant", "reasoning_content": "The user wants the weather.",
                               "content": "Checking."}


def test_parse_stream_prints_events(capsys, monkeypatch):
    code, out, _ = run(["parse", "--template", "qwen3", "--stream", "--chunk-size", "7", "--prefix", QWEN3_PROMPT],
                       capsys, stdin=QWEN3_OUTPUT, monkeypatch=monkeypatch)
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    parser = ResponseParser(get_template("qwen3"), QWEN3_PROMPT)
    events = list(parser.initial_events)
    for start in range(0, len(QWEN3_OUTPUT), 7):
        events += parser.feed(QWEN3_OUTPUT[start : start + 7])
    message, final = parser.finalize()
    assert lines == events + final + [{"type": "message", "message": message}]


def test_parse_openai_prints_chunks(capsys, monkeypatch):
    argv = ["parse", "--model", "Qwen/Qwen3-8B", "--openai", "--chunk-size", "5", "--early-arguments"]
    code, out, _ = run(argv, capsys, stdin=QWEN3_OUTPUT, monkeypatch=monkeypatch)
    assert code == 0
    chunks = [json.loads(line) for line in out.splitlines()]
    assert {chunk["model"] for chunk in chunks} == {"Qwen/Qwen3-8B"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    got = accumulate_chunks(chunks)
    expected = to_openai_message(parse_response(QWEN3_OUTPUT, get_template("qwen3"), prefix=""))
    for call in got["tool_calls"] + expected["tool_calls"]:
        call.pop("id")
    assert got == expected


# --- errors: one line, non-zero, no traceback ----------------------------------------------------------------


def test_unknown_model(capsys, monkeypatch):
    code, _, err = run(["parse", "--model", "nobody/nothing"], capsys, stdin="x", monkeypatch=monkeypatch)
    assert_one_line_error(code, err, "nobody/nothing", "--template")


@pytest.mark.parametrize("argv,words", [
    (["parse"], ["--model", "--template"]),
    (["parse", "--model", "Qwen/Qwen3-8B", "--template", "qwen3"], ["not both"]),
    (["parse", "--template", "qwen3", "/no/such/file.txt"], ["/no/such/file.txt"]),
    (["parse", "--template", "/no/such/template.json"], ["template.json"]),
    (["parse", "--template", "qwen3", "--stream", "--openai"], ["--stream", "--openai"]),
    (["parse", "--template", "qwen3", "--chunk-size", "0"], ["--chunk-size"]),
    (["frobnicate"], ["frobnicate"]),
    (["parse", "--no-such-option"], ["--no-such-option"]),
])
def test_usage_errors(argv, words, capsys, monkeypatch):
    code, _, err = run(argv, capsys, stdin="", monkeypatch=monkeypatch)
    assert code == 2
    assert_one_line_error(code, err, *words)


def test_invalid_json_and_invalid_template(tmp_path, capsys, monkeypatch):
    bad_json = write(tmp_path, "bad.json", "{not json")
    code, _, err = run(["parse", "--template", bad_json], capsys, stdin="", monkeypatch=monkeypatch)
    assert_one_line_error(code, err, "bad.json", "not valid JSON")

    invalid = {"start_anchor": "<s>", "fields": {"content": {"content": "nope"}}}
    bad_template = write(tmp_path, "bad_template.json", invalid)
    code, _, err = run(["parse", "--template", bad_template], capsys, stdin="", monkeypatch=monkeypatch)
    assert code == 1
    assert_one_line_error(code, err, "content")

    tools = write(tmp_path, "tools.json", {"not": "a list"})
    code, _, err = run(["parse", "--template", "qwen3", "--tools", tools], capsys, stdin="", monkeypatch=monkeypatch)
    assert_one_line_error(code, err, "tools.json", "list")


def test_parse_failure_is_one_line(capsys, monkeypatch):
    code, _, err = run(["parse", "--template", "qwen3"], capsys, stdin="<tool_call>\n{oops}\n</tool_call>",
                       monkeypatch=monkeypatch)
    assert code == 1
    assert_one_line_error(code, err)


def test_console_entry_point_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "response_templates.cli", "list"], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": _package_home()})
    assert result.returncode == 0 and "qwen3" in result.stdout.split()


def _package_home() -> str:
    import response_templates

    return os.path.dirname(os.path.dirname(os.path.abspath(response_templates.__file__)))


# --- verify / push -----------------------------------------------------------------------------------------


def _chat_templates_dir() -> str:
    folder = os.environ.get("RESPONSE_TEMPLATES_CHAT_TEMPLATES")
    if not folder or not os.path.isdir(folder):
        pytest.skip("RESPONSE_TEMPLATES_CHAT_TEMPLATES is not set to the folder of real chat templates")
    return folder


def test_verify_against_a_chat_template(capsys):
    folder = _chat_templates_dir()
    code, out, _ = run(["verify", "--template", "qwen3", "--chat-template",
                        os.path.join(folder, "Qwen--Qwen3-8B.jinja")], capsys)
    assert code == 0, out
    assert "cases ok" in out and "FAILED" not in out


def test_verify_every_listed_chat_template(capsys):
    _chat_templates_dir()
    code, out, _ = run(["verify", "--template", "qwen3"], capsys)
    listed = [item["file"] for item in get_entry("qwen3")["chat_templates"]]
    assert code == 0, out
    assert [line[3:] for line in out.splitlines() if line.startswith("== ")] == listed


def test_verify_reports_a_wrong_template(tmp_path, capsys):
    folder = _chat_templates_dir()
    wrong = write(tmp_path, "wrong.json", {**get_entry("qwen3"), "template": BRACKETS})
    code, out, _ = run(["verify", "--template", wrong, "--chat-template",
                        os.path.join(folder, "Qwen--Qwen3-8B.jinja")], capsys)
    assert code == 1 and "FAILED" in out


def test_verify_needs_a_chat_template(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RESPONSE_TEMPLATES_CHAT_TEMPLATES", raising=False)
    code, _, err = run(["verify", "--template", "qwen3"], capsys)
    assert_one_line_error(code, err, "--chat-template")


def test_push_delegates_to_the_publisher(monkeypatch):
    from response_templates.cli import push as publish

    seen = {}

    def fake_main(argv, **kwargs):
        seen["argv"], seen["kwargs"] = argv, kwargs
        return 3

    monkeypatch.setattr(publish, "main", fake_main)
    assert main(["push", "--family", "Qwen3", "--dry-run"]) == 3
    assert seen == {"argv": ["--family", "Qwen3", "--dry-run"], "kwargs": {"prog": "response-templates push"}}


def test_push_help_names_the_command(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["push", "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith("usage: response-templates push")


def test_verify_every_listed_chat_template_in_subfolders(capsys):
    # gemma-4 lists chat templates in a subfolder (trl/...) with per-file verify options
    _chat_templates_dir()
    code, out, _ = run(["verify", "--template", "gemma-4"], capsys)
    listed = [item["file"] for item in get_entry("gemma-4")["chat_templates"]]
    assert code == 0, out
    assert [line[3:] for line in out.splitlines() if line.startswith("== ")] == listed


# --- saved tokenizers, chat template lookup, input decoding, usage (issue 14.6, 14.7) ------------------------

CHATML_PROMPT = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
CHATML_OUTPUT = '<think>Rain?</think>Checking.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><|im_end|>'
CHATML_MESSAGE = {
    "role": "assistant", "reasoning_content": "Rain?", "content": "Checking.",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
}


@pytest.fixture(scope="module")
def saved_tokenizer(tmp_path_factory):
    """A tokenizer saved with save_pretrained, carrying our test response template (as a Hub repo would)."""
    pytest.importorskip("transformers")
    from tokenizer_factory import RESPONSE_TEMPLATE, build_tokenizer_dir, load_tokenizer

    tok = load_tokenizer(build_tokenizer_dir(tmp_path_factory.mktemp("built") / "tok"))
    tok.response_template = RESPONSE_TEMPLATE
    out = tmp_path_factory.mktemp("saved") / "my-model"
    tok.save_pretrained(str(out))
    return out


@pytest.mark.parametrize("how", ["--template DIR", "--template DIR/tokenizer_config.json", "--model DIR"])
def test_parse_with_a_saved_tokenizer(saved_tokenizer, how, capsys, monkeypatch):
    option, value = how.split()
    path = value.replace("DIR", str(saved_tokenizer))
    code, out, err = run(["parse", option, path, "--prefix", CHATML_PROMPT], capsys, stdin=CHATML_OUTPUT,
                         monkeypatch=monkeypatch)
    assert code == 0, err
    assert json.loads(out) == CHATML_MESSAGE


def test_saved_tokenizer_without_template_uses_the_library_match(tmp_path, capsys, monkeypatch):
    folder = _chat_templates_dir()
    chat_template = open(os.path.join(folder, "Qwen--Qwen3-8B.jinja"), encoding="utf-8").read()
    write(tmp_path, "tokenizer_config.json", {"tokenizer_class": "Qwen2Tokenizer", "chat_template": chat_template})
    code, out, err = run(["parse", "--template", str(tmp_path), "--compact"], capsys, stdin=QWEN3_OUTPUT,
                         monkeypatch=monkeypatch)
    assert code == 0, err
    assert json.loads(out) == parse_response(QWEN3_OUTPUT, get_template("qwen3"), prefix="")


def test_saved_tokenizer_errors_name_the_path(tmp_path, capsys, monkeypatch):
    code, _, err = run(["parse", "--template", str(tmp_path)], capsys, stdin="x", monkeypatch=monkeypatch)
    assert code == 2
    assert_one_line_error(code, err, str(tmp_path), "tokenizer_config.json")
    write(tmp_path, "tokenizer_config.json", {"tokenizer_class": "X", "chat_template": "{{ messages }}"})
    code, _, err = run(["parse", "--model", str(tmp_path)], capsys, stdin="x", monkeypatch=monkeypatch)
    assert_one_line_error(code, err, "tokenizer_config.json", "no response_template", "--template")


def test_a_folder_named_like_a_library_template_is_not_a_tokenizer(tmp_path, capsys, monkeypatch):
    (tmp_path / "qwen3").mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["parse", "--template", "qwen3", "--compact"], capsys, stdin=QWEN3_OUTPUT,
                         monkeypatch=monkeypatch)
    assert code == 0, err
    assert json.loads(out) == parse_response(QWEN3_OUTPUT, get_template("qwen3"), prefix="")


def test_verify_a_saved_tokenizer_against_its_own_chat_template(saved_tokenizer, tmp_path, capsys):
    # The test tokenizer's small template does not read every canonical case back: the report says which.
    code, out, _ = run(["verify", "--template", str(saved_tokenizer)], capsys)
    # transformers 5 saves chat_template.jinja; 4.x keeps it in tokenizer_config.json
    assert out.split("\n")[0] in ("== chat_template.jinja", "== chat_template") and "cases ok" in out
    assert code == 1 and "[default] plain: FAILED" in out
    # A tokenizer directory holding Qwen3's chat template and the library's qwen3 template passes.
    folder = _chat_templates_dir()
    (tmp_path / "chat_template.jinja").write_bytes(open(os.path.join(folder, "Qwen--Qwen3-8B.jinja"), "rb").read())
    write(tmp_path, "tokenizer_config.json", {"tokenizer_class": "Qwen2Tokenizer", "response_template": get_template("qwen3")})
    code, out, _ = run(["verify", "--template", str(tmp_path / "tokenizer_config.json")], capsys)
    assert code == 0, out
    assert out.startswith("== chat_template.jinja\n") and "FAILED" not in out


def test_verify_finds_a_chat_template_by_name_in_the_folder(tmp_path, capsys, monkeypatch):
    shared = _chat_templates_dir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "chatml-test.jinja").write_bytes(open(os.path.join(shared, "Qwen--Qwen3-8B.jinja"), "rb").read())
    template = "qwen3"
    monkeypatch.setenv("RESPONSE_TEMPLATES_CHAT_TEMPLATES", str(tmp_path))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the name is not a file here: it is looked up in the folder
    for name in ("chatml-test.jinja", "sub/chatml-test.jinja"):
        code, out, _ = run(["verify", "--template", template, "--chat-template", name], capsys)
        assert code == 0, out
        assert out.splitlines()[0] == f"== {os.path.basename(name)}" and "FAILED" not in out
    code, _, err = run(["verify", "--template", template, "--chat-template", "nothing.jinja"], capsys)
    assert_one_line_error(code, err, "nothing.jinja", str(tmp_path))


def test_verify_reports_an_invalid_template_once(tmp_path, capsys, monkeypatch):
    from tokenizer_factory import CHAT_TEMPLATE

    chat = write(tmp_path, "chat.jinja", CHAT_TEMPLATE)
    bad = write(tmp_path, "bad.json", {"fields": {"content": {"content": "nope"}}})
    code, out, err = run(["verify", "--template", bad, "--chat-template", chat], capsys)
    assert code == 1 and out == ""
    assert_one_line_error(code, err, "content", "nope")


def test_undecodable_input_file_is_named(tmp_path, capsys, monkeypatch):
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\xe9".encode("latin-1"))
    code, out, err = run(["parse", "--template", "qwen3", str(path)], capsys)
    assert code == 1 and out == ""
    assert_one_line_error(code, err, "latin1.txt", "not UTF-8", "0xe9", "offset 3")
    code, _, err = run(["parse", "--template", "qwen3", "--prefix-file", str(path)], capsys, stdin="x",
                       monkeypatch=monkeypatch)
    assert_one_line_error(code, err, "prefix file", "latin1.txt")


@pytest.mark.parametrize("mode", [[], ["--stream"], ["--openai"]])
def test_bad_utf8_on_stdin_is_a_clear_error_not_bad_json(mode):
    env = {**os.environ, "PYTHONPATH": _package_home(), "LC_ALL": "C", "PYTHONUTF8": "0"}
    result = subprocess.run([sys.executable, "-m", "response_templates.cli", "parse", "--template", "qwen3", *mode],
                            input=b"ok \xff\xfe then", capture_output=True, timeout=60, env=env)
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.decode().strip() == (
        "response-templates: error: input file <stdin> is not UTF-8 text: byte 0xff at offset 3 (invalid start byte)"
    )


@pytest.mark.parametrize("argv, words", [
    (["parse", "--template", "qwen3", "--early-arguments"], ["--early-arguments", "--openai"]),
    (["parse", "--template", "qwen3", "--stream", "--early-arguments"], ["--early-arguments", "--openai"]),
    (["parse", "--template", "qwen3", "--chunk-size", "4"], ["--chunk-size", "--stream"]),
])
def test_options_that_need_another_are_usage_errors(argv, words, capsys, monkeypatch):
    code, out, err = run(argv, capsys, stdin=QWEN3_OUTPUT, monkeypatch=monkeypatch)
    assert code == 2 and out == ""
    assert_one_line_error(code, err, *words)


CUT_IN_ARGUMENTS = '<think>\nok\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
CUT_AFTER_ARGUMENTS = '<think>\nok\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize("mode", [[], ["--stream"], ["--openai"]])
def test_cut_off_output_hints_at_truncated(mode, capsys, monkeypatch):
    code, _, err = run(["parse", "--template", "qwen3", *mode], capsys, stdin=CUT_IN_ARGUMENTS,
                       monkeypatch=monkeypatch)
    assert code == 1
    assert_one_line_error(code, err, "pass --truncated")
    # parses, but a complete-looking call is still open at the end: a note on stderr, the output unchanged
    code, out, err = run(["parse", "--template", "qwen3", "--compact", *mode], capsys, stdin=CUT_AFTER_ARGUMENTS,
                         monkeypatch=monkeypatch)
    assert code == 0
    assert err.strip() == (
        "response-templates: note: the output ends inside an unfinished tool_calls region; if the generation was "
        "cut off (max tokens), pass --truncated to drop the unfinished part"
    )
    if not mode:
        assert json.loads(out)["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    code, out, err = run(["parse", "--template", "qwen3", "--truncated", *mode], capsys, stdin=CUT_IN_ARGUMENTS,
                         monkeypatch=monkeypatch)
    assert code == 0 and err == ""
    code, out, err = run(["parse", "--template", "qwen3", *mode], capsys, stdin=QWEN3_OUTPUT, monkeypatch=monkeypatch)
    assert code == 0 and err == ""


def test_push_endpoint_must_be_a_url(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["push", "--dry-run", "--endpoint", "notaurl"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--endpoint" in err and "not an http(s) URL: 'notaurl'" in err
