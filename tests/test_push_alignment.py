"""``push --pairs`` of aligned documents (``bitext-hf align`` output): the dataset card says the alignment settings
and counts beads, the sidecar goes up as alignment.json, and the data loads with ``datasets``."""

from __future__ import annotations

import test_push
from huggingface_hub import DatasetCard
from test_cli_align import SRC, TGT, SumEncoder

from bitext_hf.cli import main
from bitext_hf.jobs import AlignConfig, run_alignment

hub = test_push.hub  # the stand-in Hub of the push tests, as a fixture here


def test_aligned_documents_go_up_with_an_alignment_card(hub, capsys, tmp_path):
    import datasets

    src, tgt = tmp_path / "doc.en", tmp_path / "doc.de"
    src.write_text("\n".join(SRC) + "\n")
    tgt.write_text("\n".join(TGT) + "\n")
    out = tmp_path / "beads.parquet"
    config = AlignConfig(str(src), str(tgt), out=str(out), no_cache=True, src_lang="en", tgt_lang="de", command="c")
    result = run_alignment(config, load_encoder=lambda spec=None, **options: SumEncoder())
    assert repr(result).startswith("AlignResult(1 document pair(s), 7 beads, outputs=[") and len(repr(result)) < 400
    code = main(["push", "--pairs", str(out), "--repo", "me/aligned", "--quiet"])
    _, err = capsys.readouterr()
    assert code == 0, err
    assert sorted(hub.uploaded) == [
        "README.md",
        "alignment.json",
        "data/train-00000-of-00001.parquet",
        "score_histogram.png",
    ]
    card = DatasetCard(hub.uploaded["README.md"].decode())
    assert card.data.language == ["en", "de"] and "sentence-alignment" in card.data.tags
    facts = [
        "| most sentences in a bead (both sides) | 5 |",
        "| beads | 7 |",
        "| links (both sides) | 6 |",
        "| sentences without counterpart | 1 |",
        "The settings above are in `alignment.json`.",
    ]
    assert [fact for fact in facts if fact not in card.text] == []
    # A cache of its own: datasets' default one may hold another test's folder of the same name.
    copy = hub.copy_to(tmp_path / "copy")
    loaded = datasets.load_dataset(str(copy), split="train", cache_dir=str(tmp_path / "datasets-cache"))
    assert loaded.column_names == ["score", "src_lines", "tgt_lines", "src", "tgt"]
    assert loaded["src_lines"][1] == [1, 2] and loaded["src"][3] == ""
