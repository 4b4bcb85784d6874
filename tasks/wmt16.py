"""Task ``wmt16``: English -> German news translation on WMT16 (RL4LMs' ``WMT`` data pool, de-en pairs).

Data: ``wmt/wmt16`` Parquet files ``de-en/{split}-*.parquet``. Prompt: ``"translate English to German:
" + en``; ``references = [de]``. Reward and settings: those of ``iwslt2017`` (1 - TER).

    hfrl train --task wmt16 --alg ppo
"""

from __future__ import annotations

from hfrl.tasks.data import parquet_builder
from hfrl.tasks.translation import en_de

build = parquet_builder(__file__, en_de, "wmt16")
