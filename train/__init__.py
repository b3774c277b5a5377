"""One LoRA/QLoRA adapter per VISTA stage, trained with TRL + PEFT."""
