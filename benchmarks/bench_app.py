"""The review app on large files: time to the first view and to a re-filter, in a real browser (Debian's Chromium
through Playwright), beside two baselines measured in the same run.

Data: synthetic pairs as ``mine --classifier`` writes them (score, src_index, tgt_index, src, tgt, quality; sentences
of 6-14 random words, seeded), ``--pairs`` rows (default a million) in TSV.

Measured, wall-clock seconds on this machine:
(a) the app (``bitext-hf app``'s ``launch``): reading and checking the file (``PairsReview``: Arrow, SHA-256), the
    browser's first view (page load until the summary shows the count), and a re-filter (a threshold typed into the
    slider's box until the summary shows the new count: filter, sort, page, histogram drawn, sent);
(b) a notebook's way: pandas ``read_csv`` of the same file, the same threshold, ``sort_values`` (no browser);
(c) a Gradio page given every row (``gr.Dataframe(value=the DataFrame)``), on ``--naive-rows`` rows (default
    100,000): the time to its first view in the same browser, what "loading every row into the browser" costs.
Peak resident memory of this process (the server side; the browser is another process).

``--screenshots DIR`` also writes the README's pictures: the pairs view on the demo's mined pairs with the default
pair classifier (``bitext-hf mine --demo --classifier default``), and the alignment view on the first 40 sentences of
Text+Berg's test0 aligned by ``bitext-hf align`` (``--vecalign``: a checkout or bare clone of thompsonb/vecalign).

    python benchmarks/bench_app.py
    python benchmarks/bench_app.py --pairs 100000 --naive-rows 20000
    python benchmarks/bench_app.py --screenshots docs/images --vecalign ~/src/vecalign
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "that",
    "for",
    "on",
    "was",
    "with",
    "as",
    "his",
    "they",
    "be",
    "at",
    "one",
    "have",
    "this",
    "from",
    "or",
    "had",
    "by",
    "word",
    "but",
    "what",
    "some",
    "we",
    "can",
    "out",
    "other",
    "were",
    "all",
    "there",
    "when",
    "up",
    "use",
    "your",
    "how",
    "said",
    "an",
    "each",
    "she",
    "which",
    "do",
    "their",
    "time",
    "if",
    "will",
    "way",
]


def synthetic_pairs(path: Path, count: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        handle.write("score\tsrc_index\ttgt_index\tsrc\ttgt\tquality\n")
        for row in range(count):
            src = " ".join(rng.choices(WORDS, k=rng.randint(6, 14)))
            tgt = " ".join(rng.choices(WORDS, k=rng.randint(6, 14)))
            handle.write(f"{rng.uniform(0.9, 1.4):.6f}\t{row}\t{row}\t{src}\t{tgt}\t{rng.random():.6f}\n")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def chromium() -> str:
    found = os.environ.get("BITEXT_HF_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        sys.exit("no Chromium: apt-get install chromium (or set BITEXT_HF_CHROMIUM)")
    return found


def wait_for_text(page, selector: str, text: str) -> None:
    """Until ``selector`` shows ``text``, checked at every frame (Playwright's expect polls at growing intervals, up
    to a second, which would round the times up)."""
    page.wait_for_function(
        "([selector, text]) => { const e = document.querySelector(selector); return !!e && e.innerText.includes(text); }",
        arg=[selector, text],
        polling="raf",
        timeout=600_000,
    )


def timed_app(browser, path: Path, threshold: float) -> dict[str, float]:

    from bitext_hf.app import PairsReview, ReviewFilters, launch

    start = time.perf_counter()
    review = PairsReview(path)
    read = time.perf_counter() - start
    kept = int(review.kept(ReviewFilters(threshold=threshold)).sum())
    port = free_port()
    app = launch(review, port=port, block=False)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(600_000)
    try:
        start = time.perf_counter()
        page.goto(f"http://127.0.0.1:{port}")
        wait_for_text(page, "#summary", f"of {review.count:,} pairs kept")
        first_view = time.perf_counter() - start
        box = page.locator("#threshold input[type=number]").first
        start = time.perf_counter()
        box.fill(str(threshold))
        box.press("Enter")
        wait_for_text(page, "#summary", f"{kept:,} of {review.count:,}")
        refilter = time.perf_counter() - start
    finally:
        page.close()
        app.close()
        review.decisions_path.unlink(missing_ok=True)
    return {"read": read, "first view": first_view, "re-filter": refilter}


def timed_pandas(path: Path, threshold: float) -> dict[str, float]:
    import pandas as pd

    start = time.perf_counter()
    frame = pd.read_csv(path, sep="\t", quoting=3, keep_default_na=False, dtype={"src": str, "tgt": str})
    read = time.perf_counter() - start
    start = time.perf_counter()
    frame[frame["score"] >= threshold].sort_values("score", ascending=False, kind="stable").head(50)
    return {"read": read, "re-filter": time.perf_counter() - start}


def timed_every_row(browser, path: Path, rows: int) -> float:
    import gradio as gr
    import pandas as pd

    frame = pd.read_csv(path, sep="\t", quoting=3, keep_default_na=False, nrows=rows, dtype={"src": str, "tgt": str})
    with gr.Blocks(analytics_enabled=False) as app:
        gr.Markdown(f"every row: {len(frame):,}", elem_id="title")
        gr.Dataframe(value=frame, interactive=False, elem_id="pairs")
    port = free_port()
    app.launch(server_port=port, prevent_thread_lock=True, quiet=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        start = time.perf_counter()
        page.goto(f"http://127.0.0.1:{port}")
        page.locator("#pairs [role=gridcell]").first.wait_for(state="visible", timeout=600_000)
        return time.perf_counter() - start
    finally:
        page.close()
        app.close()


def screenshot(browser, review, ready: str, path: Path) -> None:
    """A picture of the app on ``review`` once its summary shows ``ready`` (and the histogram had time to draw)."""
    from bitext_hf.app import launch

    port = free_port()
    app = launch(review, port=port, block=False)
    page = browser.new_page(viewport={"width": 1400, "height": 1150})
    try:
        page.goto(f"http://127.0.0.1:{port}")
        wait_for_text(page, "#summary", ready)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(path))
    finally:
        page.close()
        app.close()


def screenshots(browser, folder: Path, vecalign: str | None, work: Path) -> None:
    from bitext_hf.app import AlignmentReview, PairsReview, ReviewFilters

    folder.mkdir(parents=True, exist_ok=True)
    demo = work / "demo.tsv"
    subprocess.run(
        ["bitext-hf", "mine", "--demo", "--classifier", "default", "--out", str(demo), "--quiet", "--show", "0"],
        check=True,
    )
    review = PairsReview(demo)
    review.set_filters(ReviewFilters(threshold=1.1))
    review.reject([int(review.view()[2])])
    screenshot(browser, review, "pairs kept", folder / "app-pairs.png")
    if not vecalign:
        print("no --vecalign: the alignment view's screenshot is not made")
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_align import bleualign

    de, fr, _ = bleualign(vecalign, "test0")
    (work / "doc.de").write_text("\n".join(de[:40]) + "\n", encoding="utf-8")
    (work / "doc.fr").write_text("\n".join(fr[:40]) + "\n", encoding="utf-8")
    subprocess.run(
        [
            "bitext-hf",
            "align",
            "--src",
            str(work / "doc.de"),
            "--tgt",
            str(work / "doc.fr"),
            "--out",
            str(work / "doc.align"),
            "--quiet",
        ],
        check=True,
    )
    review = AlignmentReview(work / "doc.de", work / "doc.fr", work / "doc.align")
    screenshot(browser, review, "beads", folder / "app-alignment.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000, help="rows of the large file (default 1,000,000)")
    parser.add_argument("--naive-rows", type=int, default=100_000, help="rows given to the every-row page")
    parser.add_argument("--threshold", type=float, default=1.2, help="the re-filter's threshold")
    parser.add_argument("--screenshots", type=Path, help="write the README's screenshots into this folder")
    parser.add_argument("--vecalign", help="a checkout or bare clone of thompsonb/vecalign (the alignment picture)")
    args = parser.parse_args()
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as work, sync_playwright() as playwright:
        work = Path(work)
        browser = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        if args.screenshots:
            screenshots(browser, args.screenshots, args.vecalign, work)
            print(f"screenshots in {args.screenshots}")
            return
        path = work / "pairs.tsv"
        start = time.perf_counter()
        synthetic_pairs(path, args.pairs)
        print(
            f"{args.pairs:,} pairs, {path.stat().st_size / 1e6:.0f} MB of TSV (made in {time.perf_counter() - start:.0f} s)"
        )
        app = timed_app(browser, path, args.threshold)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        notebook = timed_pandas(path, args.threshold)
        every_row = timed_every_row(browser, path, args.naive_rows)
        browser.close()
    print(
        f"\n| step | the app ({args.pairs:,} pairs) | pandas ({args.pairs:,}) | every row in a page ({args.naive_rows:,}) |"
    )
    print("|---|---|---|---|")
    print(f"| read the file | {app['read']:.1f} s | {notebook['read']:.1f} s | - |")
    print(f"| first view in the browser | {app['first view']:.1f} s | - | {every_row:.1f} s |")
    print(f"| re-filter (threshold {args.threshold}) | {app['re-filter']:.2f} s | {notebook['re-filter']:.2f} s | - |")
    print(f"\npeak resident memory of the server process: {peak:,.0f} MB")
    print(
        f"first view: every-row page on {args.naive_rows:,} rows / the app on {args.pairs:,}: "
        f"{every_row / app['first view']:.1f}x"
    )


if __name__ == "__main__":
    main()
