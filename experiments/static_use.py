"""Can a static model distilled from the default encoder align as well as it does? (``align --fast``, issue 47.)

model2vec's recipe, without its PCA (the table here is only the pieces the documents use): every SentencePiece piece
of USE v3's vocabulary that occurs in the documents is encoded alone by the default encoder (its text, the word
boundary mark as a space), and a text's vector is the mean of its pieces' vectors, plain or weighted by SIF (a / (a +
p(piece)), a = 1e-3, p from the documents' own piece counts), normalized. model2vec's own ``distill`` needs a Hugging
Face transformer; USE v3 is not one, hence the recipe by hand. Every overlap is encoded this way and aligned with the
package's search (its defaults), strict and lax F1 on the seven Text+Berg test documents (vecalign's bleualign_data,
GPL-2.0, read from a clone), beside the encoder itself (its every-overlap F1 in benchmarks/README.md).

    python experiments/static_use.py --vecalign ~/src/vecalign
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from bench_align import TEST_DOCUMENTS, bleualign

from bitext_hf.alignment.overlaps import overlap_texts
from bitext_hf.alignment.search import search
from bitext_hf.encoders import load_encoder
from bitext_hf.encoders.use import UseTokenizer, use_resource
from bitext_hf.evaluation.metrics import alignment_f1

SIF_A = 1e-3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vecalign", required=True, help="checkout or bare clone of thompsonb/vecalign")
    args = parser.parse_args()
    documents = [bleualign(args.vecalign, name) for name in TEST_DOCUMENTS]
    tokenizer, encoder = UseTokenizer(), load_encoder()
    src = overlap_texts([de for de, _, _ in documents], 4)
    tgt = overlap_texts([fr for _, fr, _ in documents], 4)
    sentence_ids = tokenizer.encode([s for de, fr, _ in documents for s in de + fr])
    vocabulary = sorted({piece for ids in sentence_ids for piece in ids[1:-1]})
    row = {piece: number for number, piece in enumerate(vocabulary)}
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=use_resource("sp.model"))  # the pieces' strings
    pieces = [processor.id_to_piece(i).replace("\u2581", " ").strip() or processor.id_to_piece(i) for i in vocabulary]
    started = time.perf_counter()
    table = encoder.encode(pieces, batch_size=128, show_progress=False)
    print(f"{len(pieces)} pieces encoded in {time.perf_counter() - started:.1f} s")
    counts = np.zeros(len(vocabulary))
    for ids in sentence_ids:
        for piece in ids[1:-1]:
            counts[row[piece]] += 1
    print("| weighting | encode s (every overlap) | strict F1 | lax F1 |\n|---|---|---|---|")
    for weighting in ("mean", "SIF"):
        weights = np.ones(len(vocabulary)) if weighting == "mean" else SIF_A / (SIF_A + counts / counts.sum())

        def static(texts: list[str], weights: np.ndarray = weights) -> np.ndarray:
            vectors = np.zeros((len(texts), table.shape[1]), np.float32)
            for number, ids in enumerate(tokenizer.encode(texts)):
                rows = [row[piece] for piece in ids[1:-1] if piece in row]
                if rows:
                    vectors[number] = (table[rows] * weights[rows, None]).sum(0)
                else:
                    vectors[number, 0] = 1.0
            return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

        started = time.perf_counter()
        src_overlaps, tgt_overlaps = src.embed(static), tgt.embed(static)
        seconds = time.perf_counter() - started
        beads = [search(s, t).beads for s, t in zip(src_overlaps, tgt_overlaps)]
        scores = alignment_f1([gold for _, _, gold in documents], beads)
        print(f"| {weighting} | {seconds:.1f} | {scores['f1_strict']:.3f} | {scores['f1_lax']:.3f} |")


if __name__ == "__main__":
    main()
