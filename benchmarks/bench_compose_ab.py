"""Every overlap composed from one pass (``USEEncoder.encode_runs``, what ``align`` does with the default encoder)
against each overlap text encoded, in this checkout and in a baseline checkout of bitext-hf, measured in turns.

A change to the composition moves its CPU by a tenth or less, which this 2-core machine's speed swings hide between
runs; so each round runs the baseline and this checkout one after the other, each in a fresh process (the checkout
first on ``PYTHONPATH``), and the table keeps each one's fastest round. In a process: the default encoder (torch,
float32, ``--threads``), warmed, then per set both sides' overlaps (runs of 1 to ``--max-align`` - 1 sentences, as
``bench_align.py --encoding``) composed three times and encoded as texts (batch 128) ``--text-repeats`` times, the
fastest of each in process CPU seconds. Sets: the seven Text+Berg test documents (vecalign's ``bleualign_data``,
read from a checkout) and the gettext documents of ``bench_align.py`` (``--gettext``, 500 pairs, seed 0).
``--no-network`` measures the composition's own work alone (tokenizing, the checks of the runs' ids, the sums'
bookkeeping, the head): the network's pass (``UseTorchForward.span_sums``) replaced by zeros, five times a process,
every text not encoded.

    git worktree add /tmp/baseline <commit>
    python benchmarks/bench_compose_ab.py --vecalign ~/src/vecalign --baseline /tmp/baseline --gettext ja zh_CN
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def measure(args) -> dict:
    """One process's figures: ``{set: [composed CPU s, every text CPU s]}``."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_align import TEST_DOCUMENTS, bleualign, gettext_document

    import bitext_hf
    from bitext_hf.alignment.overlaps import overlap_texts
    from bitext_hf.encoders.use import USEEncoder

    encoder = USEEncoder(threads=args.threads)
    encoder.encode(["warm up ....", "again"] * 8, show_progress=False)  # the tokenizer's port, read at first use
    if args.no_network:
        import numpy as np

        from bitext_hf.encoders.use import UseTorchForward

        def zeros(self, token_ids, spans, **options):
            return np.zeros((sum(map(len, spans)), 512), dtype=np.float32)

        UseTorchForward.span_sums = zeros
    sets = {"Text+Berg de-fr test (7 documents)": [bleualign(args.vecalign, name) for name in TEST_DOCUMENTS]}
    for lang in args.gettext:
        sets[f"gettext en-{lang} (500 pairs)"] = [gettext_document(lang, 500, seed=0)]
    figures = {"code": str(Path(bitext_hf.__file__).parent.parent)}
    for label, documents in sets.items():
        sides = [overlap_texts([document[k] for document in documents], args.max_align - 1) for k in (0, 1)]
        for side in sides:
            encoder.encode_runs(side.sentences, side.runs)
        composed, every = [], []
        for repeats, times, encode in (
            (5 if args.no_network else 3, composed, lambda side: encoder.encode_runs(side.sentences, side.runs)),
            (
                0 if args.no_network else args.text_repeats,
                every,
                lambda side: encoder.encode(side.texts, batch_size=128, show_progress=False),
            ),
        ):
            for _ in range(repeats):
                cpu = time.process_time()
                for side in sides:
                    encode(side)
                times.append(time.process_time() - cpu)
        figures[label] = [min(composed), min(every, default=float("nan"))]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vecalign", required=True, help="a checkout of thompsonb/vecalign (its bleualign_data)")
    parser.add_argument("--baseline", required=True, help="a checkout of bitext-hf to compare with")
    parser.add_argument("--gettext", nargs="*", default=["ja", "zh_CN"], help="gettext languages (en-LANG)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of baseline then this checkout")
    parser.add_argument("--threads", type=int, default=1, help="the encoder's CPU threads")
    parser.add_argument("--max-align", type=int, default=5, help="runs of up to max-align - 1 sentences")
    parser.add_argument("--text-repeats", type=int, default=1, help="encodings of every text a round")
    parser.add_argument("--no-network", action="store_true", help="the composition's own work alone (docstring)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return
    here = str(Path(__file__).resolve().parent.parent)
    checkouts = {"baseline": str(Path(args.baseline).resolve()), "this checkout": here}
    best: dict[str, dict] = {}
    for _ in range(args.rounds):
        for name, checkout in checkouts.items():
            environment = dict(os.environ, PYTHONPATH=checkout)
            child = subprocess.run(
                [sys.executable, __file__, *sys.argv[1:], "--child"],
                env=environment,
                check=True,
                capture_output=True,
                text=True,
            )
            figures = json.loads(child.stdout.strip().splitlines()[-1])
            if figures.pop("code") != checkout:
                raise SystemExit(f"the child imported bitext_hf from elsewhere than {checkout}")
            for label, values in figures.items():
                kept = best.setdefault(name, {}).setdefault(label, values)
                best[name][label] = [min(a, b) for a, b in zip(kept, values)]
    alone = ", the network's pass replaced by zeros" if args.no_network else ""
    print(
        f"# {os.cpu_count()} CPUs, {args.threads} encoder thread(s), fastest of {args.rounds} rounds in turns{alone}\n"
    )
    print("| set | code | composed CPU s | every text CPU s | composed share | composed vs baseline |")
    print("|---|---|---|---|---|---|")
    for label in best["baseline"]:
        for name in checkouts:
            composed, every = best[name][label]
            ratio = composed / best["baseline"][label][0]
            print(f"| {label} | {name} | {composed:.2f} | {every:.2f} | {composed / every:.3f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
