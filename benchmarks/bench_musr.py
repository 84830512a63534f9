"""MuSR: encoding throughput (length-sorted batches vs one sentence per call) and the training cost of CrossConST.

Measures, at the size of the real offline experiment (the model fields of ``recipes/configs/musr-gettext.yaml``,
random weights: the speed of a Transformer does not depend on their values), on real gettext messages of the
experiment's languages:

* ``model.encode(texts, tokenizer)`` with length-sorted batches (what bitext-hf does) against the same encoder with
  one sentence per call;
* seconds per optimizer step of stage 1 (label-smoothed cross-entropy: encoder and decoder once) and of stage 2
  (CrossConST: the English target is encoded too and the decoder runs again on the same prefix, one forward pass
  over 2B sources), the same batches, the same model, AdamW; and their ratio.

Every ratio compares numbers measured in this run.

    OMP_NUM_THREADS=1 python benchmarks/bench_musr.py                   # 1 thread, 2000 sentences, 20 steps each
    python benchmarks/bench_musr.py --threads 2 --steps 30
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import yaml

# The same best-of-n timing as the Laser3 benchmark (run as a script, benchmarks/ is on sys.path).
from bench_laser3 import throughput

CONFIG = Path(__file__).resolve().parent.parent / "recipes" / "configs" / "musr-gettext.yaml"


def seconds_per_step(model: torch.nn.Module, loss_fn: torch.nn.Module, batches: list[dict], warmup: int) -> float:
    """Median seconds of one optimizer step (forward, backward, AdamW) over ``batches`` after ``warmup`` steps."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()
    times = []
    for index, batch in enumerate(batches):
        started = time.perf_counter()
        loss, _ = loss_fn(model, batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if index >= warmup:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(CONFIG), help="recipe YAML whose model fields give the size")
    parser.add_argument("--sentences", type=int, default=2000, help="sentences for the batched encoding runs")
    parser.add_argument("--single_sentences", type=int, default=300, help="sentences for the one-at-a-time runs")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per stage")
    parser.add_argument("--warmup", type=int, default=3, help="untimed training steps first")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from bitext_hf.data.collators import PairCollator
    from bitext_hf.data.filters import tokenize_pairs
    from bitext_hf.families.musr import CrossConSTLoss, load_many_to_one, sample_stage
    from bitext_hf.families.musr.recipe import ArchitectureArguments, ScriptArguments, model_config
    from bitext_hf.modeling.musr import MuSREncoderDecoder
    from bitext_hf.training import train_tokenizer

    torch.set_num_threads(args.threads)
    settings = yaml.safe_load(Path(args.config).read_text(encoding="utf-8"))
    batch_size, max_length = settings["per_device_train_batch_size"], settings["max_seq_length"]
    pairsets = load_many_to_one(settings["train_pairs"])
    pool = sample_stage(pairsets, batch_size * (args.steps + args.warmup), settings["temperature"], seed=0)
    sources = [text for pairs in pairsets for text in pairs.src]
    sentences = random.Random(0).sample(sources, args.sentences)
    tokenizer_texts = random.Random(1).sample([*sources, *pairsets[0].tgt], 60_000)
    tokenizer = train_tokenizer(tokenizer_texts, vocab_size=settings["vocab_size"], model_max_length=max_length)
    # The recipe's own model configuration, from the YAML's architecture fields.
    names = [field.name for field in dataclasses.fields(ArchitectureArguments) if field.name in settings]
    architecture = ArchitectureArguments(**{name: settings[name] for name in names})
    config = model_config(ScriptArguments(max_seq_length=max_length), architecture, tokenizer)
    torch.manual_seed(0)
    model = MuSREncoderDecoder(config)
    lengths = [len(ids) for ids in tokenizer(sentences, truncation=True)["input_ids"]]
    print(
        f"{len(sentences)} messages of {', '.join(pairs.src_lang for pairs in pairsets)}, {np.mean(lengths):.1f} "
        f"tokens on average (max {max_length}), {args.threads} threads, model {settings['hidden_size']} wide, "
        f"{settings['num_encoder_layers']}+{settings['num_decoder_layers']} layers, vocabulary {len(tokenizer)}"
    )

    model.eval()
    batched = throughput(lambda s: model.encode(s, tokenizer, batch_size=batch_size), sentences, args.repeats)
    single = throughput(
        lambda s: [model.encode([sentence], tokenizer) for sentence in s],
        sentences[: args.single_sentences],
        args.repeats,
    )
    print(f"\n{'encoding':<40}{'sent/s':>10}{'ratio':>10}")
    print(f"{f'length-sorted batches of {batch_size}':<40}{batched:>10.0f}{batched / single:>9.1f}x")
    print(f"{'one sentence per call':<40}{single:>10.0f}{1.0:>9.1f}x")

    examples = [
        example for pairs in pool for example in tokenize_pairs(pairs, tokenizer, max_length=max_length, min_tokens=1)
    ]
    random.Random(2).shuffle(examples)
    collate = PairCollator(tokenizer.pad_token_id)
    batches = [collate(examples[start : start + batch_size]) for start in range(0, len(examples), batch_size)]
    batches = batches[: args.steps + args.warmup]
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    stage1 = seconds_per_step(model, CrossConSTLoss(0.0), batches, args.warmup)
    model.load_state_dict(state)  # stage 2 times the same weights on the same batches
    stage2 = seconds_per_step(model, CrossConSTLoss(settings.get("alpha", 1.0)), batches, args.warmup)
    print(f"\n{'training (batch ' + str(batch_size) + ')':<40}{'s/step':>10}{'ratio':>10}")
    print(f"{'stage 1: cross-entropy':<40}{stage1:>10.3f}{1.0:>9.2f}x")
    print(f"{'stage 2: CrossConST':<40}{stage2:>10.3f}{stage2 / stage1:>9.2f}x")


if __name__ == "__main__":
    main()
