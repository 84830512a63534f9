"""Distil a LASER3 student for Wolof (and related Senegambian languages) from a frozen teacher.

The paper's setup (Heffernan et al., 2022, section 5.3): a student Transformer trained from random initialisation
with its own vocabulary, on Wolof bitexts together with related Senegambian languages, plus English self-training
(anchoring the student in the teacher's space); MLM on monolingual Wolof and the progressive curriculum apply to
Wolof only. Evaluation: xsim of student(xx) against teacher(English) on held-out pairs, before and after training,
written to ``<output_dir>/xsim_results.json`` and to the model card.

    accelerate launch recipes/distill_wolof.py --config recipes/configs/distill_wolof.yaml
    python recipes/distill_wolof.py --config recipes/configs/distill_wolof-smoke.yaml --output_dir runs/smoke

Every data argument takes ``LANG=SOURCE`` specs (see ``bitext_hf.training.distillation.data``): local TSV files, pairs of
line-aligned files, ``gettext`` (this machine's translation catalogs) or ``hub:DATASET_ID[:CONFIG][@SPLIT]``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

import torch

from bitext_hf.io import atomic_output
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig
from bitext_hf.training import (
    LoopArguments,
    parse_args,
    resolve_resume_checkpoint,
    run_training_loop,
    train_or_reuse_tokenizer,
)
from bitext_hf.training.distillation import (
    DEFAULT_TASK_WEIGHTS,
    Bitext,
    CosineDistillationLoss,
    DistillationBatches,
    DistillationDataError,
    StudentEncoder,
    TeacherEmbeddingCache,
    compute_batch_loss,
    evaluate_xsim,
    load_bitext,
    load_monolingual,
    read_lines,
    split_held_out,
)

logger = logging.getLogger("distill_wolof")

RESULTS_FILE = "xsim_results.json"


@dataclasses.dataclass
class ScriptArguments:
    """Data, teacher and distillation settings."""

    bitexts: list[str] = dataclasses.field(
        default_factory=lambda: [
            "wol=hub:allenai/nllb:eng_Latn-wol_Latn",
            "fuv=hub:allenai/nllb:eng_Latn-fuv_Latn",
        ],
        metadata={
            "help": "Training bitexts, LANG=SOURCE: file.tsv (English<TAB>xx), xx.txt,en.txt, gettext, hub:ID[:CONFIG][@SPLIT]."
        },
    )
    monolingual: list[str] = dataclasses.field(
        default_factory=lambda: ["wol=hub:allenai/MADLAD-400:wo@clean"],
        metadata={
            "help": "Monolingual text for MLM, LANG=file.txt or LANG=hub:ID[:CONFIG][@SPLIT] (a 'text' column)."
        },
    )
    english: list[str] = dataclasses.field(
        default_factory=list, metadata={"help": "Extra English text files for the self task (one sentence a line)."}
    )
    eval_bitexts: list[str] = dataclasses.field(
        default_factory=lambda: ["wol=hub:facebook/flores:wol_Latn-eng_Latn@devtest"],
        metadata={"help": "Held-out evaluation pairs, LANG=SOURCE; empty: hold out --held_out pairs instead."},
    )
    held_out: int = dataclasses.field(
        default=0, metadata={"help": "With no eval_bitexts: pairs held out of each eval language's training data."}
    )
    eval_languages: list[str] = dataclasses.field(
        default_factory=lambda: ["wol"], metadata={"help": "Languages evaluated when holding out pairs."}
    )
    mlm_languages: list[str] = dataclasses.field(
        default_factory=lambda: ["wol"], metadata={"help": "Languages with MLM batches (the paper: Wolof only)."}
    )
    curriculum_languages: list[str] = dataclasses.field(
        default_factory=lambda: ["wol"], metadata={"help": "Languages trained with progressive prefixes."}
    )
    max_pairs_per_language: int | None = dataclasses.field(default=None, metadata={"help": "Cap per bitext."})
    max_monolingual: int | None = dataclasses.field(default=None, metadata={"help": "Cap per monolingual corpus."})
    teacher: str = dataclasses.field(
        default="default",
        metadata={
            "help": "Teacher encoder: 'default' (offline USE), a sentence-transformers folder, a HF model path."
        },
    )
    teacher_batch_size: int = dataclasses.field(default=64, metadata={"help": "Teacher encoding batch size."})
    cache_dir: str | None = dataclasses.field(
        default=None, metadata={"help": "Teacher embedding cache (default: <output_dir>/teacher_cache)."}
    )
    distil_weight: float = dataclasses.field(default=DEFAULT_TASK_WEIGHTS["distil"], metadata={"help": "Task weight."})
    self_weight: float = dataclasses.field(default=DEFAULT_TASK_WEIGHTS["self"], metadata={"help": "Task weight."})
    mask_weight: float = dataclasses.field(default=DEFAULT_TASK_WEIGHTS["mask"], metadata={"help": "Task weight."})
    dataset_alpha: float = dataclasses.field(
        default=0.5, metadata={"help": "Datasets of a task are sampled proportionally to size ** alpha."}
    )
    curriculum_increment: float = dataclasses.field(
        default=0.1,
        metadata={"help": "Curriculum stage increment (0.1: prefixes of 10, 20, ..., 100 percent of the subwords)."},
    )
    curriculum_fraction: float | None = dataclasses.field(
        default=None,
        metadata={
            "help": "Share of the steps spent on prefixes shorter than 100 percent, split evenly among those stages; "
            "the whole-sentence stage runs for the rest (e.g. 0.5). Default: every stage gets an equal share."
        },
    )
    mask_rate: float = dataclasses.field(default=0.15, metadata={"help": "Fraction of tokens set to <mask>."})
    contrastive_weight: float = dataclasses.field(
        default=0.0, metadata={"help": "Weight of the optional in-batch contrastive term."}
    )
    max_length: int = dataclasses.field(default=128, metadata={"help": "Student truncation length in subwords."})
    group_by_length: bool = dataclasses.field(
        default=True, metadata={"help": "Batch sentences of similar length (far less padding); else sample uniformly."}
    )

    def __post_init__(self) -> None:
        if not self.bitexts:
            raise ValueError("bitexts: give at least one LANG=SOURCE training bitext")
        if not self.eval_bitexts and self.held_out <= 0:
            logger.warning("no eval_bitexts and held_out=0: the run will not report xsim")
        for name in ("distil_weight", "self_weight", "mask_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


@dataclasses.dataclass
class ModelArguments:
    """The student and its vocabulary (defaults: the paper's student with an 8k vocabulary)."""

    tokenizer_name: str | None = dataclasses.field(
        default=None, metadata={"help": "An existing student tokenizer; by default one is trained on the data."}
    )
    vocab_size: int = dataclasses.field(default=8000, metadata={"help": "Student vocabulary size when trained."})
    hidden_size: int = dataclasses.field(default=1024, metadata={"help": "Student width."})
    num_hidden_layers: int = dataclasses.field(default=12, metadata={"help": "Student layers."})
    num_attention_heads: int = dataclasses.field(default=4, metadata={"help": "Attention heads."})
    intermediate_size: int = dataclasses.field(default=2048, metadata={"help": "Feed-forward width."})
    pooling: str = dataclasses.field(default="max", metadata={"help": "Sentence pooling: max or bos."})
    dropout: float = dataclasses.field(default=0.1, metadata={"help": "Hidden and attention dropout."})


def load_data(args: ScriptArguments) -> tuple[list[Bitext], dict[str, list[str]], list[str], list[Bitext]]:
    """Training bitexts, monolingual text, extra English and evaluation bitexts, validated."""
    train = [load_bitext(spec, args.max_pairs_per_language) for spec in args.bitexts]
    evaluation = [load_bitext(spec) for spec in args.eval_bitexts]
    if not evaluation and args.held_out > 0:
        by_language = {bitext.language: index for index, bitext in enumerate(train)}
        for language in args.eval_languages:
            if language not in by_language:
                raise DistillationDataError(f"eval language {language!r} has no data among the training bitexts")
            train[by_language[language]], held = split_held_out(train[by_language[language]], args.held_out)
            evaluation.append(held)
    if evaluation:
        # No evaluation sentence may be trained on: drop training pairs sharing a side with the evaluation pairs.
        held_texts = {text for bitext in evaluation for text in (*bitext.student_texts, *bitext.teacher_texts)}
        train = [_without(bitext, held_texts) for bitext in train]
    monolingual: dict[str, list[str]] = {}
    for spec in args.monolingual:
        language, texts = load_monolingual(spec, args.max_monolingual)
        monolingual.setdefault(language, []).extend(texts)
    english = [line for path in args.english for line in read_lines(path)]
    return train, monolingual, english, evaluation


def _without(bitext: Bitext, texts: set[str]) -> Bitext:
    kept = [pair for pair in zip(bitext.student_texts, bitext.teacher_texts) if not texts.intersection(pair)]
    return Bitext(bitext.language, [student for student, _ in kept], [teacher for _, teacher in kept])


def main(script_args: ScriptArguments, loop_args: LoopArguments, model_args: ModelArguments) -> dict[str, Any]:
    from accelerate import PartialState

    from bitext_hf.encoders import load_encoder

    if loop_args.max_steps <= 0:  # before any data, teacher or tokenizer work
        raise ValueError("distill_wolof needs max_steps > 0 (batches are drawn by step, there are no epochs)")
    state = PartialState()
    output_dir = Path(loop_args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(loop_args.seed)

    train, monolingual, english, evaluation = load_data(script_args)
    teacher = load_encoder(None if script_args.teacher == "default" else script_args.teacher)
    cache = TeacherEmbeddingCache(
        script_args.cache_dir or output_dir / "teacher_cache",
        teacher,
        teacher_id=script_args.teacher,
        batch_size=script_args.teacher_batch_size,
    )

    if model_args.tokenizer_name:
        from transformers import PreTrainedTokenizerFast

        # Not AutoTokenizer: a student folder's config.json carries an auto_map and would ask about remote code.
        tokenizer = PreTrainedTokenizerFast.from_pretrained(model_args.tokenizer_name)
    else:
        corpus = [text for bitext in train for text in (*bitext.student_texts, *bitext.teacher_texts)]
        corpus += [text for texts in monolingual.values() for text in texts] + english
        tokenizer = train_or_reuse_tokenizer(
            corpus,
            output_dir=output_dir,
            reuse=resolve_resume_checkpoint(loop_args) is not None,
            vocab_size=model_args.vocab_size,
            model_max_length=script_args.max_length,
        )
    config = Laser3StudentConfig(
        vocab_size=len(tokenizer),
        hidden_size=model_args.hidden_size,
        num_hidden_layers=model_args.num_hidden_layers,
        num_attention_heads=model_args.num_attention_heads,
        intermediate_size=model_args.intermediate_size,
        hidden_dropout_prob=model_args.dropout,
        attention_probs_dropout_prob=model_args.dropout,
        max_position_embeddings=max(script_args.max_length, 8),
        pooling=model_args.pooling,
        projection_dim=int(teacher.dim),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        mask_token_id=tokenizer.mask_token_id,
    )
    model = Laser3Student(config)

    # One loop "batch" is one step's batch of sentences: the loop sees a step-indexed dataset with batch size 1.
    micro_batches = loop_args.max_steps * loop_args.gradient_accumulation_steps * state.num_processes
    batches = DistillationBatches(
        tokenizer=tokenizer,
        cache=cache,
        bitexts=train,
        monolingual=monolingual,
        english=english,
        mlm_languages=script_args.mlm_languages,
        curriculum_languages=script_args.curriculum_languages,
        total_steps=micro_batches,
        batch_size=loop_args.per_device_train_batch_size,
        task_weights={
            "distil": script_args.distil_weight,
            "self": script_args.self_weight,
            "mask": script_args.mask_weight,
        },
        alpha=script_args.dataset_alpha,
        curriculum_increment=script_args.curriculum_increment,
        curriculum_fraction=script_args.curriculum_fraction,
        mask_rate=script_args.mask_rate,
        max_length=script_args.max_length,
        group_by_length=script_args.group_by_length,
        seed=loop_args.seed,
    )
    distillation_loss = CosineDistillationLoss(contrastive_weight=script_args.contrastive_weight)

    def compute_loss(student: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        loss = compute_batch_loss(student, batch, distillation_loss)
        return loss, {f"loss_{batch['task']}": float(loss.detach())}

    def evaluate(student: torch.nn.Module) -> dict[str, float]:
        encoder = StudentEncoder(student, tokenizer, max_length=script_args.max_length)
        results = evaluate_xsim(encoder, cache, evaluation)
        return {f"xsim_{language}": values["xsim"] for language, values in results.items()}

    results: dict[str, Any] = {"teacher": script_args.teacher, "n_train_pairs": {b.language: len(b) for b in train}}
    if evaluation and state.is_main_process:
        results["teacher_zero_shot"] = evaluate_xsim(teacher, cache, evaluation)
        results["student_before"] = evaluate_xsim(
            StudentEncoder(model, tokenizer, max_length=script_args.max_length), cache, evaluation
        )
        logger.info("xsim before training: %s", results["student_before"])

    started = time.perf_counter()
    result = run_training_loop(
        model,
        batches,
        args=dataclasses.replace(loop_args, per_device_train_batch_size=1),
        compute_loss=compute_loss,
        collate_fn=_first,
        evaluate=evaluate if evaluation and loop_args.eval_steps else None,
        shuffle=False,
    )
    results["train_seconds"] = round(time.perf_counter() - started, 1)
    results["global_step"] = result.global_step
    student = result.model
    if state.is_main_process:
        if evaluation:
            results["student_after"] = evaluate_xsim(
                StudentEncoder(student, tokenizer, max_length=script_args.max_length), cache, evaluation
            )
            logger.info("xsim after training: %s", results["student_after"])
        save_student(student, tokenizer, output_dir, script_args, results)
        with atomic_output(output_dir / RESULTS_FILE) as handle:
            json.dump(results, handle, indent=2)
    state.wait_for_everyone()
    return results


def _first(samples: list[Any]) -> Any:
    return samples[0]


def _xsim_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per evaluated language: the teacher zero-shot, the student before and after training."""
    columns = {
        "teacher zero-shot": "teacher_zero_shot",
        "student before": "student_before",
        "student after": "student_after",
    }
    rows = []
    for language, after in results.get("student_after", {}).items():
        row: dict[str, Any] = {"language": language, "pairs": int(after["n"])}
        for title, key in columns.items():
            value = results.get(key, {}).get(language, {}).get("xsim")
            row[title] = None if value is None else float(value)
        rows.append(row)
    return rows


def save_student(
    student: Laser3Student, tokenizer: Any, output_dir: Path, script_args: ScriptArguments, results: dict[str, Any]
) -> None:
    """Weights, tokenizer, remote code, model card and sentence-transformers modules (Transformer -> Pooling(max
    or cls) -> Dense(projection) when the student has a projection) into ``output_dir``."""
    from bitext_hf.hub import render_model_card, save_for_hub

    languages = sorted({spec.partition("=")[0] for spec in script_args.bitexts})
    card = render_model_card(
        "laser3",
        card_data={
            "language": sorted({language[:2] if len(language) > 3 else language for language in [*languages, "en"]})
        },
        languages=", ".join(languages),
        teacher=script_args.teacher if script_args.teacher != "default" else "USE v3 multilingual (offline default)",
        pooling=student.config.pooling,
        embedding_dim=student.config.embedding_dim,
        xsim_table=_xsim_rows(results) or "(no evaluation data was given)",
        training_data="\n".join(f"- `{spec}`" for spec in [*script_args.bitexts, *script_args.monolingual]),
    )
    options: dict[str, Any] = {"pooling": "max" if student.config.pooling == "max" else "cls", "verify": True}
    if student.projection is not None:
        options["dense"] = student.projection
    save_for_hub(student, tokenizer, output_dir, model_card=card, sentence_transformers=options)


if __name__ == "__main__":
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    main(*parse_args(ScriptArguments, LoopArguments, ModelArguments))
