"""`response-templates push`: open Hub pull requests that add verified templates to model repositories
(maintainers). Its options are its own (`response-templates push --help`); the work is `authoring.publish`'s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Callable, Iterable, Sequence

from ..authoring.publish import (
    FAILED,
    KEY,
    TOKENIZER_CONFIG,
    Publisher,
    PublishUsageError,
    describe_error,
    library_entries,
    load_entry_file,
    select_targets,
    summary_table,
)
from .common import PROG


def add_parser(sub) -> None:
    sub.add_parser("push", help="open Hub pull requests adding templates (see `push --help`)", add_help=False)


def run(argv: list[str]) -> int:
    return main(argv, prog=f"{PROG} push")



def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Open pull requests on the Hugging Face Hub that add the library's verified response templates to "
            f"model repositories (the '{KEY}' key of {TOKENIZER_CONFIG}). Each template is verified against the "
            "repository's own chat template first; repos that already hold it or have our pull request open are "
            "skipped, so reruns are safe."
        ),
    )
    parser.add_argument("--family", action="append", default=[], help="only templates of this family (repeatable)")
    parser.add_argument("--template", action="append", default=[], metavar="NAME",
                        help="only this library template (repeatable)")
    parser.add_argument("--model", action="append", default=[], metavar="REPO_ID",
                        help="only this Hub model id (repeatable); may also be one matched by a template's patterns")
    parser.add_argument("--template-file", action="append", default=[], metavar="PATH",
                        help="use this template data file instead of the library (repeatable)")
    parser.add_argument("--chat-template", action="append", default=[], metavar="NAME",
                        help="verify only against this named chat template of each repo, e.g. tool_use "
                             "(default: all of them)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the change for each repository as a unified diff; write nothing")
    parser.add_argument("--token", help="Hub token (default: HF_TOKEN or the token saved by `hf auth login`)")
    parser.add_argument("--endpoint", type=_endpoint_url,
                        help="Hub endpoint URL (default: HF_ENDPOINT or https://huggingface.co)")
    return parser


def _endpoint_url(value: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {value!r} (e.g. https://huggingface.co)")
    return value


def main(argv: Sequence[str] | None = None, *, api=None, entries: Iterable[dict] | None = None,
         verifier: Callable | None = None, prog: str | None = None) -> int:
    """Run the publisher. Returns 0 when nothing failed, 1 when some repository failed, 2 on usage errors.

    ``api`` (an ``HfApi``), ``entries`` (library entries) and ``verifier`` can be injected for testing.
    """
    args = build_parser(prog).parse_args(argv)
    err = sys.stderr
    token = args.token
    try:
        if args.template_file:
            entries = [load_entry_file(path) for path in args.template_file]
        elif entries is None:
            try:
                entries = library_entries()
            except ValueError as exc:  # a malformed library file: its message names the file and key
                raise PublishUsageError(f"cannot load the template library: {exc}") from exc
        targets = select_targets(list(entries), families=args.family, names=args.template, models=args.model)
        if not targets:
            raise PublishUsageError("nothing to publish: the selection contains no models")
        try:
            import huggingface_hub
        except ImportError as exc:
            raise PublishUsageError("publishing needs huggingface_hub: pip install huggingface_hub") from exc
        if api is None:
            api = huggingface_hub.HfApi(endpoint=args.endpoint, token=token)
        if token is None:
            token = getattr(api, "token", None)
            if not isinstance(token, str):  # None, or True for "the saved login"
                token = huggingface_hub.get_token()
        me = None
        if token:
            try:
                me = api.whoami(token=token)["name"]
            except Exception as exc:
                if not args.dry_run:
                    raise PublishUsageError(f"cannot identify the Hub account of the token: {describe_error(exc)}") from exc
        elif not args.dry_run:
            raise PublishUsageError("no Hub token: pass --token, set HF_TOKEN or run `hf auth login` (or use --dry-run)")
    except PublishUsageError as exc:
        err.write(f"error: {_scrub(str(exc), token)}\n")
        return 2

    with tempfile.TemporaryDirectory(prefix="response-templates-push-") as cache_dir:
        publisher = Publisher(api, dry_run=args.dry_run, me=me, verifier=verifier,
                              chat_template_names=args.chat_template, cache_dir=cache_dir)
        results = publisher.run(targets)
    for r in results:
        r.detail = _scrub(r.detail, token)
    sys.stdout.write(_scrub(summary_table(results), token))
    if args.dry_run:
        sys.stdout.write("dry run: nothing was written to the Hub\n")
    return 1 if any(r.status == FAILED for r in results) else 0


def _scrub(text: str, token: str | None) -> str:
    """Never let the token reach the output, whatever an error message contains."""
    return text.replace(token, "***") if token else text

