"""What inference returns: `InferredTemplate` (the template or why there is none, confidence, verify summary) and
`InferredResponseTemplate` (a template dict marked as inferred); `InferenceError` for input it cannot use.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class InferredTemplate:
    """What `infer_template` found.

    `template` is a verified version-1 response template, or None when inference gave up (then `reasons`
    says why). `confidence` is in [0, 1]: the share of canonical verify cases that ran and passed, lowered
    when cases could not be rendered. `verified` is the verify summary, `reasons` the undecided points or
    why it gave up, `markers` the pieces found in the renderings, `options` the verify options used.
    """

    template: dict | None
    confidence: float
    verified: str
    reasons: list[str] = field(default_factory=list)
    markers: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    supports: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.template is not None

    def to_dict(self) -> dict:
        return {
            "template": self.template,
            "confidence": self.confidence,
            "verified": self.verified,
            "reasons": self.reasons,
            "markers": self.markers,
            "supports": self.supports,
            "verify_options": self.options,
        }

    def report(self) -> str:
        head = "inferred" if self.ok else "cannot infer"
        lines = [f"{head} (confidence {self.confidence:.2f})"]
        lines += [f"  {key}: {value!r}" for key, value in self.markers.items()]
        if self.verified:
            lines.append("verify: " + self.verified.replace("\n", "\n  "))
        lines += [f"- {reason}" for reason in self.reasons]
        return "\n".join(lines)


class InferredResponseTemplate(dict):
    """A response template dict that was inferred from a chat template, not taken from the library.

    It is a plain dict for every consumer (our parser, transformers', `save_pretrained`); `.inferred` is True
    and `.result` holds the `InferredTemplate` (confidence, verify summary, reasons).
    """

    inferred = True

    def __init__(self, template: dict, result: InferredTemplate):
        super().__init__(template)
        self.result = result
