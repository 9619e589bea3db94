"""Drop-in adapters: LoongSage (loongsage), NeMo Gym (nemo_gym), NexAU (nexau)."""
