"""The review app as a Space: `bitext-hf push --space DATASET` (the Hub is tests/test_push.py's stand-in), and the
Space's app.py opening a dataset that `push --pairs` published from a review's export."""

from __future__ import annotations

import runpy

import pytest

from bitext_hf import __version__
from bitext_hf.app import PairsReview, ReviewFilters
from bitext_hf.hub.space import SPACE_FILES
from tests.test_app import write_pairs
from tests.test_push import hub, run  # noqa: F401 (hub: the stand-in Hub, a fixture)


def test_dry_run_lists_the_space_files_without_a_token(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token-file"))
    code, out, err = run(capsys, "--space", "me/mined-en-de", "--repo", "me/review", "--dry-run")
    assert code == 0, err
    assert "would commit to the space repository me/review:" in out
    assert all(name in out for name in SPACE_FILES) and "nothing was uploaded" in out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--space", "not a repo", "--repo", "me/review"], "--space must look like"),
        (["--space", "me/x", "--repo", "me/review", "--license", "mit"], "--space uploads a Space"),
        (["--space", "me/x", "--repo", "me/review", "--include", "*.md"], "--include and --exclude"),
    ],
)
def test_space_options_that_cannot_work_are_refused(capsys, argv, message):
    code, _, err = run(capsys, *argv, "--dry-run")
    assert code == 2 and message in err


def test_a_review_exported_published_and_opened_in_its_space(hub, tmp_path, capsys, monkeypatch):  # noqa: F811
    pairs = tmp_path / "pairs.tsv"
    write_pairs(pairs)
    review = PairsReview(pairs)
    review.set_filters(ReviewFilters(threshold=1.05))
    review.reject([int(review.view()[0])])
    exported, kept = review.export(tmp_path / "kept.tsv")

    code, _, err = run(capsys, "--pairs", str(exported), "--repo", "me/kept-en-de")
    assert code == 0, err
    dataset = hub.copy_to(tmp_path / "dataset")
    assert (
        f"Reviewed with `bitext-hf app`: {kept} of 40 pairs kept (1 rejected by hand)"
        in (dataset / "README.md").read_text()
    )

    hub.uploaded.clear()
    code, out, err = run(capsys, "--space", "me/kept-en-de", "--repo", "me/review")
    assert code == 0, err
    assert "a review Space for me/kept-en-de to me/review" in out
    create = next(kwargs for name, kwargs in hub.calls[::-1] if name == "create_repo")
    assert create["repo_type"] == "space" and create["space_sdk"] == "gradio"
    space = hub.copy_to(tmp_path / "space")
    assert sorted(hub.uploaded) == sorted(SPACE_FILES)
    card = (space / "README.md").read_text()
    assert "sdk: gradio" in card and "app_file: app.py" in card and "- me/kept-en-de" in card
    assert (space / "requirements.txt").read_text() == f"bitext-hf[app]=={__version__}\n"

    # The Space's app, on the published dataset (a local copy: no network), writes only in its own folder.
    monkeypatch.setenv("BITEXT_HF_SPACE_DATA", str(dataset))
    monkeypatch.chdir(tmp_path / "space")
    opened = runpy.run_path(str(space / "app.py"), run_name="space_app")["open_review"]()
    assert opened.count == kept and opened.path == tmp_path / "space" / "review" / "pairs.parquet"
    opened.reject([0])
    assert opened.decisions_path.parent == tmp_path / "space" / "review"
