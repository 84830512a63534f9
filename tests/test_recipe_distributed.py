"""A recipe launched in two CPU processes is one distributed job (gloo): the Trainer's parallel mode is DISTRIBUTED,
each rank trains its shard of every global batch, rank 0 alone prepares the vocabulary and the word alignments and
writes the exports while the other waits and reads, and the output folder holds one model that loads. A launch that
cannot be one job is refused in one line before any work (exit 2).

The launches are those of recipes/README.md: ``accelerate launch --config_file recipes/accelerate/multi_cpu.yaml``
and ``torchrun --nproc_per_node 2``, one per family (two families each), on the smoke configurations cut to a few
steps. Each is compared with a single-process run of the same global batch and seed: equal within
``EQUAL_TOLERANCE``, where the flags make the two the same computation up to float rounding (see
``test_two_processes_train_one_model_equal_to_one_process``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from ports import free_port
from recipe_support import import_recipe
from safetensors.torch import load_file
from transformers import TrainingArguments

from bitext_hf.training import run_recipe

# The slow set (`python -m pytest -m slow`, which CI also runs): every recipe launched as several processes (torchrun, accelerate launch).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ["recipes/align_contrastive.py", "--config", "recipes/configs/align_contrastive-smoke.yaml"]
FEW_STEPS = ["--max_steps", "4", "--save_steps", "4", "--held_out", "20", "--eval_before_training", "false"]
LAUNCHER_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU")


def _clean_environment() -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key not in LAUNCHER_VARIABLES}
    return {**environment, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


def _launch(launcher: list[str], output_dir: Path, *extra: str, environment=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*launcher, *RECIPE, "--output_dir", str(output_dir), *FEW_STEPS, *extra],
        cwd=ROOT,
        env=environment or _clean_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )


ACCELERATE = [
    shutil.which("accelerate") or "accelerate",
    "launch",
    "--config_file",
    "recipes/accelerate/multi_cpu.yaml",
    "--num_processes",
    "2",
]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


@dataclass(frozen=True)
class Family:
    """One recipe's 2-process launch and its single-process reference: the same global batch and seed."""

    recipe: str
    model_class: str
    launcher: list[str]
    # The smoke configuration cut to 4 steps of a small sample, and what makes the two runs one computation.
    flags: tuple[str, ...]
    # The reference's batch: the whole global batch in one micro-batch, or (where a micro-batch is a unit of the
    # loss) the ranks' micro-batches accumulated.
    reference: tuple[str, ...]
    arguments: str  # the recipe module's third argument class
    # What each rank logs of the global batch; Laser3's items are whole batches of 16 sentences, one per rank.
    shard: str = "of 32 (16 examples per device)"
    # Lines of the job's log and how often: what rank 0 prepared once and the other rank read.
    logged: tuple[tuple[str, int], ...] = ()
    checkpoints: tuple[str, ...] = ()

    def command(self, output_dir: Path, *extra: str) -> list[str]:
        flags = ["--config", f"recipes/configs/{CONFIGS[self.recipe]}.yaml", "--output_dir", str(output_dir)]
        return [*flags, "--max_steps", "4", *self.flags, *extra]


CONFIGS = {
    "align_contrastive": "align_contrastive-smoke",
    "train_musr": "musr-smoke",
    "distill_wolof": "distill_wolof-smoke",
    "train_onealigner": "onealigner-smoke",
}
# Float rounding only: the two runs sum the same numbers in another order (recipes/README.md has the measures).
EQUAL_TOLERANCE = 1e-6
# No dropout (each rank draws its own masks) and plain SGD (Adam divides each gradient coordinate by its own
# magnitude, so a weight whose gradient is zero but for rounding moves by the learning rate in the direction of that
# rounding: see recipes/README.md).
# Without warmup and at a learning rate SGD moves these weights by more than the tolerance in four steps, so that
# a difference in what the two runs compute shows.
SAME_COMPUTATION = (
    *("--dropout", "0", "--optim", "sgd", "--report_to", "none"),
    *("--warmup_steps", "0", "--learning_rate", "0.01"),
)
FAMILIES = {
    # The paper's strong objective: every link of the global batch is a negative (each rank gathers the other's
    # linked token states, gather_across_devices), so one process scores the same links at once.
    "align_contrastive": Family(
        "align_contrastive",
        "ContrastiveAlignedEncoder",
        ACCELERATE,
        (
            *SAME_COMPUTATION,
            *("--objective", "strong", "--max_pairs", "300", "--held_out", "20", "--eval_before_training", "false"),
            *("--save_steps", "4", "--per_device_train_batch_size", "16"),
        ),
        ("--per_device_train_batch_size", "32"),
        "ModelArguments",
        # Rank 0 aligned each language once; rank 1 read both.
        logged=(("word alignments cached in", 2), ("word alignments read from", 2)),
        checkpoints=("checkpoint-4",),
    ),
    # Both stages; each rank's loss weighs by its share of the global batch's target tokens.
    "train_musr": Family(
        "train_musr",
        "MuSREncoderDecoder",
        TORCHRUN,
        (
            *SAME_COMPUTATION,
            *("--train_examples", "200", "--held_out", "20", "--tokenizer_training_texts", "1000"),
            *("--vocab_size", "300", "--per_device_train_batch_size", "16"),
        ),
        ("--per_device_train_batch_size", "32"),
        "ArchitectureArguments",
    ),
    # An item of the recipe's data is a whole batch of one task (distil, self or MLM): a 2-process step trains two
    # such batches, one per rank, which one process trains as two accumulated micro-batches.
    "distill_wolof": Family(
        "distill_wolof",
        "Laser3Student",
        ACCELERATE,
        (*SAME_COMPUTATION, *("--held_out", "20", "--vocab_size", "300", "--per_device_train_batch_size", "16")),
        ("--gradient_accumulation_steps", "2"),
        "StudentArguments",
        "of 2 (1 examples per device)",
        checkpoints=("checkpoint-4",),  # the Trainer saves the last step of a steps strategy
    ),
    # The in-batch negatives and OneAligner's in-batch normalization are the global batch's: each rank gathers the
    # other's token features (gather_across_devices), so one process scores the same 32 at once.
    "train_onealigner": Family(
        "train_onealigner",
        "OneAlignerModel",
        TORCHRUN,
        (
            *SAME_COMPUTATION,
            *("--example_budget", "400", "--held_out", "0", "--eval_size", "20", "--ablation", "false"),
            *("--eval_before_training", "false", "--eval_strategy", "no", "--save_strategy", "no"),
            *("--tokenizer_training_texts", "1000", "--vocab_size", "300", "--per_device_train_batch_size", "16"),
        ),
        ("--per_device_train_batch_size", "32"),
        "ModelArguments",
    ),
}


# The l2 objective has no negatives: each rank's mean over its own links weighs by its share of the global batch's
# links (global_share).
FAMILIES["align_contrastive-l2"] = dataclasses.replace(
    FAMILIES["align_contrastive"],
    flags=tuple("l2" if flag == "strong" else flag for flag in FAMILIES["align_contrastive"].flags),
)


def _run_here(family: Family, output_dir: Path) -> None:
    """The single-process reference, in this process (it has torch and transformers imported already)."""
    recipe = import_recipe(family.recipe)
    arguments = getattr(recipe, family.arguments)
    flags = [str(ROOT / flag) if flag.startswith("recipes/") else flag for flag in family.command(output_dir)]
    run_recipe(recipe.main, recipe.ScriptArguments, TrainingArguments, arguments, args=[*flags, *family.reference])


def _assert_one_job(family: Family, result: subprocess.CompletedProcess, output_dir: Path) -> None:
    """Two ranks ran as one job on their shards, rank 0 alone prepared and exported, one model folder loads."""
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stderr
    for rank in (0, 1):
        assert f"distributed job: rank {rank} of 2 (gloo)" in log
        assert f"rank {rank} of 2: shard {rank} of each global batch {family.shard}" in log
    assert log.count("reading the tokenizer rank 0 saved") == 1
    assert log.count(f"Saved {family.model_class} to {output_dir} ") == 1
    for line, count in family.logged:
        assert log.count(line) == count, line
    assert not list(output_dir.parent.glob(".*staging")) and not list(output_dir.glob(".*staging"))
    assert sorted(path.name for path in output_dir.glob("checkpoint-*")) == list(family.checkpoints)

    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(output_dir), trust_remote_code=True)
    assert type(model).__name__ == family.model_class
    encoder = SentenceTransformer(str(output_dir), device="cpu", trust_remote_code=True)
    assert encoder.encode(["Hallo Welt", "hello world"]).shape[0] == 2


def _assert_equal_weights(expected_dir: Path, actual_dir: Path) -> None:
    expected, actual = load_file(expected_dir / "model.safetensors"), load_file(actual_dir / "model.safetensors")
    assert expected.keys() == actual.keys()
    worst = max((expected[name].double() - actual[name].double()).abs().max().item() for name in expected)
    assert worst <= EQUAL_TOLERANCE, f"{worst:.3g} apart"


# In the suite: each family's launch, two through multi_cpu.yaml and two through torchrun. The l2 variant of
# align_contrastive (the link share instead of gathered negatives; MuSR's launch covers the share) runs with
# ``pytest -m slow``.
IN_THE_SUITE = ("align_contrastive", "train_musr", "distill_wolof", "train_onealigner")


@pytest.mark.parametrize(
    "recipe",
    [recipe if recipe in IN_THE_SUITE else pytest.param(recipe, marks=pytest.mark.slow) for recipe in FAMILIES],
)
def test_two_processes_train_one_model_equal_to_one_process(tmp_path, recipe):
    """One 2-process launch per family (recipes/README.md's commands: multi_cpu.yaml and torchrun) is one job, and
    its weights equal within EQUAL_TOLERANCE those of one process with the same global batch and seed, which runs
    here meanwhile. Both see the same global batches: the ranks' shards are the two halves of the single process's
    batch (or its two accumulated micro-batches).

    What the flags keep out, because it cannot be equal: dropout (each rank draws its own masks) and Adam (see
    SAME_COMPUTATION). The in-batch negatives (align_contrastive's strong objective, OneAligner, whose scores are also
    normalized over the batch) are the global batch's: each rank gathers the other's features. The means over the
    global batch: each link (align_contrastive's l2) and each target token (MuSR) of the global batch weighs the
    same; Laser3's items are whole batches of one task each, whose means weigh the same in both runs.
    """
    family = FAMILIES[recipe]
    two, one = tmp_path / "two", tmp_path / "one"
    launcher = [
        *family.launcher,
        *(["--main_process_port", str(free_port())] if family.launcher is ACCELERATE else []),
    ]
    with subprocess.Popen(
        [*launcher, f"recipes/{family.recipe}.py", *family.command(two)],
        cwd=ROOT,
        env=_clean_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as launch:
        try:
            _run_here(family, one)
        finally:
            stdout, stderr = launch.communicate(timeout=300)
    _assert_one_job(family, subprocess.CompletedProcess(launch.args, launch.returncode, stdout, stderr), two)
    _assert_equal_weights(one, two)


def test_launches_that_cannot_be_one_job_are_refused_before_any_work(tmp_path):
    """``accelerate launch --num_processes 2`` with no config file (as accelerate's own docs show it) and
    ``accelerate launch --cpu --num_processes 2`` each start one process, and a ``WORLD_SIZE`` of 2 in a process no
    launcher started: each refused in one line, nothing run. The launches run side by side (each spends its time
    importing)."""
    plain, accelerate_cpu, no_launcher = tmp_path / "plain", tmp_path / "accelerate_cpu", tmp_path / "no_launcher"
    accelerate = [shutil.which("accelerate") or "accelerate", "launch"]
    with ThreadPoolExecutor(3) as pool:
        refused_plain = pool.submit(_launch, [*accelerate, "--num_processes", "2"], plain)
        refused_cpu = pool.submit(_launch, [*accelerate, "--cpu", "--num_processes", "2"], accelerate_cpu)
        environment = {**_clean_environment(), "WORLD_SIZE": "2"}
        refused_world = pool.submit(_launch, [sys.executable], no_launcher, environment=environment)
        results, world = [refused_plain.result(), refused_cpu.result()], refused_world.result()

    for result, output_dir in zip(results, (plain, accelerate_cpu), strict=True):
        assert result.returncode != 0
        refusal = [line for line in result.stderr.splitlines() if line.startswith("align_contrastive: error:")]
        assert refusal == [
            "align_contrastive: error: accelerate launch started one process where several were asked "
            "(--num_processes without --multi_gpu or a multi-process config file, or --cpu without MPI, starts one): "
            "use accelerate launch --config_file recipes/accelerate/multi_cpu.yaml --num_processes N, or torchrun "
            "--nproc_per_node N (recipes/README.md)"
        ]
        assert "exit status 2" in result.stderr  # accelerate reports the recipe's usage error (exit 2)
        assert not output_dir.exists()

    assert world.returncode == 2
    assert (
        world.stderr.strip()
        .splitlines()[-1]
        .startswith("align_contrastive: error: WORLD_SIZE=2 but this process was not started by a launcher")
    )
    assert "Traceback" not in world.stderr
    assert not no_launcher.exists()
