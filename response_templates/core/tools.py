"""Typing tool-call arguments with the JSON schemas of the tools the model was offered.

Models often write every argument as text (`<parameter=days>3</parameter>`); the tool's schema says that `days` is
an integer. Given `tools=`, parsed calls get their arguments converted as transformers 5.25 does it.
"""

from __future__ import annotations

from typing import Any, Callable

from .content import read_python_literal
from .limits import load_json


def tool_parameters(tools: list | None) -> dict[str, dict]:
    """Tool name -> its schema's `properties`, from JSON schemas (bare or wrapped in {"type": "function", ...})
    or Python functions with type hints and docstrings."""
    parameters: dict[str, dict] = {}
    if tools is not None and not isinstance(tools, (list, tuple)):
        raise TypeError(f"tools must be a list of tools (JSON schema dicts or Python functions), got {type(tools).__name__}")
    for index, tool in enumerate(tools or []):
        if callable(tool) and not isinstance(tool, dict):
            tool = _schema_of_function(tool)
        elif not isinstance(tool, dict):
            raise TypeError(
                f"tools[{index}] is {type(tool).__name__} {tool!r:.60}: each tool must be a JSON schema dict (bare or "
                '{"type": "function", "function": {...}}) or a Python function'
            )
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            params = function.get("parameters")
            properties = params.get("properties") if isinstance(params, dict) else None
            parameters[function["name"]] = properties if isinstance(properties, dict) else {}
    return parameters


def _schema_of_function(function: Callable) -> dict:
    try:
        from transformers.utils import get_json_schema
    except ImportError as error:  # the core does not need transformers, except to read Python functions
        raise TypeError(
            f"tools: {getattr(function, '__name__', function)!r} is a Python function; turning it into a JSON schema "
            "needs transformers (get_json_schema). Pass its JSON schema instead, or install transformers."
        ) from error
    return get_json_schema(function)


def schema_types(schema: Any) -> tuple[str, ...]:
    """The JSON types a parameter schema allows, in the order given (unions and `nullable` included).

    Nested unions are walked with an explicit stack: a tool schema may come from an API request and be nested
    arbitrarily deep."""
    found: list[str] = []
    last_null = -1  # where "null" was last added to `found`
    # (schema, None): visit it; (schema, start): after its union options, its `nullable` (found[start:] is its own)
    stack: list[tuple[Any, int | None]] = [(schema, None)]
    while stack:
        node, start = stack.pop()
        if start is not None:
            if node.get("nullable") and last_null < start:
                found.append("null")
                last_null = len(found) - 1
            continue
        if not isinstance(node, dict):
            continue
        start = len(found)
        declared = node.get("type")
        if isinstance(declared, str):
            declared = [declared]
        for kind in declared if isinstance(declared, list) else ():
            if isinstance(kind, str):
                found.append(kind)
                if kind == "null":
                    last_null = len(found) - 1
        stack.append((node, start))
        options = []
        for union in ("anyOf", "oneOf"):
            listed = node.get(union)
            if listed is None:
                continue
            if not isinstance(listed, list):
                raise TypeError(f"a tool schema's {union!r} must be a list of schemas, got {type(listed).__name__} {listed!r:.80}")
            options += listed
        stack.extend((option, None) for option in reversed(options))
    return tuple(found)


def call_problem(value: Any, *, shaped_only: bool = False) -> str | None:
    """What makes the value of a `tool_calls` region not a list of calls a client can run, or None: each call needs a
    name (a non-empty string), and arguments that are not JSON of something other than an object (`[1]`, `"[]"`,
    `5`). Arguments that are text but not JSON pass: a template that reads calls leniently keeps what the model wrote
    there (so does OpenAI's own API: clients validate arguments). Calls are `{"type": "function", "function":
    {"name", "arguments"}}`, or bare `{"name", "arguments"}`; with `shaped_only`, values of another shape (a custom
    template's own dicts) are not judged."""
    stack = [value]
    position = 0
    while stack:
        call = stack.pop()
        if isinstance(call, list):  # a list of calls, or a repeated region's own list of them
            stack.extend(reversed(call))
            continue
        where = f"tool call {position}"
        position += 1
        if not isinstance(call, dict):
            if shaped_only:
                continue
            return f"{where} is not an object (got {type(call).__name__})"
        inner = call.get("function")
        function: dict = inner if isinstance(inner, dict) else call
        if shaped_only and function is call and "name" not in call and "arguments" not in call:
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            return f"{where} has no name (a non-empty string): got {name!r:.80}"
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = load_json(arguments)
            except ValueError:
                continue  # text as the model wrote it (see above)
        if arguments is not None and not isinstance(arguments, dict):
            return f"{where} ({name!r}): its arguments must be a JSON object, got {type(arguments).__name__} {arguments!r:.80}"
    return None


def _as_integer(raw: str) -> Any:
    try:
        return int(raw)
    except ValueError:
        number = float(raw)  # "3.0" is an integer in JSON Schema
        if not number.is_integer():
            raise
        return int(number)


def _as_number(raw: str) -> Any:
    number = float(raw)
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError("not a JSON number")
    return int(number) if number.is_integer() and "." not in raw else number


def _structured(raw: str) -> Any:
    """JSON, or else a Python literal: chat templates that render arguments with Python's str() (Seed-OSS,
    MiniCPM5) write `{'metadata': False}`, and models trained on them do too. transformers reads JSON only and
    keeps such a value as text (a deliberate difference, docs/differences.md)."""
    try:
        return load_json(raw)
    except ValueError as error:
        # only text that can be a Python dict or list is worth a second reading
        if raw.lstrip()[:1] not in ("{", "["):
            raise
        try:
            return read_python_literal(raw)
        except ValueError:
            raise error from None


def convert_text(raw: str, types: tuple[str, ...]) -> Any:
    """The first of `types` that `raw` reads as; the text itself when none does (or the type is string)."""
    for kind in types:
        try:
            if kind == "integer":
                return _as_integer(raw)
            if kind == "number":
                return _as_number(raw)
            if kind == "boolean":
                word = raw.strip().lower()
                if word in ("true", "1", "false", "0"):
                    return word in ("true", "1")
            elif kind == "null":
                if raw.strip() in ("null", "None"):
                    return None
            elif kind in ("object", "array"):
                decoded = _structured(raw)
                if isinstance(decoded, dict if kind == "object" else list):
                    return decoded
        except ValueError:
            continue
    return raw


def type_tool_calls(value: Any, parameters: dict[str, dict], typed_syntax: bool, nested: bool = False) -> Any:
    """Convert, in place, the arguments of the tool calls in `value` (a call, or lists of them nested to any
    depth, walked without recursion). With `typed_syntax` (json, python-call-list), parameters that allow strings
    keep what the model wrote. With `nested` (xml-inline's `nested_elements`, our extension), the text leaves of
    object and list arguments are typed too, by the schemas of their properties and items."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            # in order: calls sharing one arguments dict (a transform may build them) are typed first by the first
            stack.extend(reversed(item))
        else:
            _type_call(item, parameters, typed_syntax, nested)
    return value


def _child_schema(schema: dict, key: str) -> Any:
    properties = schema.get("properties")
    if isinstance(properties, dict) and key in properties:
        return properties[key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def type_nested(value: Any, schema: Any) -> Any:
    """`value` (text, or dicts and lists of text read from nested elements) typed by its JSON schema: text by
    `convert_text`, empty text as an empty object or list where the schema wants one (the chat template writes
    both as nothing), dict members by `properties` (or `additionalProperties`), list items by `items`. A list read
    from one `<item>` child where the schema wants an object (not a list) is the one-key object `{"item": ...}`,
    which the chat template writes the same way. Parts without a schema stay as read. Depth is bounded by the reader."""
    if not isinstance(schema, dict):
        return value
    types = schema_types(schema)
    if isinstance(value, str):
        if value == "":
            for kind in types:
                if kind in ("object", "array"):
                    return {} if kind == "object" else []
                if kind == "string":
                    break
        return convert_text(value, types) if types else value
    if isinstance(value, list) and len(value) == 1 and "object" in types and "array" not in types:
        value = {"item": value[0]}
    if isinstance(value, dict):
        for key, member in value.items():
            value[key] = type_nested(member, _child_schema(schema, key))
    elif isinstance(value, list):
        items = schema.get("items")
        return [type_nested(item, items) for item in value]
    return value


def _type_call(value: Any, parameters: dict[str, dict], typed_syntax: bool, nested: bool = False) -> None:
    function = value.get("function") if isinstance(value, dict) else None
    if not isinstance(function, dict):
        return
    name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return
    properties = parameters.get(name)
    if not properties:
        return
    for key, argument in arguments.items():
        if key not in properties:
            continue
        try:
            if nested:
                arguments[key] = type_nested(argument, properties[key])
                continue
            types = schema_types(properties[key])
        except TypeError as error:
            raise TypeError(f"tools: parameter {key!r} of {name!r}: {error}") from None
        if not types or (typed_syntax and "string" in types):
            continue
        if isinstance(argument, str):
            arguments[key] = convert_text(argument, types)
        elif isinstance(argument, list) and "array" not in types:
            # repeated keys gathered by merge_duplicates: convert each
            arguments[key] = [convert_text(item, types) if isinstance(item, str) else item for item in argument]
