"""Sentence alignment of parallel documents: ``bitext_hf.alignment`` beside Bertalign's and vecalign's own search
algorithms, all fed the same overlap embeddings of the same encoder.

Data: vecalign's ``bleualign_data`` (Text+Berg German-French, a dev document and seven test documents with gold
alignments; GPL-2.0, so read from a checkout of vecalign, not copied). Every overlap (up to ``--max-align`` - 1
consecutive sentences joined by a space, as both peers build them) is encoded once by the default offline encoder
(USE v3, ``bitext_hf.encoders.load_encoder()``) through the package's encoding cache; the encoding time is reported
on its own line. Then, on the same vectors:

(a) ``bitext_hf.alignment.search`` (defaults: max_align 5, top-k 3, window 5, skip -0.1, no margin, length prior),
    and with ``margin=True`` (Bertalign's scoring);
(b) Bertalign's two-step search: its ``corelib`` functions (bfsujason/bertalign, GPL-3.0, imported from a checkout,
    never copied; its LaBSE load and language detector are never imported) called as ``Bertalign.align_sents`` calls
    them, with its defaults (max_align 5, top_k 3, win 5, skip -0.1, margin, length penalty);
(c) vecalign's DP (thompsonb/vecalign, Apache-2.0, its Cython ``dp_core`` built from the checkout: needs Cython),
    ``vecalign()`` with its command line's defaults (deletion percentile 0.2, search buffer 5, full DP up to 300
    sentences) and the same bead sizes (a + b <= max_align). The overlaps that do not exist at a document's start
    (vecalign embeds the text 'PAD' there) get a seeded random unit vector; no bead reads them.

Quality: strict and lax F1 over beads (``bitext_hf.evaluation.metrics.alignment_f1``, equal to vecalign's score.py),
on dev, then on the seven test documents together (the counts summed, as the papers report). Speed and memory: the
alignment alone (encoding excluded), on every test document, on the seven concatenated into one, and on synthetic
documents of ``--synthetic`` sentences (random vectors with planted 1-1, 1-2, 2-1, 1-0 and 0-1 beads, d = 512);
"peak extra" is the peak resident memory above the inputs (the kernel's peak counter reset before each method).

    pip install cython   # for vecalign's dp_core
    python benchmarks/bench_align.py --vecalign ~/src/vecalign --bertalign ~/src/bertalign
    python benchmarks/bench_align.py --vecalign ... --bertalign ... --synthetic 10000 50000 --tune
    python benchmarks/bench_align.py --vecalign ... --bertalign ... --gettext ja zh_CN ko ru
    python benchmarks/bench_align.py --vecalign ... --bertalign ... --encoding --gettext ja

``--overhead`` measures the command's own cost instead: ``bitext-hf align`` run from outside (a fresh process each
time, CPU seconds of the child: user + system) on two long documents, the Text+Berg dev and test documents joined
four times over (each copy's lines marked with its number, so the texts differ), with every vector already in the
encoding cache, less the same command on their first two sentences; beside it, Bertalign's ``align_sents`` steps
(process CPU) on the same vectors.

``--encoding`` measures the encoding instead, cold (no cache, the encoder called directly), each with its search, in
process CPU seconds: every overlap text encoded (what Bertalign and vecalign encode), every overlap composed from one
pass over the sentences (what ``align`` does with the default encoder: ``bitext_hf.encoders.use_runs``), and
``--overlaps in-play`` (``bitext_hf.alignment.in_play``), with the vectors made, the tokens through the network and
strict and lax F1 (Bertalign's search on the every-text vectors beside them); each mode ``--encoding-repeats`` times
in turns, the fastest shown.

``--vecalign`` and ``--bertalign`` are checkouts (or bare clones) of the two repositories.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_mining import rss_mb  # the resident-memory reader of the mining benchmark

from bitext_hf.alignment.overlaps import Overlaps, overlap_texts
from bitext_hf.alignment.search import search
from bitext_hf.evaluation.metrics import alignment_f1

TEST_DOCUMENTS = [f"test{number}" for number in range(7)]


def repository_file(repo: str, path: str) -> str:
    """A file of a checkout, or of a bare clone (read with git show)."""
    if os.path.isfile(os.path.join(repo, path)):
        return Path(repo, path).read_text(encoding="utf-8")
    return subprocess.run(
        ["git", "-C", repo, "show", f"HEAD:{path}"], capture_output=True, text=True, check=True
    ).stdout


def bleualign(repo: str, name: str):
    """(German sentences, French sentences, gold beads) of one Bleualign document, stripped as vecalign reads them."""
    from ast import literal_eval

    de = [line.strip() for line in repository_file(repo, f"bleualign_data/{name}.de").splitlines()]
    fr = [line.strip() for line in repository_file(repo, f"bleualign_data/{name}.fr").splitlines()]
    gold = []
    for line in repository_file(repo, f"bleualign_data/{name}.defr").splitlines():
        fields = [field.strip() for field in line.split(":") if field.strip()]
        gold.append((literal_eval(fields[0]), literal_eval(fields[1])))
    return de, fr, gold


class MemoEncoder:
    """Encodes through the package's Embedder (its cache on disk), and keeps every vector of this run by text, so
    that a new document made of known sentences (the concatenation) encodes only its new overlaps."""

    def __init__(self, cache_dir: str | None) -> None:
        from bitext_hf.encoding.embedder import Embedder

        self.embedder = Embedder(cache_dir=cache_dir, show_progress=False)
        self.vectors: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if text not in self.vectors]
        if missing:
            for text, vector in zip(missing, self.embedder.embed(missing, "overlap")):
                self.vectors[text] = vector
        return np.stack([self.vectors[text] for text in texts])


def overlaps_of(documents, layers: int, encode) -> list[Overlaps]:
    return overlap_texts(documents, layers).embed(encode)


# ------------------------------------------------------------------------------------------------------ the peers


def load_bertalign(repo: str, folder: str):
    """Bertalign's corelib as a module of its own (its package __init__ loads LaBSE at import: never imported)."""
    Path(folder, "bertalign_corelib.py").write_text(repository_file(repo, "bertalign/corelib.py"))
    sys.path.insert(0, folder)
    return importlib.import_module("bertalign_corelib")


def load_vecalign(repo: str, folder: str):
    """vecalign's dp_utils, with its Cython dp_core built in ``folder`` (once: a child process finds it built)."""
    package = Path(folder, "vecalign")
    if package.is_dir():
        sys.path.insert(0, folder)
        return importlib.import_module("vecalign.dp_utils")
    package.mkdir()
    for name in ("__init__.py", "dp_core.pyx", "dp_utils.py"):
        (package / name).write_text(repository_file(repo, f"vecalign/{name}"))
    setup = (
        "import numpy as np\nfrom setuptools import setup, Extension\nfrom Cython.Build import cythonize\n"
        "ext = Extension('vecalign.dp_core', ['vecalign/dp_core.pyx'], include_dirs=[np.get_include()],\n"
        "                define_macros=[('NPY_NO_DEPRECATED_API', 'NPY_1_7_API_VERSION')])\n"
        "setup(ext_modules=cythonize([ext], language_level=3, force=True))\n"
    )
    Path(folder, "setup.py").write_text(setup)
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=folder, check=True, capture_output=True)
    sys.path.insert(0, folder)
    return importlib.import_module("vecalign.dp_utils")


def layered(overlaps: Overlaps, fill: str) -> tuple[np.ndarray, np.ndarray]:
    """The peers' layout: vectors (layers, n, d) and lengths (layers, n); where no overlap exists, zeros (Bertalign
    never reads them) or a seeded random unit vector (``fill="random"``, as vecalign's 'PAD')."""
    index = overlaps.index
    vectors = overlaps.vectors[np.maximum(index, 0)].astype(np.float32)
    missing = index < 0
    if fill == "random":
        rng = np.random.default_rng(42)
        noise = rng.standard_normal((int(missing.sum()), vectors.shape[2])).astype(np.float32)
        vectors[missing] = noise / np.linalg.norm(noise, axis=1, keepdims=True)
    else:
        vectors[missing] = 0.0
    return np.ascontiguousarray(vectors), overlaps.lengths.astype(np.int64)


def run_bertalign(corelib, src: Overlaps, tgt: Overlaps, max_align: int):
    """``Bertalign.align_sents`` with its defaults, on our vectors."""
    src_vecs, src_lens = layered(src, "zeros")
    tgt_vecs, tgt_lens = layered(tgt, "zeros")
    char_ratio = np.sum(src_lens[0,]) / np.sum(tgt_lens[0,])
    n, m = src.n, tgt.n
    top_sims, top_targets = corelib.find_top_k_sents(src_vecs[0, :], tgt_vecs[0, :], k=3)
    first_types = corelib.get_alignment_types(2)
    first_w, first_path = corelib.find_first_search_path(n, m)
    first_pointers = corelib.first_pass_align(n, m, first_w, first_path, first_types, top_sims, top_targets)
    first = corelib.first_back_track(n, m, first_pointers, first_path, first_types)
    second_types = corelib.get_alignment_types(max_align)
    second_w, second_path = corelib.find_second_search_path(first, 5, n, m)
    second_pointers = corelib.second_pass_align(
        src_vecs,
        tgt_vecs,
        src_lens,
        tgt_lens,
        second_w,
        second_path,
        second_types,
        char_ratio,
        -0.1,
        margin=True,
        len_penalty=True,
    )
    return corelib.second_back_track(n, m, second_pointers, second_path, second_types)


def run_vecalign(dp_utils, src: Overlaps, tgt: Overlaps, max_align: int):
    """``vecalign()`` with its command line's defaults, on our vectors."""
    np.random.seed(42)
    vecs0, _ = layered(src, "random")
    vecs1, _ = layered(tgt, "random")
    stack = dp_utils.vecalign(
        vecs0=vecs0,
        vecs1=vecs1,
        final_alignment_types=dp_utils.make_alignment_types(max_align),
        del_percentile_frac=0.2,
        width_over2=math.ceil(max_align / 2.0) + 5,
        max_size_full_dp=300,
        costs_sample_size=20000,
        num_samps_for_norm=100,
    )
    return stack[0]["final_alignments"]


# ------------------------------------------------------------------------------------------------------ measuring


def measured(function, *args):
    """(result, wall seconds, peak resident MB above the resident size before the call)."""
    Path("/proc/self/clear_refs").write_text("5")
    base = rss_mb("VmRSS")
    started = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - started, rss_mb("VmHWM") - base


def synthetic(n: int, dim: int = 512, seed: int = 0) -> tuple[Overlaps, Overlaps, list]:
    """Two documents of about ``n`` sentences and their gold beads: random meanings and lengths, the target built
    from the source by planted 1-1, 1-2, 2-1, 1-0 and 0-1 beads; an overlap's vector is the normalized sum of its
    sentences' plus noise, its length the sum of theirs."""
    rng = np.random.default_rng(seed)
    meanings = rng.standard_normal((n, dim)).astype(np.float32)
    src_lengths = rng.uniform(20, 200, n)
    tgt_rows: list[np.ndarray] = []
    tgt_lengths: list[float] = []
    gold: list[tuple[list[int], list[int]]] = []
    i = 0
    while i < n:
        kind = rng.choice(5, p=[0.86, 0.04, 0.04, 0.03, 0.03])
        j = len(tgt_rows)
        if kind == 0:
            tgt_rows.append(meanings[i] + 0.3 * rng.standard_normal(dim))
            tgt_lengths.append(src_lengths[i] * rng.uniform(0.8, 1.2))
            gold.append(([i], [j]))
            i += 1
        elif kind == 1:  # one source sentence split in two
            part = rng.uniform(0.3, 0.7)
            tgt_rows += [meanings[i] * part, meanings[i] * (1 - part)]
            tgt_lengths += [src_lengths[i] * part, src_lengths[i] * (1 - part)]
            gold.append(([i], [j, j + 1]))
            i += 1
        elif kind == 2 and i + 1 < n:  # two merged
            tgt_rows.append(meanings[i] + meanings[i + 1])
            tgt_lengths.append(src_lengths[i] + src_lengths[i + 1])
            gold.append(([i, i + 1], [j]))
            i += 2
        elif kind == 3:  # dropped
            gold.append(([i], []))
            i += 1
        else:  # inserted
            tgt_rows.append(rng.standard_normal(dim))
            tgt_lengths.append(rng.uniform(20, 200))
            gold.append(([], [j]))
    sides = []
    for rows, sizes in ((meanings, src_lengths), (np.asarray(tgt_rows, dtype=np.float32), np.asarray(tgt_lengths))):
        count, layers = rows.shape[0], 4
        vectors = np.empty((layers * count, dim), np.float32)
        index = np.full((layers, count), -1, np.int64)
        lengths = np.zeros((layers, count))
        cumulative = np.concatenate([np.zeros((1, dim), np.float32), np.cumsum(rows, axis=0)])
        total = np.concatenate([[0.0], np.cumsum(sizes)])
        for layer in range(layers):
            ends = np.arange(layer, count)
            block = cumulative[ends + 1] - cumulative[ends - layer] + 0.1 * rng.standard_normal((len(ends), dim))
            start = layer * count
            vectors[start : start + len(ends)] = block / np.linalg.norm(block, axis=1, keepdims=True)
            index[layer, layer:] = np.arange(start, start + len(ends))
            lengths[layer, layer:] = total[ends + 1] - total[ends - layer]
        sides.append(Overlaps(vectors, index, lengths))
    return sides[0], sides[1], gold


def gettext_document(lang: str, n: int, seed: int = 0) -> tuple[list[str], list[str], list]:
    """An English document and its ``lang`` translation with planted beads, made of real human translations: a run of
    ``n`` consecutive pairs of one language's gettext catalogs (messages of at least 5 English words, in catalog
    order, so neighbours come from the same application and look alike), the target built pair by pair: 1-1, two
    English messages joined into one source line against their two translations (1-2), two translations joined into
    one target line (2-1), a translation dropped (1-0), the translation of a message from outside the run inserted
    (0-1). Translations are joined without a space in scripts written without spaces."""
    from bitext_hf.data import gettext_pairs

    pairs = gettext_pairs(lang, min_words=5)
    rng = np.random.default_rng(seed)
    start = int(rng.integers(0, len(pairs) - 2 * n))
    run, outside = pairs[start : start + n], pairs[start + n :]
    joiner = "" if lang.split("_")[0] in ("ja", "zh", "th") else " "
    src: list[str] = []
    tgt: list[str] = []
    gold: list[tuple[list[int], list[int]]] = []
    i, inserted = 0, 0
    while i < len(run):
        kind = rng.choice(5, p=[0.86, 0.04, 0.04, 0.03, 0.03])
        english, translation = run[i]
        if kind == 1 and i + 1 < len(run):  # two English messages on one source line
            gold.append(([len(src)], [len(tgt), len(tgt) + 1]))
            src.append(f"{english} {run[i + 1][0]}")
            tgt += [translation, run[i + 1][1]]
            i += 2
        elif kind == 2 and i + 1 < len(run):  # two translations on one target line
            gold.append(([len(src), len(src) + 1], [len(tgt)]))
            src += [english, run[i + 1][0]]
            tgt.append(f"{translation}{joiner}{run[i + 1][1]}")
            i += 2
        elif kind == 3:  # no translation
            gold.append(([len(src)], []))
            src.append(english)
            i += 1
        elif kind == 4:  # a translation of nothing in the source
            gold.append(([], [len(tgt)]))
            tgt.append(outside[inserted][1])
            inserted += 1
        else:
            gold.append(([len(src)], [len(tgt)]))
            src.append(english)
            tgt.append(translation)
            i += 1
    return src, tgt, gold


def aligners(args, workdir: str) -> dict:
    """The methods, each ``(source overlaps, target overlaps) -> beads``."""
    methods = {
        "bitext-hf": lambda src, tgt, **options: search(src, tgt, max_align=args.max_align, **options).beads,
        "bitext-hf --margin": lambda src, tgt: search(src, tgt, max_align=args.max_align, margin=True).beads,
    }
    if args.bertalign:
        corelib = load_bertalign(args.bertalign, workdir)
        methods["Bertalign"] = lambda src, tgt: run_bertalign(corelib, src, tgt, args.max_align)
    if not args.no_vecalign_dp:
        dp_utils = load_vecalign(args.vecalign, workdir)
        methods["vecalign"] = lambda src, tgt: run_vecalign(dp_utils, src, tgt, args.max_align)
    return methods


def child(args, method: str, path: str, workdir: str) -> None:
    """One method on one saved document pair, in a fresh process: warmed up on a small synthetic pair (the numba
    functions load), then timed with the peak memory counter reset."""
    function = aligners(args, workdir)[method]
    function(*synthetic(300)[:2])
    data = np.load(path)
    src, tgt = (
        Overlaps(*(data[f"{side}_{key}"] for key in ("vectors", "index", "lengths"))) for side in ("src", "tgt")
    )
    beads, seconds, peak = measured(function, src, tgt)
    scores = alignment_f1([json.loads(str(data["gold"]))], [beads])
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "f1_strict": scores["f1_strict"]}))


def encoding_cost(args, methods) -> None:
    """The ``--encoding`` table (the module docstring)."""
    import bitext_hf.encoders.use as use
    from bitext_hf.alignment.in_play import align_in_play
    from bitext_hf.encoders import load_encoder

    encoder = load_encoder()
    layers = args.max_align - 1
    counted = {"texts": 0, "tokens": 0}
    # The tokens through the network, whichever way the runtime is called (texts, or runs composed from spans).
    forward, span_sums = use.UseTorchForward.__call__, use.UseTorchForward.span_sums

    def counting_forward(self, token_ids):
        counted["tokens"] += sum(map(len, token_ids))
        return forward(self, token_ids)

    def counting_span_sums(self, token_ids, spans, **options):
        counted["tokens"] += sum(map(len, token_ids))
        return span_sums(self, token_ids, spans, **options)

    use.UseTorchForward.__call__, use.UseTorchForward.span_sums = counting_forward, counting_span_sums

    def encode(texts):
        counted["texts"] += len(texts)
        return encoder.encode(texts, batch_size=128, show_progress=False)

    sets = {"Text+Berg de-fr test (7 documents)": [bleualign(args.vecalign, name) for name in TEST_DOCUMENTS]}
    for lang in args.gettext:
        sets[f"gettext en-{lang} ({args.gettext_sentences} pairs, planted beads)"] = [
            gettext_document(lang, args.gettext_sentences, seed=0)
        ]
    # Warm: the tokenizer's port (read at its first use: "...." needs it) and the numba search.
    encoder.encode(["warm up ....", "again"] * 8, show_progress=False)
    warm = overlaps_of([["a", "b", "c"], ["a", "b", "c"]], layers, lambda texts: encoder.encode(texts))
    search(warm[0], warm[1], max_align=args.max_align)  # the numba functions compile here, not in a timed run
    print(
        "\n## encoding: every overlap, each text encoded, composed from its sentences, or in play (cold, no cache)\n"
    )
    print(
        "| set | overlaps | vectors | tokens through the network | CPU s | wall s | CPU share | strict F1 | lax F1 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for label, documents in sets.items():
        golds = [gold for _, _, gold in documents]
        src_texts = overlap_texts([src for src, _, _ in documents], layers)
        tgt_texts = overlap_texts([tgt for _, tgt, _ in documents], layers)
        rows = {}
        # Each mode three times, in turns; the table keeps each one's fastest (a 2-core machine's other work only
        # ever adds time).
        for mode in ("every text", "all (composed)", "in-play") * args.encoding_repeats:
            counted.update(texts=0, tokens=0)
            cpu, wall = time.process_time(), time.perf_counter()
            if mode == "in-play":
                result = align_in_play(src_texts, tgt_texts, encode, encode, max_align=args.max_align)
                beads = [alignment.beads for alignment in result.alignments]
            else:
                if mode == "every text":
                    embed = [texts.embed(encode) for texts in (src_texts, tgt_texts)]
                else:
                    embed = [
                        texts.embed(lambda _, texts=texts: encoder.encode_runs(texts.sentences, texts.runs))
                        for texts in (src_texts, tgt_texts)
                    ]
                    counted["texts"] = len(src_texts.texts) + len(tgt_texts.texts)
                beads = [search(s, t, max_align=args.max_align).beads for s, t in zip(*embed)]
                if mode == "every text":
                    every = embed
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            if mode in rows:
                cpu, wall = min(cpu, rows[mode][1]), min(wall, rows[mode][2])
            rows[mode] = (dict(counted), cpu, wall, beads)
        for mode, (count, cpu, wall, beads) in rows.items():
            scores = alignment_f1(golds, beads)
            print(
                f"| {label} | {mode} | {count['texts']} | {count['tokens']} | {cpu:.1f} | {wall:.1f} | "
                f"{cpu / rows['every text'][1]:.2f} | {scores['f1_strict']:.3f} | {scores['f1_lax']:.3f} |"
            )
        if "Bertalign" in methods:
            beads = [methods["Bertalign"](s, t) for s, t in zip(*every)]
            scores = alignment_f1(golds, beads)
            print(
                f"| {label} | Bertalign's search on every overlap | | | | | | {scores['f1_strict']:.3f} | {scores['f1_lax']:.3f} |"
            )


def command_overhead(args, methods) -> None:
    """The ``--overhead`` table (the module docstring)."""
    import resource

    folder = Path(tempfile.mkdtemp(prefix="bench-align-overhead-"))
    names = ["dev", *TEST_DOCUMENTS]
    sides = {"de": [], "fr": []}
    for copy in range(1, 5):
        for name in names:
            de, fr, _ = bleualign(args.vecalign, name)
            sides["de"] += [f"{line} ({copy})" for line in de]
            sides["fr"] += [f"{line} ({copy})" for line in fr]
    for lang, lines in sides.items():
        (folder / f"long.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        (folder / f"two.{lang}").write_text("".join(line + "\n" for line in lines[:2]), encoding="utf-8")
    cache = ["--cache-dir", args.cache_dir] if args.cache_dir else []

    def command_cpu(name: str) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        command = ["bitext-hf", "-q", "align", "--src", f"{name}.de", "--tgt", f"{name}.fr", "--out", f"{name}.align"]
        subprocess.run(command + cache, cwd=folder, check=True, capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    for name in ("long", "two"):
        command_cpu(name)  # fills the encoding cache (and numba's)
    runs = {name: sorted(command_cpu(name) for _ in range(args.repeats)) for name in ("long", "two")}
    print(f"\n## the command's own cost, vectors cached ({len(sides['de'])} x {len(sides['fr'])} sentences)\n")
    print(f"CPU s of each run, sorted ({args.repeats} runs): long {runs['long']}, two sentences {runs['two']}")
    overhead = runs["long"][0] - runs["two"][0]
    print(f"\n| | CPU s |\n|---|---|\n| bitext-hf align, long less two sentences (fastest runs) | {overhead:.2f} |")
    if "Bertalign" in methods:
        encode = MemoEncoder(args.cache_dir)
        src, tgt = overlaps_of([sides["de"], sides["fr"]], args.max_align - 1, encode)
        times = []
        for _ in range(args.repeats):
            cpu = time.process_time()
            methods["Bertalign"](src, tgt)
            times.append(time.process_time() - cpu)
        print(f"| Bertalign's align_sents steps on the same vectors (fastest of {args.repeats}) | {min(times):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vecalign", required=True, help="checkout or bare clone of thompsonb/vecalign")
    parser.add_argument("--bertalign", default=None, help="checkout or bare clone of bfsujason/bertalign")
    parser.add_argument("--max-align", type=int, default=5)
    parser.add_argument("--cache-dir", default=None, help="the encoding cache (default: the package's)")
    parser.add_argument("--synthetic", type=int, nargs="*", default=[], help="synthetic document sizes")
    parser.add_argument("--tune", action="store_true", help="also sweep skip and window on dev (dev only)")
    parser.add_argument("--no-vecalign-dp", action="store_true", help="leave vecalign's DP out (no Cython)")
    parser.add_argument(
        "--gettext",
        nargs="*",
        default=[],
        metavar="LANG",
        help="also English -> LANG documents built from gettext catalogs with planted beads (gettext_document)",
    )
    parser.add_argument("--gettext-sentences", type=int, default=500, help="pairs per gettext document")
    parser.add_argument("--encoding", action="store_true", help="the cold encoding table alone (module docstring)")
    parser.add_argument(
        "--encoding-repeats", type=int, default=3, help="runs of each mode in --encoding; the fastest is shown"
    )
    parser.add_argument("--overhead", action="store_true", help="the command's own cost alone (module docstring)")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each timed command (--overhead)")
    parser.add_argument("--child", nargs=3, metavar=("METHOD", "NPZ", "WORKDIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        child(args, *args.child)
        return
    import torch

    load = os.getloadavg()[0]
    print(f"# {os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} threads), load {load:.1f}")
    workdir = tempfile.mkdtemp(prefix="bench-align-")
    methods = aligners(args, workdir)
    if args.encoding:
        encoding_cost(args, methods)
        return
    if args.overhead:
        command_overhead(args, methods)
        return

    layers = args.max_align - 1
    encode = MemoEncoder(args.cache_dir)
    documents = {name: bleualign(args.vecalign, name) for name in ["dev", *TEST_DOCUMENTS]}
    started = time.perf_counter()
    encoded_before = encode.embedder.encoded
    overlaps = {}
    for name, (de, fr, _) in documents.items():
        overlaps[name] = overlaps_of([de, fr], layers, encode)
    sentences = sum(len(de) + len(fr) for de, fr, _ in documents.values())
    print(
        f"encoding (USE v3): {sentences} sentences, {len(encode.vectors)} distinct overlaps, "
        f"{encode.embedder.encoded - encoded_before} encoded now ({encode.embedder.from_cache} from the cache) in "
        f"{time.perf_counter() - started:.1f} s"
    )

    ours = methods["bitext-hf"]
    # Warm-up on dev: the numba functions of ours and Bertalign's compile at their first call.
    for function in methods.values():
        function(*overlaps["dev"])

    if args.tune:
        development = {"Bleualign dev": (overlaps["dev"], documents["dev"][2])}
        for lang in args.gettext:  # seed 1: not the test documents (seed 0)
            src_sentences, tgt_sentences, gold = gettext_document(lang, args.gettext_sentences, seed=1)
            development[f"gettext en-{lang} seed 1"] = (
                overlaps_of([src_sentences, tgt_sentences], layers, encode),
                gold,
            )
        names = list(development)
        print(
            f"\n## development sweep (bitext-hf), strict F1\n\n| skip | window | margin | length prior | {' | '.join(names)} |"
        )
        print("|---" * (4 + len(names)) + "|")
        for skip in (-0.3, -0.2, -0.1, 0.0):
            for window in (5, 8):
                for margin in (True, False):
                    for length_prior in (True, False):
                        options = {"skip": skip, "window": window, "margin": margin, "length_prior": length_prior}
                        cells = [
                            alignment_f1([gold], [ours(*pair, **options)])["f1_strict"]
                            for pair, gold in development.values()
                        ]
                        print(
                            f"| {skip} | {window} | {margin} | {length_prior} | {' | '.join(f'{c:.3f}' for c in cells)} |"
                        )

    print("\n## quality and alignment time\n")
    print(
        "| method | dev strict F1 | dev lax F1 | test strict F1 | test lax F1 | test P strict | test R strict | "
        "test align s (7 docs) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, function in methods.items():
        dev = alignment_f1([documents["dev"][2]], [function(*overlaps["dev"])])
        started = time.perf_counter()
        test_beads = [function(*overlaps[doc]) for doc in TEST_DOCUMENTS]
        seconds = time.perf_counter() - started
        test = alignment_f1([documents[doc][2] for doc in TEST_DOCUMENTS], test_beads)
        print(
            f"| {name} | {dev['f1_strict']:.3f} | {dev['f1_lax']:.3f} | {test['f1_strict']:.3f} | "
            f"{test['f1_lax']:.3f} | {test['precision_strict']:.3f} | {test['recall_strict']:.3f} | {seconds:.2f} |"
        )

    if args.gettext:
        print(f"\n## English -> other scripts: gettext documents of {args.gettext_sentences} pairs, planted beads\n")
        print("| pair | sentences | method | strict F1 | lax F1 | align s |\n|---|---|---|---|---|---|")
        for lang in args.gettext:
            src_sentences, tgt_sentences, gold = gettext_document(lang, args.gettext_sentences)
            pair = overlaps_of([src_sentences, tgt_sentences], layers, encode)
            for name, function in methods.items():
                started = time.perf_counter()
                beads = function(*pair)
                seconds = time.perf_counter() - started
                scores = alignment_f1([gold], [beads])
                print(
                    f"| en-{lang} | {len(src_sentences)} x {len(tgt_sentences)} | {name} | {scores['f1_strict']:.3f} "
                    f"| {scores['f1_lax']:.3f} | {seconds:.2f} |",
                    flush=True,
                )

    print("\n## long documents: alignment time and peak memory (encoding excluded)\n")
    de = [s for doc in TEST_DOCUMENTS for s in documents[doc][0]]
    fr = [s for doc in TEST_DOCUMENTS for s in documents[doc][1]]
    gold, offset_de, offset_fr = [], 0, 0
    for doc in TEST_DOCUMENTS:  # the gold beads of the concatenation: each document's, shifted
        gold += [([x + offset_de for x in xs], [y + offset_fr for y in ys]) for xs, ys in documents[doc][2]]
        offset_de, offset_fr = offset_de + len(documents[doc][0]), offset_fr + len(documents[doc][1])
    concatenated = overlaps_of([de, fr], layers, encode)
    long_documents = {f"7 test documents concatenated ({len(de)} x {len(fr)})": (*concatenated, gold)}
    for size in args.synthetic:
        src, tgt, planted = synthetic(size)
        long_documents[f"synthetic {src.n} x {tgt.n}"] = (src, tgt, planted)
    print("| document | method | strict F1 | align s | peak extra MB |\n|---|---|---|---|---|")
    for label, (src, tgt, gold) in long_documents.items():
        path = os.path.join(workdir, "document.npz")
        arrays = {
            f"{side}_{key}": getattr(overlaps, key)
            for side, overlaps in (("src", src), ("tgt", tgt))
            for key in ("vectors", "index", "lengths")
        }
        np.savez(path, gold=np.array(json.dumps(gold)), **arrays)
        del src, tgt
        for name in methods:
            # Each method in a process of its own, so that memory freed by another is not counted or reused.
            command = [sys.executable, __file__, "--vecalign", args.vecalign, "--max-align", str(args.max_align)]
            command += ["--bertalign", args.bertalign] if args.bertalign else []
            command += ["--no-vecalign-dp"] if args.no_vecalign_dp else []
            result = subprocess.run([*command, "--child", name, path, workdir], capture_output=True, text=True)
            if result.returncode:
                print(f"| {label} | {name} | failed: {result.stderr.strip().splitlines()[-1]} | | |", flush=True)
                continue
            numbers = json.loads(result.stdout.strip().splitlines()[-1])
            print(
                f"| {label} | {name} | {numbers['f1_strict']:.3f} | {numbers['seconds']:.2f} | "
                f"{numbers['peak_mb']:.0f} |",
                flush=True,
            )
        os.unlink(path)
    print(json.dumps({"load_after": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
