"""Find WordNet for METEOR: in NLTK's data paths (``nltk.download("wordnet")``), or in Debian's
``wordnet-base`` location (``/usr/share/wordnet``), which NLTK cannot read as it is.

Debian's copy lacks NLTK's ``lexnames`` file (this module serves it from memory) and lies outside
NLTK's allowed data roots (this module adds it to ``nltk.data.path``). When neither is there,
:func:`load_wordnet` fails with the commands that install it; METEOR never runs without it.

    python -c "from hfrl.metrics.wordnet import load_wordnet; print(load_wordnet().synsets('dog')[0])"
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path
from typing import Any

DEBIAN_WORDNET = "/usr/share/wordnet"
INSTALL_HINT = (
    "METEOR needs WordNet: run `python -m nltk.downloader wordnet` (or set NLTK_DATA to a folder holding "
    "corpora/wordnet), or on Debian/Ubuntu `apt-get install wordnet-base wordnet-sense-index`"
)
# WordNet 3.0's lexicographer files (wninput(5WN) / lexnames(5WN)): number, name, part of speech
# (1 noun, 2 verb, 3 adjective, 4 adverb). NLTK reads them from a `lexnames` file that Debian omits.
_LEXNAMES = [
    "adj.all",
    "adj.pert",
    "adv.all",
    "noun.Tops",
    "noun.act",
    "noun.animal",
    "noun.artifact",
    "noun.attribute",
    "noun.body",
    "noun.cognition",
    "noun.communication",
    "noun.event",
    "noun.feeling",
    "noun.food",
    "noun.group",
    "noun.location",
    "noun.motive",
    "noun.object",
    "noun.person",
    "noun.phenomenon",
    "noun.plant",
    "noun.possession",
    "noun.process",
    "noun.quantity",
    "noun.relation",
    "noun.shape",
    "noun.state",
    "noun.substance",
    "noun.time",
    "verb.body",
    "verb.change",
    "verb.cognition",
    "verb.communication",
    "verb.competition",
    "verb.consumption",
    "verb.contact",
    "verb.creation",
    "verb.emotion",
    "verb.motion",
    "verb.perception",
    "verb.possession",
    "verb.social",
    "verb.stative",
    "verb.weather",
    "adj.ppl",
]
_POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def lexnames_text() -> str:
    """The ``lexnames`` file NLTK expects: ``NN<TAB>name<TAB>pos``, one line per lexicographer file."""
    return "".join(f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}\n" for i, name in enumerate(_LEXNAMES))


def _nltk_wordnet() -> Any:
    import nltk

    for resource in ("corpora/wordnet", "corpora/wordnet.zip"):
        try:
            nltk.data.find(resource)
        except LookupError:
            continue
        from nltk.corpus import wordnet

        return wordnet
    return None


def _debian_wordnet(source: str = DEBIAN_WORDNET) -> Any:
    if not os.path.isfile(os.path.join(source, "data.noun")):
        return None
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class DebianWordNet(WordNetCorpusReader):
        """NLTK's reader on Debian's files, with the ``lexnames`` file Debian omits served from memory."""

        def open(self, fileid: str) -> Any:
            return io.StringIO(lexnames_text()) if fileid == "lexnames" else super().open(fileid)

        def map_wn(
            self, version: str = "wordnet"
        ) -> None:  # a map to another WordNet version serves only OMW languages
            return None

    # NLTK >= 3.9 reads only under its data roots: allow Debian's folder.
    root = str(Path(source).resolve())
    if root not in nltk.data.path:
        nltk.data.path.append(root)
    with warnings.catch_warnings():  # "multilingual functions are not available": METEOR needs none
        warnings.simplefilter("ignore", UserWarning)
        return DebianWordNet(root, None)


def load_wordnet(debian_path: str = DEBIAN_WORDNET) -> Any:
    """NLTK's WordNet reader, from NLTK's data or Debian's ``wordnet-base``; a clear error otherwise."""
    from hfrl.metrics.base import cached

    def build() -> Any:
        reader = _nltk_wordnet() or _debian_wordnet(debian_path)
        if reader is None:
            raise RuntimeError(INSTALL_HINT)
        reader.ensure_loaded() if hasattr(reader, "ensure_loaded") else None
        return reader

    return cached(("wordnet", debian_path), build)
