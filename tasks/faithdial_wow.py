"""Task ``faithdial_wow``: knowledge-grounded dialogue trained on FaithDial and Wizard of Wikipedia together
(Leftover Lunch); see :mod:`hfrl.tasks.knowledge_dialogue` for the data, rewards and arguments.

hfrl train --task faithdial_wow --alg a_lol
"""

from __future__ import annotations

import functools

from hfrl.tasks.knowledge_dialogue import build_task
from hfrl.tasks.knowledge_dialogue import task_spec as _task_spec

build = functools.partial(build_task, __file__, "faithdial_wow")
build.__module__ = __name__  # its arguments are checked as hfrl's own task's
task_spec = functools.partial(_task_spec, __file__)  # the YAML as the task arguments shape it (cards)
