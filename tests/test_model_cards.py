"""Every family's model card tells a Hub reader what they need: rendered with each family's own card function from
small fake results (no training), parsed back with huggingface_hub, and checked field by field."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from huggingface_hub import ModelCard

from bitext_hf.hub.card_facts import LOAD_NOTE, REPO_ID_PLACEHOLDER, SMOKE_STEPS, fill_repo_id, is_smoke_run
from bitext_hf.hub.model_card import MISSING_VALUE


def _xsim(value: float) -> dict[str, float]:
    return {"xsim": value, "n": 50}


def laser3_card(smoke: bool, repo_id: str | None) -> str:
    from bitext_hf.families.laser3.export import model_card

    after = 98.0 if smoke else 9.0
    results = {
        "n_train_pairs": {"wo": 1234},
        "global_step": 40 if smoke else 20_000,
        "teacher_zero_shot": {"wo": _xsim(18.0)},
        "student_before": {"wo": _xsim(99.0)},
        "student_after": {"wo": _xsim(after)},
    }
    return model_card(
        languages=["wo"],
        teacher="sentence-transformers/LaBSE",
        training_data=["wo=gettext"],
        monolingual=["wo=gettext"],
        results=results,
        embedding_dim=512,
        repo_id=repo_id,
    )


def onealigner_card(smoke: bool, repo_id: str | None) -> str:
    from bitext_hf.families.onealigner.export import model_card

    config = SimpleNamespace(layer=8, similarity="bertscore", alpha=0.75, softmax_temperature=5.0, loss_type="global")
    stats = {
        "selected_pairs": ["fr-en:gettext"],
        "available_per_pair": {"fr-en:gettext": 1234},
        "train_examples": 1000,
        "eval_sets": {"fr-en:held-out": 200},
    }
    accuracy = 0.5 if smoke else 0.9
    final = {"fr-en:held-out/accuracy": accuracy, "fr-en:held-out/xsim": 5.0, "accuracy": accuracy, "xsim": 5.0}
    return model_card(
        SimpleNamespace(config=config),
        "FacebookAI/xlm-roberta-base",
        stats,
        final,
        training_data=["fr=gettext"],
        initial={"accuracy": 0.8, "xsim": 9.0},
        steps=40 if smoke else 20_000,
        repo_id=repo_id,
    )


def contrastive_card(smoke: bool, repo_id: str | None) -> str:
    from bitext_hf.families.contrastive_align.export import model_card

    word_accuracy = 0.3 if smoke else 0.6
    return model_card(
        "strong",
        "google-bert/bert-base-multilingual-cased",
        ["de"],
        {"word_accuracy": word_accuracy, "sentence_accuracy": 0.7, "xsim": 10.0, "de/xsim": 10.0},
        training_data=["de=gettext"],
        data_stats={"languages": ["de"], "aligner": "similarity", "de": {"pairs": 1234, "examples": 1200}},
        initial={"word_accuracy": 0.4, "sentence_accuracy": 0.6, "xsim": 12.0},
        steps=40 if smoke else 20_000,
        repo_id=repo_id,
    )


def musr_card(smoke: bool, repo_id: str | None) -> str:
    from bitext_hf.families.musr.arguments import ScriptArguments
    from bitext_hf.families.musr.export import model_card

    final = {"xsim_en": 20.0, "accuracy_en": 0.8, "xsim_pivot": 25.0, "accuracy_pivot": 0.7, "bucc_f1_en": 0.6}
    steps = 40 if smoke else 20_000
    results = {
        "data": {"pivot": "fr", "train_pairs": {"fr": 1234, "de": 1000}, "train_examples": [1000, 1000]},
        "stage1": {"final": final, "log_history": [{"step": steps, "loss": 2.0}]},
        "stage2": {
            "final": {**final, "xsim_en": 30.0 if smoke else 15.0},
            "log_history": [{"step": steps, "loss": 1.0}],
        },
    }
    return model_card(ScriptArguments(train_pairs=["fr=gettext", "de=gettext"]), results, repo_id=repo_id)


# family -> (card function, words the title must hold, base model, the warning of a worse model)
FAMILIES = {
    "laser3": (laser3_card, ["LASER3", "sentence-transformers/LaBSE"], "sentence-transformers/LaBSE", "its teacher"),
    "onealigner": (onealigner_card, ["OneAligner", "xlm-roberta-base"], "FacebookAI/xlm-roberta-base", "before"),
    "contrastive_align": (
        contrastive_card,
        ["ContrastiveAligned", "bert-base-multilingual-cased"],
        "google-bert/bert-base-multilingual-cased",
        "before alignment",
    ),
    "musr": (musr_card, ["MuSR", "trained from scratch"], None, "stage 1"),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_card_holds_what_a_hub_reader_needs(family):
    make, title_words, base_model, _ = FAMILIES[family]
    text = make(smoke=False, repo_id=None)
    card = ModelCard(text)  # parses the YAML and the model-index into EvalResult objects (offline validation)
    data = card.data
    assert data.license == "apache-2.0"
    assert data.pipeline_tag == "sentence-similarity"
    assert "en" in data.language and len(data.language) >= 2
    assert "bitext-hf" in data.tags and "smoke-run" not in data.tags
    assert data.datasets == ["(gettext translation catalogs)"]
    assert data.base_model == base_model  # MuSR is trained from scratch: no base model to name
    assert data.eval_results and all(result.metric_value is not None for result in data.eval_results)
    assert data.eval_results[0].task_type == "sentence-similarity"
    title = re.search(r"^# (.+)$", card.text, re.MULTILINE).group(1)
    assert all(word in title for word in title_words), title
    # No unfilled field, no template path placeholder, no Jinja left over.
    assert MISSING_VALUE not in text and not re.search(r"\bPATH\b", text) and "{{" not in text
    # Load snippets for both ways in, with the marked placeholder and the note that says what to put there.
    assert LOAD_NOTE in text
    assert f'AutoModel.from_pretrained("{REPO_ID_PLACEHOLDER}"' in text
    assert f'SentenceTransformer("{REPO_ID_PLACEHOLDER}"' in text
    # The training data in words: the source, the pair count and the licence of the data.
    section = text.split("## Training data", 1)[1].split("\n## ", 1)[0]
    assert "1,234 `" in section and "gettext translation catalogs" in section
    assert "licence of its software package" in section
    assert "## Evaluation" in text and "Protocol:" in text
    bibtex = text.split("```bibtex", 1)[1].split("```", 1)[0]
    assert re.search(r"@inproceedings\{[\w-]+,", bibtex) and "title = " in bibtex and 'year = "20' in bibtex
    assert "booktitle = " in bibtex and "pages = " in bibtex
    assert "Smoke run" not in text and "Worse than" not in text
    if family in ("laser3", "musr"):  # the papers' ablations: their numbers, and where bitext-hf's measurement is
        assert "the paper's" in text and "experiments/README.md" in text


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_smoke_run_worse_than_its_reference_says_so(family):
    make, _, _, reference = FAMILIES[family]
    text = make(smoke=True, repo_id="someone/tiny-model")
    data = ModelCard(text).data
    assert "smoke-run" in data.tags
    top = text.split("\n## ", 1)[0]  # under the title, before any section: the first thing a reader sees
    assert "**Smoke run, not a usable model.**" in top and f"optimizer steps (fewer than {SMOKE_STEPS}" in top
    assert re.search(rf"\*\*Worse than [^*]*{reference}[^*]*:\*\*", top)
    limitations = text.split("## Limitations", 1)[1]
    assert "**Smoke run, not a usable model.**" in limitations
    # A known repository id: the snippets name it, the placeholder and its note are gone.
    assert 'from_pretrained("someone/tiny-model"' in text and REPO_ID_PLACEHOLDER not in text
    assert LOAD_NOTE not in text


def test_smoke_rule_and_repository_id_filled_in_later():
    assert is_smoke_run(SMOKE_STEPS - 1) and not is_smoke_run(SMOKE_STEPS) and not is_smoke_run(None)
    assert is_smoke_run(None, smoke=True)
    text = laser3_card(smoke=False, repo_id=None)
    filled = fill_repo_id(text, "org/wolof-student")
    assert REPO_ID_PLACEHOLDER not in filled and LOAD_NOTE not in filled
    assert filled.count('"org/wolof-student"') == 2
    assert fill_repo_id(filled, "other/name") == filled  # a card that names its repository keeps it


def test_push_names_the_repository_in_the_uploaded_card_only(tmp_path, monkeypatch):
    import importlib

    from bitext_hf.hub.model_files import select_model_files

    upload_module = importlib.import_module("bitext_hf.hub.upload")  # the package's `upload` is the function

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(b"weights")
    card = laser3_card(smoke=False, repo_id=None)
    (folder / "README.md").write_text(card, encoding="utf-8")
    seen = {}

    def fake_upload(staging, repo_id, *args):
        seen["card"] = (staging / "README.md").read_text(encoding="utf-8")
        return "https://huggingface.co/org/wolof-student/commit/0"

    monkeypatch.setattr(upload_module, "_upload_folder", fake_upload)
    selection = select_model_files(folder)
    upload_module.upload(folder, "org/wolof-student", token="x", commit_message="m", selection=selection)
    assert 'SentenceTransformer("org/wolof-student"' in seen["card"] and REPO_ID_PLACEHOLDER not in seen["card"]
    assert (folder / "README.md").read_text(encoding="utf-8") == card  # the user's folder is left as it was


def test_a_local_base_encoder_is_named_by_its_folder_not_its_path(tmp_path):
    from bitext_hf.hub.card_facts import describe_encoder

    base = tmp_path / "work" / "mlm-encoder"
    base.mkdir(parents=True)
    assert describe_encoder(str(base)) == "a local encoder (`mlm-encoder`)"
    assert str(tmp_path) not in describe_encoder(str(base))
    assert describe_encoder("FacebookAI/xlm-roberta-base") == "FacebookAI/xlm-roberta-base"
    assert describe_encoder("random") == "a randomly initialized XLM-R-like encoder"
