"""Task ``reddit_pos``: Reddit response generation trained on upvoted comments (Leftover Lunch);
see :mod:`hfrl.tasks.reddit` for the data, rewards and arguments.

hfrl train --task reddit_pos --alg a_lol --task-arg safety_model=PATH
"""

from __future__ import annotations

import functools

from hfrl.tasks.reddit import build_task
from hfrl.tasks.reddit import task_spec as _task_spec

build = functools.partial(build_task, __file__, "pos")
build.__module__ = __name__  # its arguments are checked as hfrl's own task's
task_spec = functools.partial(_task_spec, __file__)  # the YAML as the task arguments shape it (cards)
