"""GRUE task ``iwslt2017``: English -> German translation of TED talks (RL4LMs' IWSLT 2017 en-de).

Data: ``IWSLT/iwslt2017`` config ``iwslt2017-en-de`` in the Hub's Parquet conversion (pinned commit of the
refs/convert/parquet branch; the repository itself is a loading script). Prompt: ``"translate English
to German: " + en``; ``references = [de]``. Reward: 1 - TER.

    hfrl train --task iwslt2017 --alg nlpo
"""

from __future__ import annotations

from hfrl.tasks.data import parquet_builder
from hfrl.tasks.translation import en_de

build = parquet_builder(__file__, en_de, "iwslt2017")
