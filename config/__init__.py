"""Recipes: one YAML file holds teacher, data, student, LoRA, training and evaluation settings, so ``distill``,
``train``, ``eval`` and ``score`` read the same file. :mod:`.recipe` holds the typed sections, :mod:`.loading`
reads YAML and overrides into them, :mod:`.cli_args` exposes every field as a command-line flag."""

from .loading import MOVED, load_recipe, parse_overrides
from .recipe import (
                     LEAK_POLICIES,
                     Backend,
                     DataConfig,
                     DataSource,
                     DistillConfig,
                     EvalSettings,
                     LeakPolicy,
                     LoraSettings,
                     PipelineConfig,
                     PromptStyle,
                     Recipe,
                     RecipeError,
                     Rule,
                     ServingSettings,
                     SplitBy,
                     StageMode,
                     StudentConfig,
                     TeacherConfig,
                     TrainSettings,
                     WorldConfig,
)

__all__ = ["LEAK_POLICIES", "MOVED", "Backend", "DataConfig", "DataSource", "DistillConfig", "EvalSettings",
           "LeakPolicy", "LoraSettings", "PipelineConfig", "PromptStyle", "Recipe", "RecipeError", "Rule",
           "ServingSettings", "SplitBy", "StageMode", "StudentConfig", "TeacherConfig", "TrainSettings",
           "WorldConfig", "load_recipe", "parse_overrides"]
