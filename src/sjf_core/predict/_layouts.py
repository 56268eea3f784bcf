"""Feature layouts by name, so a model file always meets the extractor it was trained with.

A model records its layout in its ONNX ``metadata_props`` under
:data:`META_LAYOUT` (see :mod:`sjf_core.predict._predictor`). ``v1`` is the paper's 19
features (:mod:`sjf_core.predict._features`); ``v2`` is ours (:mod:`sjf_core.predict._features_v2`,
imported only when a v2 model is loaded); ``v2l`` (the shipped default) is v2 plus only the
lexicon column, ``v3`` v2 plus length targets, the instruction/material split and the lexicon
column (both in :mod:`sjf_core.predict._features_lexicon`). In v3 and v2l the last column is
the lexicon score, filled by the predictor from the model's lexicon (:mod:`sjf_core.predict._lexicon`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

__all__ = ["Layout", "get_layout", "LAYOUTS"]


@dataclass(frozen=True)
class Layout:
    """One feature layout.

    Attributes:
        name: layout name ("v1", "v2").
        names: feature names in model-input order.
        extract: text -> float32 array of shape [len(names)].
        extract_many: sequence of texts -> float32 array of shape [N, len(names)].
        fill: (text, out) -> None: write the features into a zeroed float32 row ``out``.
    """

    name: str
    names: tuple[str, ...]
    extract: Callable[[str], np.ndarray]
    extract_many: Callable[[Sequence[str]], np.ndarray]
    fill: Callable[[str, np.ndarray], None]

    @property
    def n_features(self) -> int:
        return len(self.names)


#: layout name -> (module, names attribute, extract, extract_many, fill)
LAYOUTS = {
    "v1": ("sjf_core.predict._features", "FEATURE_NAMES", "extract_v1", "extract_v1_many", "fill_text_v1"),
    "v2": ("sjf_core.predict._features_v2", "FEATURE_NAMES_V2", "extract_v2", "extract_v2_many", "fill_text_v2"),
    "v3": ("sjf_core.predict._features_lexicon", "FEATURE_NAMES_V3", "extract_v3", "extract_v3_many", "fill_text_v3"),
    "v2l": ("sjf_core.predict._features_lexicon", "FEATURE_NAMES_V2L", "extract_v2l", "extract_v2l_many", "fill_text_v2l"),
}

_cache: dict[str, Layout] = {}


def get_layout(name: str) -> Layout:
    """The :class:`Layout` called ``name``.

    Raises:
        ValueError: unknown layout name (or its module is missing).
    """
    lay = _cache.get(name)
    if lay is not None:
        return lay
    spec = LAYOUTS.get(str(name))
    if spec is None:
        raise ValueError(f"unknown feature layout {name!r}; known: {sorted(LAYOUTS)}")
    try:
        mod = importlib.import_module(spec[0])
    except ImportError as exc:
        raise ValueError(f"feature layout {name!r} is not available: {exc}") from exc
    lay = Layout(name, tuple(getattr(mod, spec[1])), getattr(mod, spec[2]), getattr(mod, spec[3]),
                 getattr(mod, spec[4]))
    _cache[name] = lay
    return lay
