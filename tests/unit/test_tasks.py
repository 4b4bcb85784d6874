"""Task interface: the synthetic tasks through load_task."""

import pytest

from hfrl.tasks import load_task
from hfrl.trainers.schema import config_schema
from hfrl.utils.registry import UnknownNameError


@pytest.mark.parametrize(
    ("name", "reward", "new_tokens"), [("numbers", "increasing_numbers", 20), ("dates", "contains_date", 30)]
)
def test_synthetic_task_schema(name, reward, new_tokens):
    task = load_task(name, train_size=10, eval_size=3)
    assert sorted(task.dataset) == ["test", "train", "validation"]
    assert task.dataset["train"].num_rows == 10 and task.dataset["test"].num_rows == 3
    row = task.dataset["train"][0]
    assert row == {"prompt": "", "references": []}
    assert task.reward_funcs[0].__name__ == reward
    assert task.config_for("ppo", config_schema("ppo").sections)["max_new_tokens"] == new_tokens
    assert set(task.metrics) == {"mean_length", "distinct_n"}
    scores = task.metrics["distinct_n"](prompts=["", ""], completions=["1 2", "1 3"])
    assert scores == {"distinct_1": 0.75, "distinct_2": 1.0}


def test_unknown_task():
    with pytest.raises(UnknownNameError, match="unknown task 'numbrs'; did you mean 'numbers'"):
        load_task("numbrs")


def test_task_arguments_are_checked():
    with pytest.raises(
        UnknownNameError, match=r"unknown argument of task 'numbers' 'train_sz'; did you mean 'train_size'"
    ):
        load_task("numbers", train_sz=3)
    assert len(load_task("numbers", train_size=3, eval_size=1).dataset["train"]) == 3


def test_task_config_keeps_the_defaults_each_algorithm_has(tmp_path):
    """A task's shared `defaults` reach each algorithm as far as its config has the fields; a key of an
    algorithm's own section that is no field is an error naming the task and the section."""
    from datasets import Dataset, DatasetDict

    from hfrl.runs.experiment import task_config
    from hfrl.tasks.base import Task
    from hfrl.trainers.schema import config_schema

    data = DatasetDict(train=Dataset.from_dict({"prompt": ["a"], "references": [[]]}))
    configs = {
        "defaults": {"max_new_tokens": 7, "not_a_field": 1, "rewards": ["contains_date"]},
        "ppo": {"cliprange": 0.1},
    }
    task = Task(name="t", dataset=data, reward_funcs=[], configs=configs)
    run, fields = task_config(task, "ppo", config_schema("ppo"))
    assert run == {"rewards": ["contains_date"]} and fields == {"max_new_tokens": 7, "cliprange": 0.1}
    assert "not_a_field" not in task_config(task, "trpo", config_schema("trpo"))[1]
    task.configs["ppo"] = {"cg_damping": 0.1}  # a TRPO field, not PPO's
    with pytest.raises(UnknownNameError, match=r"unknown config key \(in task 't', section 'ppo'\) 'cg_damping'"):
        task_config(task, "ppo", config_schema("ppo"))


def test_with_model_and_reward_configs():
    from hfrl.tasks.base import apply_reward_config, with_model

    specs = [{"id": "weighted", "args": {"rewards": [{"id": "intent_accuracy", "weight": 0.5}, "meteor"]}}, "bleu"]
    swapped = with_model(specs, ("intent_accuracy",), "local/dir")
    assert swapped[0]["args"]["rewards"][0] == {"id": "intent_accuracy", "weight": 0.5, "args": {"model": "local/dir"}}
    assert specs[0]["args"]["rewards"][0] == {"id": "intent_accuracy", "weight": 0.5}  # the input is untouched
    spec = {"name": "t", "rewards": ["a"], "configs": {"defaults": {"kl_coef": 0.1, "x": 1}},
            "reward_configs": {"other": {"rewards": ["b"], "configs": {"defaults": {"kl_coef": 0.2}}}}}  # fmt: skip
    other = apply_reward_config(spec, "other")
    assert other["rewards"] == ["b"] and other["configs"]["defaults"] == {"kl_coef": 0.2, "x": 1}
    assert apply_reward_config(spec, None) is spec


def test_config_values_keep_strategy_strings():
    from hfrl.runs.experiment import coerce_numbers, parse_overrides
    from hfrl.trainers.schema import config_schema

    tokens = ["--save_strategy", "no", "--bf16", "false", "--disable_tqdm", "yes", "--top", "{top_k: 20}"]
    parsed = parse_overrides(tokens)
    assert parsed == {"save_strategy": "no", "bf16": False, "disable_tqdm": "yes", "top": {"top_k": 20}}
    coerced = coerce_numbers({**parsed, "learning_rate": "5e-4"}, config_schema("ppo"))
    assert coerced["save_strategy"] == "no" and coerced["disable_tqdm"] is True and coerced["learning_rate"] == 5e-4


def _declared(task):
    return task.name, task.default_model, task.configs, task.description


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("numbers", {}),
        ("dates", {"train_size": 4}),
        ("numbers", {"default_model": "gpt2", "name": "mine", "configs": {"ppo": {"seed": 3}}}),
        ("imdb", {"data": "openings", "reward": "vader"}),
    ],
)
def test_the_spec_declares_what_the_built_task_has(name, kwargs):
    from hfrl.tasks import describe_task

    assert _declared(describe_task(name, **kwargs)) == _declared(load_task(name, **kwargs))


def test_task_arguments_name_the_model_and_merge_configs():
    task = load_task("numbers", default_model="gpt2", configs={"ppo": {"seed": 3}})
    assert task.default_model == "gpt2"
    assert task.configs["ppo"]["seed"] == 3 and task.configs["ppo"]["learning_rate"] == 2e-3  # merged, not replaced


def test_the_spec_checks_arguments_as_the_builder_does():
    from hfrl.tasks import describe_task

    with pytest.raises(UnknownNameError, match="unknown argument of task 'numbers' 'train_sz'"):
        describe_task("numbers", train_sz=3)
    with pytest.raises(ValueError, match="imdb: data must be one of hub, openings, got 'nowhere'"):
        describe_task("imdb", data="nowhere")


def test_config_for_takes_the_algorithms_config_class():
    """``task.config_for("ppo", PPOConfig)`` (the docs' Python form) is what ``--alg ppo`` starts from: the
    sections the config class inherits, not ``defaults`` alone, and of ``defaults`` (shared by algorithms whose
    configs differ) only the class's fields; without them, one line saying what to pass."""
    from hfrl import NLPOConfig, PPOConfig
    from hfrl.tasks.base import Task

    configs = {"defaults": {"a": 1, "max_new_tokens": 8}, "online": {"b": 2}, "ppo": {"c": 3}, "nlpo": {"d": 4}}
    task = Task("t", None, [], configs=configs)
    assert task.config_for("ppo", PPOConfig) == {"max_new_tokens": 8, "b": 2, "c": 3}
    assert task.config_for("nlpo", NLPOConfig) == {"max_new_tokens": 8, "b": 2, "c": 3, "d": 4}
    # section names alone: no class to keep defaults to
    assert task.config_for("ppo", config_schema("ppo").sections) == {"a": 1, "max_new_tokens": 8, "b": 2, "c": 3}
    with pytest.raises(TypeError, match=r"^config_for\('ppo'\) needs the algorithm's config class .*PPOConfig"):
        task.config_for("ppo")


def test_the_critic_free_section_follows_the_runs_estimator():
    """A task's ``critic_free`` section reaches an online algorithm whose estimator (the user's choice,
    else the task's) trains no critic, over the algorithm's own section and under the user's choices; GAE
    runs, offline and TRL algorithms never read it; its keys are checked like any section's."""
    from hfrl.runs.experiment import resolve_run, task_config
    from hfrl.tasks.base import Task

    configs = {"defaults": {"ent_coef": 0.01}, "ppo": {"learning_rate": 2e-3}, "critic_free": {"ent_coef": 0.0}}
    task = Task(name="t", dataset=None, reward_funcs=[], configs=configs)
    ppo = config_schema("ppo")
    assert task_config(task, "ppo", ppo)[1]["ent_coef"] == 0.01  # GAE, the default
    for estimator in ("rloo", "group_norm", "dr_grpo", "reinforce_baseline", "reinforce"):
        assert task_config(task, "ppo", ppo, {"advantage_estimator": estimator})[1] == {
            "ent_coef": 0.0, "learning_rate": 2e-3}  # fmt: skip
    assert task_config(task, "ppo", ppo, {"advantage_estimator": "my_pkg.mod:Mine"})[1]["ent_coef"] == 0.01
    task.configs["ppo"]["advantage_estimator"] = "rloo"  # the task's own choice counts too
    assert task_config(task, "nlpo", config_schema("nlpo"))[1]["ent_coef"] == 0.0  # nlpo inherits ppo
    assert task_config(task, "ppo", ppo, {"advantage_estimator": "gae"})[1]["ent_coef"] == 0.01
    assert "ent_coef" not in task_config(task, "a_lol", config_schema("a_lol"))[1]
    task.configs["critic_free"] = {"top_mask": 0.9}  # an NLPO field: PPO has none
    with pytest.raises(UnknownNameError, match=r"\(in task 't', section 'critic_free'\) 'top_mask'"):
        task_config(task, "ppo", ppo)
    # numbers ships one: the README's task with --advantage_estimator rloo
    run = resolve_run(
        task="numbers", alg="ppo", model="tiny", overrides={"advantage_estimator": "rloo", "num_generations": 4}
    )  # rloo's groups: checked
    assert run["ent_coef"] == 0.0 and run["learning_rate"] == 2e-3
    assert resolve_run(task="numbers", alg="ppo", model="tiny")["ent_coef"] == 0.01
    flagged = {"advantage_estimator": "rloo", "num_generations": 4, "ent_coef": 0.02}  # the user's flag wins
    assert resolve_run(task="numbers", alg="ppo", model="tiny", overrides=flagged)["ent_coef"] == 0.02
