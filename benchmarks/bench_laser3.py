"""Encoding throughput of a LASER3 student against the teacher and against one-sentence batches.

Measures, on the same real sentences (gettext messages of one language, or a text file):

* the student with length-sorted batches (``StudentEncoder``, what bitext-hf does),
* the same student with one sentence per call (what LASER's ``laser_encoders`` does by default),
* the teacher (the offline USE v3 encoder, or any ``load_encoder`` spec) on the same texts,

and prints sentences per second with the ratios, each measured in this run. The student has random weights: the
speed of a Transformer does not depend on their values.

    python benchmarks/bench_laser3.py                       # small student, 2000 Georgian messages
    python benchmarks/bench_laser3.py --sizes small paper --sentences 500 --threads 2
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

STUDENT_SIZES = {
    # The size trained in the recipes README experiment, and the paper's student (12 x 1024, FFN 2048, 4 heads).
    "small": {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 512},
    "paper": {"hidden_size": 1024, "num_hidden_layers": 12, "num_attention_heads": 4, "intermediate_size": 2048},
}


def load_sentences(language: str, count: int, path: str | None) -> list[str]:
    if path:
        with open(path, encoding="utf-8") as handle:
            sentences = [line.strip() for line in handle if line.strip()]
    else:
        from bitext_hf.data import gettext_pairs

        sentences = [translation for _, translation in gettext_pairs(language)]
    if len(sentences) < count:
        raise SystemExit(f"only {len(sentences)} sentences available, asked for {count}")
    rng = np.random.default_rng(0)
    return [sentences[i] for i in rng.choice(len(sentences), size=count, replace=False)]


def throughput(encode: Callable[[Sequence[str]], np.ndarray], sentences: Sequence[str], repeats: int) -> float:
    """Best-of-``repeats`` sentences per second (after one warm-up call on a few sentences)."""
    encode(sentences[:8])
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        encode(sentences)
        best = min(best, time.perf_counter() - started)
    return len(sentences) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--language", default="ka", help="gettext language of the sentences (default: Georgian)")
    parser.add_argument("--text_file", default=None, help="read sentences from this file instead")
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--single_sentences", type=int, default=300, help="sentences for the one-at-a-time runs")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--sizes", nargs="+", default=["small"], choices=sorted(STUDENT_SIZES))
    parser.add_argument("--teacher", default=None, help="load_encoder spec (default: the offline USE)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from bitext_hf.encoders import load_encoder
    from bitext_hf.families.laser3 import StudentEncoder
    from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig
    from bitext_hf.training import train_tokenizer

    torch.set_num_threads(args.threads)
    try:  # the teacher (USE) runs on numpy's BLAS, which otherwise takes a thread per core
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    except ImportError:
        print("threadpoolctl is not installed: numpy's BLAS (the USE teacher) may use more threads than --threads")
    sentences = load_sentences(args.language, args.sentences, args.text_file)
    single = sentences[: args.single_sentences]
    tokenizer = train_tokenizer(sentences, vocab_size=min(8000, 4 * len(sentences)), min_vocab_fraction=0.0)
    teacher = load_encoder(args.teacher)
    lengths = [len(ids) for ids in tokenizer(sentences)["input_ids"]]
    print(
        f"{len(sentences)} sentences ({args.language if not args.text_file else args.text_file}), "
        f"{np.mean(lengths):.1f} student tokens on average, {args.threads} threads, batch {args.batch_size}"
    )

    teacher_speed = throughput(lambda s: teacher.encode(s, batch_size=args.batch_size), sentences, args.repeats)
    rows = [("teacher " + type(teacher).__name__, teacher_speed, None, None)]
    for size in args.sizes:
        config = Laser3StudentConfig(vocab_size=len(tokenizer), projection_dim=int(teacher.dim), **STUDENT_SIZES[size])
        student = StudentEncoder(Laser3Student(config).eval(), tokenizer)
        batched = throughput(
            lambda s, student=student: student.encode(s, batch_size=args.batch_size), sentences, args.repeats
        )
        one_by_one = throughput(
            lambda s, student=student: np.concatenate([student.encode([sentence]) for sentence in s]),
            single,
            args.repeats,
        )
        rows.append((f"student {size}, batches of {args.batch_size}", batched, batched / teacher_speed, None))
        rows.append(
            (f"student {size}, one sentence per call", one_by_one, one_by_one / teacher_speed, batched / one_by_one)
        )

    print(f"\n{'encoder':<44}{'sent/s':>10}{'vs teacher':>12}{'batched vs single':>19}")
    for name, speed, vs_teacher, vs_single in rows:
        ratio_teacher = f"{vs_teacher:.2f}x" if vs_teacher is not None else "1.00x"
        ratio_single = f"{vs_single:.1f}x" if vs_single is not None else ""
        print(f"{name:<44}{speed:>10.0f}{ratio_teacher:>12}{ratio_single:>19}")


if __name__ == "__main__":
    main()
