"""Task ``faithdial``: knowledge-grounded dialogue trained on FaithDial
(Leftover Lunch); see :mod:`hfrl.tasks.knowledge_dialogue` for the data, rewards and arguments.

hfrl train --task faithdial --alg a_lol
"""

from __future__ import annotations

import functools

from hfrl.tasks.knowledge_dialogue import build_task

build = functools.partial(build_task, __file__, "faithdial")
build.__module__ = __name__  # type: ignore[attr-defined]  # its arguments are checked as hfrl's own task's
