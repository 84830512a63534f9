"""Every folder bitext-hf writes that holds a model is a sentence-transformers model giving ``model.encode``'s vectors.

For each family's export (the top-level folder a recipe reports and ``push`` uploads, plus MuSR's encoder-only
``sentence-transformers/`` and ContrastiveAligned's bare ``encoder/``),
``SentenceTransformer(folder, trust_remote_code=True).encode(texts)`` equals
``AutoModel.from_pretrained(..., trust_remote_code=True).encode(texts)``, an overlong sentence included: here
(transformers 5, sentence-transformers 6) and, without bitext_hf, under transformers 4.57 with each
sentence-transformers 5 release of ``remote_code_tf4.ST5_VERSIONS``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from remote_code_tf4 import ST5_VERSIONS, run_without_bitext_hf
from test_model_contract import CONTRASTIVE, LASER3, MUSR, ONEALIGNER

from bitext_hf.families.contrastive_align.export import SENTENCE_TRANSFORMERS as CONTRASTIVE_OPTIONS
from bitext_hf.families.contrastive_align.export import export_encoders
from bitext_hf.families.musr.export import SENTENCE_TRANSFORMERS as MUSR_OPTIONS
from bitext_hf.families.musr.export import save_sentence_transformers
from bitext_hf.hub import save_for_hub

# Longer than every tiny model's max_seq_length (its position table at most): truncation must agree too.
OVERLONG = " ".join(["The cat sleeps on the sofa and the dog sleeps in the garden."] * 60)
TEXTS = ["The cat sleeps on the sofa.", "Le chat dort.", "¿Dónde está la estación?", OVERLONG]
CARD = "# tiny\n"
# Config keys sentence-transformers 5.0 to 5.3 accept (their constructors take every saved key).
CLASSIC_KEYS = {
    "Transformer": {"max_seq_length", "do_lower_case"},
    "Pooling": {
        "word_embedding_dimension",
        "pooling_mode_cls_token",
        "pooling_mode_max_tokens",
        "pooling_mode_mean_tokens",
        "pooling_mode_mean_sqrt_len_tokens",
        "pooling_mode_weightedmean_tokens",
        "pooling_mode_lasttoken",
        "include_prompt",
    },
    "Dense": {"in_features", "out_features", "bias", "activation_function"},
    "Normalize": set(),
}


@pytest.fixture(scope="module")
def exports(tiny_tokenizer, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """{name: (the sentence-transformers folder, the folder whose AutoModel.encode it must equal)}."""
    root = tmp_path_factory.mktemp("exports")
    folders: dict[str, tuple[Path, Path]] = {}
    for family in (LASER3, ONEALIGNER):  # the options their export passes (see test_model_contract)
        model = family.build(tiny_tokenizer)
        folder = save_for_hub(
            model,
            tiny_tokenizer,
            root / family.name,
            model_card=CARD,
            sentence_transformers=family.export_options(model),
        )
        folders[family.name] = (folder, folder)

    musr = MUSR.build(tiny_tokenizer)  # as families/musr/export.py: save_outputs writes both folders
    top = save_for_hub(musr, tiny_tokenizer, root / "musr", model_card=CARD, sentence_transformers=MUSR_OPTIONS)
    folders["musr"] = (top, top)
    encoder = save_sentence_transformers(musr, tiny_tokenizer, root / "musr-encoder", model_card=CARD)
    folders["musr-encoder"] = (encoder, top)

    aligned = CONTRASTIVE.build(tiny_tokenizer)  # as families/contrastive_align/export.py: save_outputs
    top = save_for_hub(
        aligned, tiny_tokenizer, root / "contrastive", model_card=CARD, sentence_transformers=CONTRASTIVE_OPTIONS
    )
    folders["contrastive_align"] = (top, top)
    bare = export_encoders(aligned, tiny_tokenizer, root / "contrastive-encoder", model_card=CARD)["en"]
    folders["contrastive_align-encoder"] = (bare, top)
    return folders


def _assert_same_vectors(actual: np.ndarray, expected: np.ndarray) -> None:
    actual, expected = np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape == (len(TEXTS), expected.shape[1])
    cosine = (actual * expected).sum(1) / (np.linalg.norm(actual, axis=1) * np.linalg.norm(expected, axis=1))
    assert cosine.min() > 0.999, cosine
    np.testing.assert_allclose(actual, expected, atol=1e-4)  # encode's vectors are L2-normalized: so must these be


@pytest.mark.parametrize(
    "name", ["laser3", "onealigner", "musr", "musr-encoder", "contrastive_align", "contrastive_align-encoder"]
)
def test_sentence_transformers_gives_the_encode_vectors(name, exports, tiny_tokenizer):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    folder, reference = exports[name]
    encoder = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    model = AutoModel.from_pretrained(reference, trust_remote_code=True).eval()
    assert encoder.max_seq_length == model.max_tokens < len(tiny_tokenizer(OVERLONG)["input_ids"])
    _assert_same_vectors(encoder.encode(TEXTS, convert_to_numpy=True), model.encode(TEXTS).numpy())


@pytest.mark.parametrize("name", ["laser3", "musr", "contrastive_align"])
def test_module_files_are_in_the_format_every_5x_release_reads(name, exports):
    folder, _ = exports[name]
    modules = json.loads((folder / "modules.json").read_text())
    kinds = [entry["type"].removeprefix("sentence_transformers.models.") for entry in modules]
    assert set(kinds) <= CLASSIC_KEYS.keys() and kinds[0] == "Transformer" and "Normalize" in kinds
    assert set(json.loads((folder / "sentence_bert_config.json").read_text())) <= CLASSIC_KEYS["Transformer"]
    for entry, kind in zip(modules[1:], kinds[1:], strict=True):
        config = folder / entry["path"] / "config.json"
        assert set(json.loads(config.read_text()) if config.is_file() else {}) <= CLASSIC_KEYS[kind]
    settings = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert "sentence_transformers" not in settings["__version__"]  # 6.x here would warn every 5.x user


_LOAD_WITH_SENTENCE_TRANSFORMERS = """
import json
from sentence_transformers import SentenceTransformer
from transformers import AutoModel
texts = {texts!r}
results = {{}}
for name, (folder, reference) in {folders!r}.items():
    encoder = SentenceTransformer(folder, trust_remote_code=True, device="cpu")
    model = AutoModel.from_pretrained(reference, trust_remote_code=True).eval()
    results[name] = {{
        "sentence_transformers": encoder.encode(texts, convert_to_numpy=True).tolist(),
        "encode": model.encode(texts).tolist(),
        "max_seq_length": encoder.max_seq_length,
        "max_tokens": model.max_tokens,
    }}
print(json.dumps(results))
"""


@pytest.mark.slow
@pytest.mark.parametrize("version", ST5_VERSIONS)
def test_sentence_transformers_5_under_transformers_4_57(version, exports, tmp_path):
    folders = {name: (str(folder), str(reference)) for name, (folder, reference) in exports.items()}
    code = _LOAD_WITH_SENTENCE_TRANSFORMERS.format(texts=TEXTS, folders=folders)
    results = run_without_bitext_hf(code, cwd=tmp_path, transformers_4=True, sentence_transformers=version)
    assert set(results) == set(exports)
    for name, result in results.items():
        assert result["max_seq_length"] == result["max_tokens"], name
        _assert_same_vectors(result["sentence_transformers"], result["encode"])
        # and the same vectors as bitext-hf's side, transformers 5 and all
        torch.testing.assert_close(
            torch.tensor(result["encode"]), _encode_here(exports[name][1]), atol=1e-4, rtol=1e-4
        )


def _encode_here(folder: Path) -> torch.Tensor:
    from transformers import AutoModel

    return AutoModel.from_pretrained(folder, trust_remote_code=True).eval().encode(TEXTS)
