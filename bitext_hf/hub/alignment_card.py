"""The dataset card of aligned documents (``bitext-hf align`` output pushed with ``push --pairs``): the alignment
settings from the sidecar, the bead counts, the score histogram and the command, as the mined pairs' card has its
mining parameters (:mod:`bitext_hf.hub.dataset_card` chooses this card when the sidecar is an alignment's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bitext_hf.data.alignment_files import ALIGNMENT_TASK, SIDECAR_KEYS

__all__ = ["alignment_metadata", "is_alignment", "render_alignment_card"]

_MISSING = "[More Information Needed]"

_TEMPLATE = """---
{{ card_data }}
---

# {{ pretty_name }}

Sentences of documents that translate each other, aligned with [bitext-hf](https://github.com/bitext-hf/bitext-hf)'s
`align` (Bertalign's two-step search over overlap embeddings): each row is a bead of consecutive sentences of both
documents (1-1, many-to-many up to the size below, or a sentence with no counterpart, whose other side is empty).
The beads are machine-aligned, not human-verified.

## Alignment

| parameter | value |
|---|---|
| encoder | {{ encoder }} |
| most sentences in a bead (both sides) | {{ max_align }} |
| anchor candidates per sentence (top-k) | {{ top_k }} |
| sentences searched around the anchors | {{ window }} |
| score of a sentence without counterpart | {{ skip }} |
| margin (less the mean cosine to neighbouring sentences) | {{ margin }} |
| length prior | {{ length_prior }} |
| languages | {{ languages }} |
| source | {{ src }} |
| target | {{ tgt }} |

## Counts

{{ counts }}

![Score histogram](score_histogram.png)

*{{ histogram_caption }}*

## Columns

* `score`: the bead's score (cosine of its two sides' embeddings less their neighbours' mean, times a length prior;
  0 for a sentence without counterpart);
* `src_lines`, `tgt_lines`: the 0-based lines of the bead's sentences in each document (empty for none);
* `src`, `tgt`: the bead's sentences, joined by a space.

## Use

```python
from datasets import load_dataset

beads = load_dataset("{{ repo_id }}", split="train")
pairs = beads.filter(lambda row: row["src"] and row["tgt"])  # the links, without the unmatched sentences
```

## How to reproduce

```bash
{{ command }}
```

The settings above are in `alignment.json`.
"""


def is_alignment(metadata: Mapping[str, Any]) -> bool:
    """Whether a sidecar (as JSON) is an alignment's."""
    return metadata.get("task") == ALIGNMENT_TASK


def alignment_metadata(record: Mapping[str, Any]) -> dict[str, Any]:
    """The known keys of an alignment's sidecar."""
    return {key: record[key] for key in SIDECAR_KEYS if key in record}


def _counts(table: Any) -> str:
    import numpy as np

    src, tgt = table.column("src").to_pylist(), table.column("tgt").to_pylist()
    links = [bool(a) and bool(b) for a, b in zip(src, tgt)]
    scores = np.asarray(table.column("score").to_numpy(zero_copy_only=False), dtype=np.float64)[links]
    rows = [("beads", f"{table.num_rows:,}"), ("links (both sides)", f"{sum(links):,}")]
    rows.append(("sentences without counterpart", f"{table.num_rows - sum(links):,}"))
    if len(scores):
        rows.append(
            ("link score: min / median / max", f"{scores.min():.4f} / {np.median(scores):.4f} / {scores.max():.4f}")
        )
    return "\n".join(["| count | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)])


def render_alignment_card(
    table: Any,
    metadata: Mapping[str, Any],
    *,
    repo_id: str,
    histogram_caption: str,
    card_data: dict[str, Any],
    languages: Sequence[str],
) -> str:
    """The README.md of an aligned dataset; ``card_data`` are the YAML fields the mined pairs' card would have."""
    from huggingface_hub import DatasetCard, DatasetCardData

    pair = "-".join(languages) if languages else "multilingual"
    data = DatasetCardData(
        **{
            **card_data,
            "tags": ["sentence-alignment", "bitext-hf", "parallel-corpus"],
            "pretty_name": f"Aligned documents ({pair})",
        }
    )

    def value(key: str) -> Any:
        found = metadata.get(key)
        return _MISSING if found is None else found

    card = DatasetCard.from_template(
        data,
        template_str=_TEMPLATE,
        encoder=f"`{metadata['encoder']}`" if metadata.get("encoder") else _MISSING,
        max_align=value("max_align"),
        top_k=value("top_k"),
        window=value("window"),
        skip=value("skip"),
        margin=value("margin"),
        length_prior=value("length_prior"),
        languages=", ".join(languages) or _MISSING,
        src=value("src"),
        tgt=value("tgt"),
        counts=_counts(table),
        histogram_caption=histogram_caption,
        repo_id=repo_id,
        command=metadata.get("command") or "# the command was not recorded (no .meta.json next to the beads)",
    )
    text = str(card)
    return text if text.endswith("\n") else text + "\n"
