"""Model cards and Hub pushes for hfrl's trainers (``hfrl.cards``, ``hfrl.hub``), as a mixin.

Every ``save_model`` into the run directory writes ``README.md`` (the card) and the reward curve;
``push_to_hub`` and pushes during training go through :func:`hfrl.hub.push_run`, which never
uploads ``training_args.bin`` (it holds ``hub_token``) or optimizer state. A trainer using it
declares ``_name``, ``_tag_names`` and ``_paper`` (its card metadata) and ``reward_funcs``.
"""

from __future__ import annotations

import os
from typing import Any


class HubMixin:
    """Mixed into a ``transformers.Trainer`` subclass (before ``Trainer`` in the bases)."""

    # ---- model card and Hub (hfrl.cards, hfrl.hub) -------------------------------------------
    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Save as the Trainer does, then write the model card into the run directory. A push asked
        for by ``args.push_to_hub`` goes through :meth:`push_to_hub` (the model or adapter and its card)."""
        super().save_model(output_dir, _internal_call=True)
        if output_dir is None or os.path.abspath(output_dir) == os.path.abspath(self.args.output_dir):
            self.create_model_card()
        if self.args.push_to_hub and not _internal_call:
            self._push_run(self.args.output_dir, "Model save", self.args.hub_token, self.args.hub_revision, None)

    def _card_kwargs(self) -> dict[str, Any]:
        """What the trainer knows better than the run directory: its card metadata, the live log
        history, its reward functions, a training prompt and, for a run not started by ``hfrl train``
        (no config.yaml), its hyperparameters."""
        import dataclasses

        from transformers import TrainingArguments

        from hfrl.rollout import reward_name

        kwargs: dict[str, Any] = {
            "algorithm": type(self),
            "log_history": self.state.log_history,
            "rewards": [reward_name(f) for f in self.reward_funcs],
        }
        if not os.path.isfile(os.path.join(self.args.output_dir, "config.yaml")):
            inherited = {f.name for f in dataclasses.fields(TrainingArguments)}
            own = [f.name for f in dataclasses.fields(self.args) if f.name not in inherited]
            names = [*own, "learning_rate", "lr_scheduler_type", "max_grad_norm", "seed"]
            kwargs["hyperparameters"] = {name: getattr(self.args, name) for name in names}
        if self.train_dataset is not None and len(self.train_dataset):
            prompt = self.train_dataset[0].get("prompt")  # a TRL trainer may have tokenized it away
            if isinstance(prompt, str) and prompt:
                kwargs["prompt"] = prompt
        return kwargs

    def create_model_card(
        self,
        model_name: str | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        finetuned_from: str | None = None,
        dataset: str | list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Write ``README.md`` (and ``reward_curve.png``) into the output directory (``hfrl.cards``)."""
        if not self.is_world_process_zero():
            return
        # TRL's trainers call this at each checkpoint, before the run dir holds a model: the final save writes it
        saved = ("config.json", "adapter_config.json")
        if not any(os.path.isfile(os.path.join(self.args.output_dir, name)) for name in saved):
            return
        from hfrl.cards import write_card

        write_card(
            self.args.output_dir,
            model_name=model_name,
            license=license,
            tags=[tags] if isinstance(tags, str) else tags,
            base_model=finetuned_from,
            datasets=dataset,
            **self._card_kwargs(),
        )

    def push_to_hub(
        self,
        commit_message: str | None = "End of training",
        blocking: bool = True,
        token: str | None = None,
        revision: str | None = None,
        private: bool | None = None,
        **kwargs: Any,
    ):
        """Save, then upload the model or adapter, tokenizer, card, reward curve, run config and eval
        results to ``args.hub_model_id`` (default: the output directory's name) with
        :func:`hfrl.hub.push_run`. Synchronous (``blocking`` is ignored); returns the ``CommitInfo``."""
        self.save_model(_internal_call=True)
        token, revision = token or self.args.hub_token, revision or self.args.hub_revision
        return self._push_run(self.args.output_dir, commit_message, token, revision, private)

    def _push_from_checkpoint(self, checkpoint_folder: str) -> None:
        """Pushes during training (``hub_strategy``): the checkpoint's model and card through
        :func:`hfrl.hub.push_run`, synchronously; never ``training_args.bin``."""
        if self.args.hub_strategy != "end":
            iteration = self.state.global_step // getattr(self.args, "steps_per_iteration", 1)
            message = f"Training in progress, iteration {iteration}"
            self._push_run(checkpoint_folder, message, self.args.hub_token, self.args.hub_revision, None)

    def _push_run(self, folder: str, commit_message, token, revision, private):
        if not self.is_world_process_zero():
            return None
        from pathlib import Path

        from hfrl.hub import push_run

        return push_run(
            folder,
            self.args.hub_model_id or Path(self.args.output_dir).absolute().name,
            private=private if private is not None else self.args.hub_private_repo,
            token=token,
            commit_message=commit_message,
            revision=revision,
            card_kwargs=self._card_kwargs(),
        )
