"""A pytest plugin that runs transformers' own test file for the response parser (tests/utils/test_chat_parsing.py in
the transformers repository) against this package: `transformers.utils.chat_parsing`'s `ResponseParser`,
`parse_response` and the helpers its tests import are replaced by ours, and the tokenizer methods are patched. The
Hub tokenizers those tests load are replaced by a tiny tokenizer built offline. Used by
tests/test_transformers_own_tests.py."""

from __future__ import annotations

import tempfile

_built: list = []


def _offline_tokenizers() -> None:
    from transformers import AutoTokenizer

    real = AutoTokenizer.from_pretrained.__func__

    def from_pretrained(cls, name, *args, **kwargs):
        if name in ("hf-internal-testing/tiny-random-gpt2", "openai-community/gpt2"):
            from tokenizer_factory import build_tokenizer_dir

            if not _built:
                _built.append(str(build_tokenizer_dir(tempfile.mkdtemp(prefix="rt-own-tests-"), chat_template=None)))
            name = _built[0]
        return real(cls, name, *args, **kwargs)

    AutoTokenizer.from_pretrained = classmethod(from_pretrained)


def pytest_configure(config):
    import transformers.utils.chat_parsing as chat_parsing
    import transformers.utils.chat_parsing.response_parser as response_parser

    import response_templates as rt
    from response_templates.integrations import transformers_patch as integration
    from response_templates.core import tools

    _offline_tokenizers()
    integration.patch()
    chat_parsing.ResponseParser = rt.ResponseParser
    chat_parsing.parse_response = rt.parse_response
    response_parser._coerce = tools.convert_text
    response_parser._schema_types = tools.schema_types


def pytest_collection_finish(session):
    # the test module must have taken our names (it imports them when collected, after pytest_configure)
    for item in session.items:
        module = item.module
        for name in ("ResponseParser", "parse_response", "_coerce", "_schema_types"):
            value = getattr(module, name, None)
            if value is not None and not value.__module__.startswith("response_templates"):
                raise RuntimeError(f"{module.__name__}.{name} is transformers' own, not ours: the swap failed")
