"""Captioning-style consensus metrics from pycocoevalcap: CIDEr-D and SPICE.

CIDEr's n-gram weights (IDF) come from the references of the batch it scores, so a sample's CIDEr
depends on its batch, as in the COCO evaluation. SPICE runs pycocoevalcap's Java scorer and needs Java
and the Stanford CoreNLP 3.6.0 jars (which pycocoevalcap downloads on first use and no package ships):
without them it fails and says what to install. Samples without references get NaN.

    from hfrl.metrics.captioning import Cider
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any, cast

from hfrl.metrics.base import NAN, SampleMetric, reference_lists, require

_WORD = re.compile(r"[\w']+")


def simple_tokenize(text: str) -> str:
    """Lowercased words without punctuation, as COCO's PTB tokenizer leaves them (without Java)."""
    return " ".join(_WORD.findall(text.lower()))


def _ptb_tokenize(texts: dict[int, list[str]]) -> dict[int, list[str]]:
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    return cast(
        dict[int, list[str]], PTBTokenizer().tokenize({i: [{"caption": t} for t in ts] for i, ts in texts.items()})
    )


class Cider(SampleMetric):
    """CIDEr-D (Vedantam et al. 2015) with pycocoevalcap: TF-IDF n-gram consensus with the references.

    ``tokenizer``: ``simple`` (lowercase words, no Java) or ``ptb`` (COCO's Java PTB tokenizer).

    >>> r = Cider()(prompts=["", ""], completions=["a cat sat", ""],
    ...             references=[["a cat sat on the mat"], ["a dog ran"]])
    >>> round(r.per_sample["cider"][0], 4), r.per_sample["cider"][1]
    (3.8938, 0.0)
    """

    name = "cider"

    def __init__(self, tokenizer: str = "simple") -> None:
        if tokenizer not in ("simple", "ptb"):
            raise ValueError(f"cider: tokenizer must be 'simple' or 'ptb', got {tokenizer!r}")
        self.tokenizer = tokenizer

    def _inputs(
        self, completions: list[str], references: Any, metric: str
    ) -> tuple[list[int], dict[int, list[str]], dict[int, list[str]]]:

        refs = reference_lists(references, len(completions), metric)
        kept = [i for i, r in enumerate(refs) if r]
        gts, res = {i: refs[i] for i in kept}, {i: [completions[i]] for i in kept}
        if self.tokenizer == "ptb" and kept:
            gts, res = _ptb_tokenize(gts), _ptb_tokenize(res)
        else:
            gts = {i: [simple_tokenize(r) for r in rs] for i, rs in gts.items()}
            res = {i: [simple_tokenize(c) for c in cs] for i, cs in res.items()}
        return kept, gts, res

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        require("pycocoevalcap", "pycocoevalcap", "cider")
        from pycocoevalcap.cider.cider import Cider as CocoCider

        kept, gts, res = self._inputs(completions, references, "cider")
        out = [NAN] * len(completions)
        if kept:
            _, per = CocoCider().compute_score(gts, res)
            for i, value in zip(sorted(kept), per, strict=True):  # pycocoevalcap scores ids in key order
                out[i] = float(value)
        return {"cider": out}


SPICE_HINT = (
    "SPICE needs Java (apt-get install default-jre-headless) and the Stanford CoreNLP 3.6.0 jars "
    "stanford-corenlp-3.6.0.jar and stanford-corenlp-3.6.0-models.jar in {lib} "
    "(from stanford-corenlp-full-2015-12-09.zip; pycocoevalcap downloads them on first use when online)"
)


def spice_missing() -> str | None:
    """Why SPICE cannot run here, or None when Java and the CoreNLP jars are in place."""
    try:
        import pycocoevalcap.spice as spice
    except ImportError:
        return "SPICE needs pycocoevalcap: pip install 'hfrl[metrics]'"
    lib = os.path.join(os.path.dirname(spice.__file__), "lib")
    jars = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
    if shutil.which("java") is None or not all(os.path.isfile(os.path.join(lib, j)) for j in jars):
        return SPICE_HINT.format(lib=lib)
    return None


class Spice(Cider):
    """SPICE (Anderson et al. 2016) F-score of scene-graph tuples, with pycocoevalcap's Java scorer.

    >>> Spice()(prompts=[""], completions=["a cat"], references=[["a cat"]])  # doctest: +SKIP
    {'spice': 1.0}
    """

    name = "spice"

    def scores(
        self, prompts: list[Any], completions: list[str], references: Any = None, **columns: Any
    ) -> dict[str, list[Any]]:
        reason = spice_missing()
        if reason:
            raise RuntimeError(reason)
        from pycocoevalcap.spice.spice import Spice as CocoSpice

        kept, gts, res = self._inputs(completions, references, "spice")
        out = [NAN] * len(completions)
        if kept:
            _, per = CocoSpice().compute_score(gts, res)
            for i, value in zip(sorted(kept), per, strict=True):
                out[i] = float(value["All"]["f"])
        return {"spice": out}
