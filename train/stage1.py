"""Train the stage 1 adapter (decompose a turn into claims) from a recipe's silver data.

    accelerate launch train/stage1.py --config recipes/smollm2-135m-cpu.yaml [--train.max_steps 50]
    python train/stage1.py --config recipes/smollm2-135m-cpu.yaml train.learning_rate=1e-4

Multi-GPU: add `--config_file recipes/accelerate/{ddp,fsdp,deepspeed_zero3}.yaml` after `accelerate launch`.
"""

if __name__ == "__main__":
    from _launch import launch  # train/ is on sys.path when this file is run

    launch("stage1")
