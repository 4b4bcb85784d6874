"""One merge of a task's config sections (hfrl.tasks.base.merge_sections): the Python API
(``task.config_for(alg, ConfigClass, chosen)``) and ``hfrl train`` (hfrl.runs.experiment.task_config)
resolve the same settings for every task x algorithm x estimator family. They disagreed: on ``numbers``, PPO
with rloo got ``ent_coef`` 0.01 from the API (no ``critic_free`` section) and 0.0 from the command line."""

import pytest

from hfrl.runs.config_values import RUN_KEYS
from hfrl.runs.experiment import task_config
from hfrl.tasks import TASKS, describe_task
from hfrl.tasks.base import Task, read_task_yaml
from hfrl.trainers import ALGORITHMS, algorithm_trainer
from hfrl.trainers.schema import config_schema
from hfrl.utils.registry import import_path


def _configs(task: str) -> dict:
    try:
        return describe_task(task).configs
    except (TypeError, ValueError):  # a task that needs an argument to describe itself: its plain YAML
        return read_task_yaml(import_path(TASKS[task].partition(":")[0]).__file__).get("configs") or {}


# hfrl's own algorithms (TRL's are named by their trainer's translation, which a config class does not carry)
OWN = sorted(alg for alg in ALGORITHMS if config_schema(alg).translate is None)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_the_api_and_the_cli_resolve_the_same_task_settings(task):
    configs = _configs(task)
    spec = Task(task, None, [], configs=configs)
    for alg in OWN:
        schema, config_class = config_schema(alg), algorithm_trainer(alg).config_class
        families = [None, "gae", "rloo"] if "advantage_estimator" in schema.names else [None]
        for estimator in families:
            chosen = {} if estimator is None else {"advantage_estimator": estimator}
            run_keys, fields = task_config(spec, alg, schema, chosen)
            api = spec.config_for(alg, config_class, chosen)
            assert {k: v for k, v in api.items() if k not in RUN_KEYS} == fields, (task, alg, estimator)
            assert {k: v for k, v in api.items() if k in RUN_KEYS} == run_keys, (task, alg, estimator)


def test_the_api_reads_the_critic_free_section_for_a_critic_free_estimator():
    from hfrl import PPOConfig

    task = Task("numbers", None, [], configs=_configs("numbers"))
    assert task.config_for("ppo", PPOConfig)["ent_coef"] == 0.01
    assert task.config_for("ppo", PPOConfig, {"advantage_estimator": "rloo"})["ent_coef"] == 0.0  # was 0.01
