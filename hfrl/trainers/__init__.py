"""Trainers: one folder per algorithm family (``online/``: PPO, NLPO, A2C, TRPO; ``offline/``: the A-LoL
family), and ``trl_adapters`` for TRL's own trainers on hfrl tasks."""

# Algorithm name -> trainer class (each carries its ``config_class``). Imported lazily.
ALGORITHMS: dict[str, str] = {
    "ppo": "hfrl.trainers.online:PPOTrainer",
    "nlpo": "hfrl.trainers.online:NLPOTrainer",
    "a2c": "hfrl.trainers.online:A2CTrainer",
    "trpo": "hfrl.trainers.online:TRPOTrainer",
    "grpo": "hfrl.trainers.trl_adapters:GRPOTrainer",
    "rloo": "hfrl.trainers.trl_adapters:RLOOTrainer",
    "sft": "hfrl.trainers.trl_adapters:SFTTrainer",
    "dpo": "hfrl.trainers.trl_adapters:DPOTrainer",
    "nll": "hfrl.trainers.offline:ALoLTrainer",
    "wbc": "hfrl.trainers.offline:ALoLTrainer",
    "r_gold": "hfrl.trainers.offline:ALoLTrainer",
    "r_lol": "hfrl.trainers.offline:ALoLTrainer",
    "a_lol": "hfrl.trainers.offline:ALoLTrainer",
    "a_lol_ref_free": "hfrl.trainers.offline:ALoLTrainer",
    "a_lol_seq": "hfrl.trainers.offline:ALoLTrainer",
    "a_lol_kl": "hfrl.trainers.offline:ALoLTrainer",
    "pro": "hfrl.trainers.offline.pro_trainer:PROTrainer",
}
