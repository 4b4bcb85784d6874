"""The run layer, above the trainers: a run directory and its ``config.yaml`` (``run_config``),
building a run from names (``experiment``, behind ``hfrl train``), opening one (``run_dir``),
evaluating it (``run_eval``), exporting and pushing it (``hub``) and talking to it (``chat``)."""
