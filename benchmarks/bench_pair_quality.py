"""The light pair classifier (the default one shipped in ``bitext_hf/mining/default_pair_quality``) on data it was
never trained or calibrated on, beside the encoder's own cosine and margin; its speed; and the precision it estimates
without gold against the true precision.

Held-out sets (``--quality``):
* gettext catalogs of six languages never trained on (pt_BR, ko, tr, zh_CN, ar, th), correct pairs and wrong ones made
  as the recipe makes them (another seed, so other pairs than the recipe's own evaluation);
* Text+Berg German-French (vecalign's ``bleualign_data``: Alpine Club yearbooks, another domain and a pair without
  English, GPL-2.0, read from a checkout of vecalign, never copied): the 1-1 gold beads of the dev and seven test
  documents are the correct pairs; the wrong pairs are the documents' own neighbouring sentences (the next bead's
  French), the real partial translations of the 1-2 and 2-1 gold beads (a sentence against one of its two), and the
  recipe's other kinds made from the 1-1 beads.
The cosine's and the margin's MCC are taken at the threshold that is best on a German gettext set (a training
language, never a test set), as a user would tune one.

Speed (``--speed``): pairs per second of ``classifier.score`` (features and MLP) on one thread, given the cosines and
margins, beside the encoder (USE v3, one thread) encoding both sides of the same pairs: what a pair costs when scored,
against what it costs to get its cosine. A cross-encoder (``--classifier`` a folder of
``recipes/train_pair_quality_cross_encoder.py``) is timed in torch, ONNX Runtime and OpenVINO, beside the light one.

Precision without gold (``--precision``): BUCC-style sets where gold pairs hide among sentences without a counterpart
(gettext en-pt and en-zh_TW, catalogs never used in development; Text+Berg de-fr, every sentence of the eight
documents on each side), mined with the margin (k 4, ratio, max); at thresholds spread over the mined pairs' scores,
the estimated precision (mean quality of the pairs at or above) against the true precision (their share in the gold),
and the recall at ``--min-precision 0.9`` against the best recall any threshold reaches at a true precision of 0.9.

    python benchmarks/bench_pair_quality.py --vecalign ~/src/vecalign
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from ast import literal_eval

import numpy as np

from bitext_hf.data import PairSet, load_pairs
from bitext_hf.families.pair_quality.arguments import NEGATIVE_KINDS, ScriptArguments
from bitext_hf.families.pair_quality.data import LabelledPairs, labelled_pairs, memo_encoder, pair_scores
from bitext_hf.families.pair_quality.evaluation import best_threshold, evaluate_quality
from bitext_hf.mining.quality import load_classifier, pair_quality, threshold_for_precision

HELD_OUT = ("pt_BR", "ko", "tr", "zh_CN", "ar", "th")
DOCUMENTS = ["dev"] + [f"test{number}" for number in range(7)]


def text_berg(repo: str) -> tuple[list[list[str]], list[list[str]], list[list[tuple[list[int], list[int]]]]]:
    """German and French sentences and gold beads of each Text+Berg document of vecalign's checkout."""
    from bench_align import repository_file

    german, french, beads = [], [], []
    for name in DOCUMENTS:
        german.append([line.strip() for line in repository_file(repo, f"bleualign_data/{name}.de").splitlines()])
        french.append([line.strip() for line in repository_file(repo, f"bleualign_data/{name}.fr").splitlines()])
        gold = []
        for line in repository_file(repo, f"bleualign_data/{name}.defr").splitlines():
            fields = [field.strip() for field in line.split(":") if field.strip()]
            gold.append((literal_eval(fields[0]), literal_eval(fields[1])))
        beads.append(gold)
    return german, french, beads


def text_berg_labelled(repo: str, encode, script_args: ScriptArguments, rng) -> LabelledPairs:
    german, french, beads = text_berg(repo)
    sources, targets = [], []
    partial = LabelledPairs([], [], [], [], "fr")
    for de, fr, gold in zip(german, french, beads):
        for src, tgt in gold:
            if len(src) == 1 and len(tgt) == 1:
                sources.append(de[src[0]])
                targets.append(fr[tgt[0]])
            elif len(src) == 1 and len(tgt) == 2:  # a sentence against one of its two: a real partial translation
                partial.extend([de[src[0]]], [fr[tgt[int(rng.integers(2))]]], 0, ["partial (gold bead)"])
            elif len(src) == 2 and len(tgt) == 1:
                partial.extend([de[src[int(rng.integers(2))]]], [fr[tgt[0]]], 0, ["partial (gold bead)"])
    pairs = PairSet("de", "fr", "text+berg", sources, targets, name="text+berg de-fr")
    kinds = [kind for kind in script_args.negative_kinds if kind != "wrong_language"]  # no other language here
    labelled = labelled_pairs(
        pairs, len(sources), dataclasses.replace(script_args, negative_kinds=kinds), rng, encode, {}
    )
    labelled.extend(partial.sources, partial.targets, 0, partial.kinds)
    return labelled


def scored(classifier, encode, labelled: LabelledPairs) -> dict:
    cosines, margins = pair_scores(encode, labelled.sources, labelled.targets, 4)
    quality = pair_quality(classifier, labelled.sources, labelled.targets, cosines, margins)
    return {"quality": quality, "cosines": cosines, "margins": margins, "labels": np.array(labelled.labels)}


def quality_tables(args, classifier, encode) -> None:
    rng = np.random.default_rng(args.seed)
    # Every kind of wrong pair, wrong_language included (the default classifier is not trained on it).
    script_args = ScriptArguments(train_pairs=["en-de=gettext"], eval_pairs=[], negative_kinds=list(NEGATIVE_KINDS))
    tuning = labelled_pairs(load_pairs("en-de=gettext"), 1000, script_args, rng, encode, {})
    tuned = scored(classifier, encode, tuning)
    thresholds = {
        "cosine": best_threshold(tuned["cosines"], tuned["labels"]),
        "margin": best_threshold(tuned["margins"], tuned["labels"]),
    }
    sets = {}
    translations: dict[str, list[str]] = {}
    loaded = {language: load_pairs(f"en-{language}=gettext") for language in HELD_OUT}
    for pairs in loaded.values():
        for source, target in zip(pairs.src, pairs.tgt):
            translations.setdefault(source, []).append(target)
    for language, pairs in loaded.items():
        own = set(pairs.tgt)
        others = {source: [text for text in texts if text not in own] for source, texts in translations.items()}
        others = {source: texts for source, texts in others.items() if texts}
        sets[f"gettext en-{language}"] = labelled_pairs(pairs, args.pairs, script_args, rng, encode, others)
    if args.vecalign:
        sets["Text+Berg de-fr"] = text_berg_labelled(args.vecalign, encode, script_args, rng)
    columns = ("AUC", "cosine AUC", "margin AUC", "MCC", "cosine MCC", "margin MCC", "F1", "ECE", "kept")
    keys = ("auc", "cosine/auc", "margin/auc", "mcc", "cosine/mcc", "margin/mcc", "f1", "ece", "kept")
    print(
        f"\nbaseline thresholds (best MCC on German gettext): cosine {thresholds['cosine']:.3f}, margin "
        f"{thresholds['margin']:.3f}"
    )
    print("| set | pairs | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 2) + "|")
    per_kind = {}
    for name, labelled in sets.items():
        result = scored(classifier, encode, labelled)
        metrics = evaluate_quality(
            result["quality"],
            result["labels"],
            labelled.kinds,
            cosines=result["cosines"],
            margins=result["margins"],
            baseline_thresholds=thresholds,
        )
        per_kind[name] = {key.split("/", 1)[1]: value for key, value in metrics.items() if key.startswith("rejected/")}
        print(f"| {name} | {metrics['pairs']} | " + " | ".join(f"{metrics[key]:.3f}" for key in keys) + " |")
    kinds = sorted({kind for values in per_kind.values() for kind in values})
    print("\nwrong pairs rejected (probability < 0.5), by kind:\n")
    print("| set | " + " | ".join(kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for name, values in per_kind.items():
        print(f"| {name} | " + " | ".join(f"{values[kind]:.2f}" if kind in values else "" for kind in kinds) + " |")


def speed(args, classifier, encode_model: str) -> None:
    """CPU seconds of scoring the pairs, one thread. A cross-encoder (a transformer pass per pair) is timed on
    ``--cross-encoder-pairs`` of them and scaled, in each backend, beside the default light classifier."""
    import torch

    from bitext_hf.encoders import load_encoder
    from bitext_hf.threads import limit_threads

    pairs = load_pairs("en-fr=gettext")
    count = min(args.speed_pairs, len(pairs.src))
    sources, targets = pairs.src[:count], pairs.tgt[:count]
    rng = np.random.default_rng(0)
    cosines, margins = rng.uniform(0.2, 1, count).astype(np.float32), rng.uniform(0.8, 1.6, count).astype(np.float32)
    light = getattr(classifier.config, "reads_scores", True)
    rows = []

    def timed(name, scorer, sample):
        started = time.process_time()
        scorer.score(sources[:sample], targets[:sample], cosines[:sample], margins[:sample])
        rows.append((name, (time.process_time() - started) * count / sample))

    with limit_threads(1):
        torch.set_num_threads(1)
        if light:
            timed("classifier (features + MLP)", classifier, count)
            from bitext_hf.modeling.pair_quality import pair_features

            started = time.process_time()
            pair_features(sources, targets, cosines, margins)
            rows.append(("  of which the features", time.process_time() - started))
        else:
            sample = min(count, args.cross_encoder_pairs)
            timed("cross-encoder, torch float32", classifier, sample)
            for backend in ("onnx", "openvino"):
                converted = load_classifier(args.classifier, backend=backend)
                timed(f"cross-encoder, {backend} ({converted.runner.quantize})", converted, sample)
            timed("light classifier (default, features + MLP)", load_classifier("default"), count)
        encoder = load_encoder(encode_model)
        sample = min(count, 5000)
        started = time.process_time()
        encoder.encode(sources[:sample] + targets[:sample], batch_size=128)
        rows.append(("encoding both sides (USE v3, for the cosine)", (time.process_time() - started) * count / sample))
    print(f"\n{count} gettext en-fr pairs, one thread (CPU seconds):")
    print("| step | CPU s | pairs/s per core | ratio to the first row |")
    print("|---|---|---|---|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {count / seconds:,.0f} | {seconds / rows[0][1]:.2f} |")


def bucc_sets(args, rng) -> dict[str, tuple[list[str], list[str], set[tuple[int, int]]]]:
    """name -> (sources, targets, gold pairs as (source row, target row))."""
    sets = {}
    for language in ("pt", "zh_TW"):
        pairs = load_pairs(f"en-{language}=gettext")
        order = rng.permutation(len(pairs.src))
        gold_rows, src_only, tgt_only = (
            order[: args.gold],
            order[args.gold : args.gold + args.distractors],
            order[args.gold + args.distractors : args.gold + 2 * args.distractors],
        )
        sources = [pairs.src[row] for row in [*gold_rows, *src_only]]
        targets = [pairs.tgt[row] for row in [*gold_rows, *tgt_only]]
        target_order = rng.permutation(len(targets))
        position = {int(old): new for new, old in enumerate(target_order)}
        targets = [targets[old] for old in target_order]
        sets[f"gettext en-{language}"] = (sources, targets, {(i, position[i]) for i in range(len(gold_rows))})
    if args.vecalign:
        german, french, beads = text_berg(args.vecalign)
        sources, targets, gold = [], [], set()
        for de, fr, document in zip(german, french, beads):
            for src, tgt in document:
                if len(src) == 1 and len(tgt) == 1:
                    gold.add((len(sources) + src[0], len(targets) + tgt[0]))
            sources += de
            targets += fr
        sets["Text+Berg de-fr"] = (sources, targets, gold)
    return sets


def precision(args, classifier, encode) -> None:
    from bitext_hf.mining import mine

    rng = np.random.default_rng(args.seed)
    print("\nprecision without gold: estimated (mean quality) against true, over thresholds with >= 50 pairs")
    print(
        "| set | gold pairs | sentences (src x tgt) | mean gap | largest gap | recall at --min-precision 0.9 (its true "
        "precision) | best recall at true precision >= 0.9 |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, (sources, targets, gold) in bucc_sets(args, rng).items():
        mined = mine(encode(sources), encode(targets), k=4, margin="ratio", mode="max")
        quality = pair_quality(
            classifier,
            [sources[i] for i in mined.src_indices.tolist()],
            [targets[j] for j in mined.tgt_indices.tolist()],
            mined.cosines,
            mined.scores,
        )
        correct = np.array([(i, j) in gold for i, j in zip(mined.src_indices.tolist(), mined.tgt_indices.tolist())])
        order = np.argsort(-mined.scores, kind="stable")
        gaps = []
        for cut in range(50, len(order) + 1, max(1, len(order) // 40)):
            kept = order[:cut]
            gaps.append(abs(quality[kept].mean() - correct[kept].mean()))
        chosen = threshold_for_precision(mined.scores, quality, 0.9)
        if chosen is None:
            at_estimate = "none reaches 0.9"
        else:
            kept = mined.scores >= chosen[0]
            at_estimate = f"{correct[kept].sum() / len(gold):.3f} ({correct[kept].mean():.3f})"
        cumulative = np.cumsum(correct[order]) / np.arange(1, len(order) + 1)
        reaching = np.flatnonzero(cumulative >= 0.9)
        best = np.cumsum(correct[order])[reaching[-1]] / len(gold) if reaching.size else 0.0
        print(
            f"| {name} | {len(gold)} | {len(sources)} x {len(targets)} | {np.mean(gaps):.3f} | {np.max(gaps):.3f} | "
            f"{at_estimate} | {best:.3f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vecalign", help="a checkout (or bare clone) of thompsonb/vecalign, for Text+Berg")
    parser.add_argument("--classifier", default="default")
    parser.add_argument("--encoder", default="default")
    parser.add_argument("--pairs", type=int, default=1000, help="correct pairs per held-out gettext language")
    parser.add_argument("--gold", type=int, default=2000, help="gold pairs of a BUCC-style gettext set")
    parser.add_argument("--distractors", type=int, default=1000, help="sentences without counterpart, each side")
    parser.add_argument("--speed-pairs", type=int, default=50000)
    parser.add_argument(
        "--cross-encoder-pairs", type=int, default=2000, help="pairs a cross-encoder is timed on (then scaled)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", choices=("quality", "speed", "precision"), action="append")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    classifier = load_classifier(args.classifier)
    encode = memo_encoder(args.encoder, 128)
    parts = args.only or ["quality", "speed", "precision"]
    if "quality" in parts:
        quality_tables(args, classifier, encode)
    if "speed" in parts:
        speed(args, classifier, args.encoder)
    if "precision" in parts:
        precision(args, classifier, encode)


if __name__ == "__main__":
    main()
