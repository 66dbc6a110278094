"""Authoring tools, loaded on demand: for the people who write, check and publish templates.

- `rendering`: chat templates rendered as transformers renders them (sandboxed jinja2, a frozen clock);
- `verification`: `verify()`, a template checked against a real chat template;
- `inference`: `infer_template()`, a template inferred from a chat template;
- `engines`: which library templates each engine's own parser accepts;
- `publish`: pull requests that add verified templates to Hub model repositories.

They may use every layer below them (core, library, integrations); nothing below imports them.
"""
