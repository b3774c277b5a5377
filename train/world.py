"""Train the world-knowledge adapter (TRUE / FALSE / NOT ENOUGH KNOWLEDGE for LACKING EVIDENCE claims) from a
recipe's silver data (``pipeline.world.enabled: true`` when distilling writes its ``world/`` dataset).

    accelerate launch train/world.py --config recipes/smollm2-135m-cpu.yaml pipeline.world.enabled=true
    python train/world.py --config recipes/smollm2-135m-cpu.yaml train.learning_rate=1e-4

The adapter is saved beside the other three (``<train.output_dir>/world``) and the scorer loads it with them.
"""

if __name__ == "__main__":
    from _launch import launch  # train/ is on sys.path when this file is run

    launch("world")
