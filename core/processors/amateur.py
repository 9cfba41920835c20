"""The amateur of contrastive decoding, as the ``contrastive_amateur`` option names it (torch-free:
the stage registry checks the option with it, and the window imports the registry).

``""`` is off; ``"layer:L"`` the output of the model's first L decoder layers through the logit
lens (DoLa, Chuang et al. 2023); ``"layer:auto"`` DoLa's dynamic choice of that layer; anything
else a second, smaller model by name (``"tiny.en"``), which the task loads beside the expert
(``core.speculative.draft.Companion``).
"""

from __future__ import annotations

from dataclasses import dataclass

LAYER_PREFIX = "layer:"


@dataclass(frozen=True)
class Amateur:
    """A parsed ``contrastive_amateur`` value.

    Attributes:
        kind: "model" (a second model, by name) or "layer" (an early layer, DoLa).
        model: the model's name ("tiny.en") for kind "model"; "" otherwise.
        layer: the number of decoder layers whose output is the premature layer (1 = the
            first layer's output, as transformers' ``dola_layers`` index hidden states and
            as ``early-exit:L``), or None for ``layer:auto`` (DoLa's dynamic choice).
    """

    kind: str
    model: str = ""
    layer: int | None = None

    @property
    def text(self) -> str:
        """As the user writes it ("tiny.en", "layer:3", "layer:auto")."""
        if self.kind == "model":
            return self.model
        return LAYER_PREFIX + ("auto" if self.layer is None else str(self.layer))


def parse_amateur(value: str) -> Amateur | None:
    """``contrastive_amateur`` -> ``Amateur``; None for "" (off).

    Raises:
        ValueError: "layer:" followed by neither "auto" nor a whole number >= 1, or a model
            name with spaces.
    """
    value = value.strip()
    if not value:
        return None
    if value.startswith(LAYER_PREFIX):
        rest = value[len(LAYER_PREFIX):].strip()
        if rest == "auto":
            return Amateur("layer")
        if not rest.isdigit() or int(rest) < 1:
            raise ValueError(
                f"contrastive_amateur {value!r}: after 'layer:' give 'auto' or the number of decoder layers "
                "whose output is the amateur (1, 2, ...; below the model's layer count)"
            )
        return Amateur("layer", layer=int(rest))
    if any(c.isspace() for c in value):
        raise ValueError(f"contrastive_amateur {value!r}: a model name has no spaces (e.g. tiny.en), or use layer:L")
    return Amateur("model", model=value)
