"""Tests for ``bitext_hf.hub``: model cards, the Hub export with sentence-transformers modules, push refusal.

The export is checked end to end with a tiny custom model whose source is written here into a module file (as a
model engineer's ``modeling_*.py`` would be), registered for the Auto classes by ``save_for_hub`` and reloaded with
``AutoModel.from_pretrained(..., trust_remote_code=True)`` and ``SentenceTransformer(..., trust_remote_code=True)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import textwrap

import pytest
import torch
import yaml

from bitext_hf.hub import (
    MISSING_VALUE,
    HubExportError,
    ModelCardError,
    available_templates,
    markdown_table,
    push_to_hub,
    render_model_card,
    save_for_hub,
    template_fields,
)

TINY_MODEL_SOURCE = '''
"""A tiny encoder for the hub tests: embeddings + 2 Transformer layers, hidden 32."""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput


class TinyHubConfig(PretrainedConfig):
    model_type = "tiny-hub-test"

    def __init__(self, vocab_size=300, hidden_size=32, num_hidden_layers=2, pad_token_id=1, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        super().__init__(pad_token_id=pad_token_id, **kwargs)


@dataclass
class TinyHubOutput(ModelOutput):
    loss: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    sentence_embedding: torch.FloatTensor | None = None


class TinyHubModel(PreTrainedModel):
    config_class = TinyHubConfig
    base_model_prefix = "tiny"

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        layer = nn.TransformerEncoderLayer(config.hidden_size, 2, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, 0.5)

    def forward(self, input_ids, attention_mask=None, labels=None, return_dict=None, **kwargs):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden = self.encoder(self.embeddings(input_ids), src_key_padding_mask=attention_mask == 0)
        pooled = hidden.masked_fill(attention_mask.unsqueeze(-1) == 0, -1e4).amax(1) * 2.0
        loss = None if labels is None else pooled.pow(2).mean()
        return TinyHubOutput(loss=loss, last_hidden_state=hidden, sentence_embedding=pooled)
'''

SENTENCES = ["The cat sleeps on the sofa.", "Le chat dort.", "¿Dónde está la estación?"]


@pytest.fixture
def tiny_model_class(tmp_path, monkeypatch):
    """Import the tiny model from a module file of its own (remote code must be a file to copy)."""
    module_dir = tmp_path / "code"
    module_dir.mkdir()
    (module_dir / "tiny_hub_model.py").write_text(TINY_MODEL_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(module_dir))
    sys.modules.pop("tiny_hub_model", None)
    module = importlib.import_module("tiny_hub_model")
    yield module
    sys.modules.pop("tiny_hub_model", None)


@pytest.fixture
def tiny_model(tiny_model_class, tiny_tokenizer):
    torch.manual_seed(0)
    config = tiny_model_class.TinyHubConfig(vocab_size=len(tiny_tokenizer))
    return tiny_model_class.TinyHubModel(config).eval()


def manual_embeddings(model, tokenizer, pooling, dense=None, normalize=False):
    batch = tokenizer(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    with torch.no_grad():
        output = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    tokens, mask = output.last_hidden_state, batch["attention_mask"].unsqueeze(-1).float()
    if pooling == "mean":
        pooled = (tokens * mask).sum(1) / mask.sum(1)
    elif pooling == "max":
        pooled = tokens.masked_fill(mask == 0, float("-inf")).amax(1)
    elif pooling == "cls":
        pooled = tokens[:, 0]
    else:
        pooled = output.sentence_embedding
    if dense is not None:
        with torch.no_grad():
            pooled = dense(pooled)
    if normalize:
        pooled = torch.nn.functional.normalize(pooled, dim=-1)
    return pooled


@pytest.mark.parametrize(
    ("options", "expected_modules"),
    [
        ({"pooling": "mean"}, ["Transformer", "Pooling", "Normalize"]),  # normalized by default
        ({"pooling": "mean", "normalize": False}, ["Transformer", "Pooling"]),
        ({"pooling_mode": "max", "normalize": True}, ["Transformer", "Pooling", "Normalize"]),
        ({"pooling": "cls", "dense": "linear", "normalize": True}, ["Transformer", "Pooling", "Dense", "Normalize"]),
        ({"pooling": "model", "verify": True}, ["Transformer", "Normalize"]),
    ],
)
def test_sentence_transformers_export_matches_manual_pooling(
    tiny_model, tiny_tokenizer, tmp_path, options, expected_modules
):
    from sentence_transformers import SentenceTransformer

    options = dict(options)
    dense = None
    if options.get("dense") == "linear":
        torch.manual_seed(1)
        dense = options["dense"] = torch.nn.Linear(32, 16)
    output_dir = tmp_path / "export"
    save_for_hub(tiny_model, tiny_tokenizer, output_dir, model_card="# Tiny\n", sentence_transformers=options)

    modules = json.loads((output_dir / "modules.json").read_text())
    assert [entry["type"].rsplit(".", 1)[1] for entry in modules] == expected_modules
    encoder = SentenceTransformer(str(output_dir), trust_remote_code=True, device="cpu")
    actual = torch.as_tensor(encoder.encode(SENTENCES, convert_to_numpy=True))
    pooling = options.get("pooling", options.get("pooling_mode"))
    expected = manual_embeddings(tiny_model, tiny_tokenizer, pooling, dense, options.get("normalize", True))
    assert actual.shape == expected.shape == (3, 16 if dense is not None else 32)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-4)
    if options.get("normalize", True):
        torch.testing.assert_close(actual.norm(dim=-1), torch.ones(3))


def test_export_loads_with_auto_classes_and_ships_code(tiny_model, tiny_tokenizer, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    output_dir = tmp_path / "export"
    card = render_model_card("generic", model_name="Tiny", model_path=str(output_dir))
    save_for_hub(tiny_model, tiny_tokenizer, output_dir, model_card=card, sentence_transformers=None)

    names = {path.name for path in output_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tiny_hub_model.py", "README.md", "tokenizer.json"} <= names
    assert not names & {"modules.json", "sentence_bert_config.json"}
    config = json.loads((output_dir / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "tiny_hub_model.TinyHubConfig",
        "AutoModel": "tiny_hub_model.TinyHubModel",
    }
    assert (output_dir / "README.md").read_text() == card
    reloaded = AutoModel.from_pretrained(str(output_dir), trust_remote_code=True).eval()
    assert type(reloaded).__name__ == "TinyHubModel"
    tokenizer = AutoTokenizer.from_pretrained(str(output_dir))
    batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**batch).last_hidden_state, tiny_model(**batch).last_hidden_state)
    assert not (tmp_path / ".export.staging").exists()  # the staging folder is gone


@pytest.mark.parametrize(("umask", "file_mode", "folder_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)])
def test_export_honours_the_umask_and_ships_figures(
    tiny_model, tiny_tokenizer, tmp_path, umask, file_mode, folder_mode
):
    # transformers writes model.safetensors through a 0600 temporary file: a shared checkpoint others cannot read.
    figure = tmp_path / "training_curve.png"
    figure.write_bytes(b"\x89PNG fake")
    output_dir = tmp_path / "export"
    previous = os.umask(umask)
    try:
        save_for_hub(
            tiny_model,
            tiny_tokenizer,
            output_dir,
            model_card="# x\n",
            sentence_transformers={"pooling": "mean"},
            figures=[figure],
        )
    finally:
        os.umask(previous)
    assert (output_dir / "training_curve.png").read_bytes() == b"\x89PNG fake"
    modes = {path.relative_to(output_dir).as_posix(): path.stat().st_mode & 0o777 for path in output_dir.rglob("*")}
    assert modes["model.safetensors"] == modes["README.md"] == modes["1_Pooling/config.json"] == file_mode
    assert {mode for path, mode in modes.items() if (output_dir / path).is_file()} == {file_mode}
    assert modes["1_Pooling"] == folder_mode
    with pytest.raises(HubExportError, match="figure file"):
        save_for_hub(tiny_model, tiny_tokenizer, output_dir, model_card="# x\n", figures=[tmp_path / "none.png"])


def test_export_into_a_training_folder_keeps_checkpoints_and_replaces_old_export(tiny_model, tiny_tokenizer, tmp_path):
    output_dir = tmp_path / "run"
    (output_dir / "checkpoint-5").mkdir(parents=True)
    (output_dir / "checkpoint-5" / "loop_state.json").write_text("{}")
    dense = torch.nn.Linear(32, 8)
    options = {"pooling": "mean", "dense": dense, "normalize": True}
    save_for_hub(tiny_model, tiny_tokenizer, output_dir, model_card="# v1\n", sentence_transformers=options)
    assert (output_dir / "2_Dense").is_dir() and (output_dir / "3_Normalize").is_dir()
    save_for_hub(tiny_model, tiny_tokenizer, output_dir, model_card="# v2\n", sentence_transformers={"pooling": "max"})
    assert (output_dir / "checkpoint-5" / "loop_state.json").is_file()
    assert not (output_dir / "2_Dense").exists() and not (output_dir / "3_Normalize").exists()
    assert (output_dir / "README.md").read_text() == "# v2\n"
    pooling = json.loads((output_dir / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_max_tokens"] is True and pooling["pooling_mode_mean_tokens"] is False


@pytest.mark.parametrize(("pooling", "warns"), [("max", False), ("mean", True)])
def test_warns_when_export_pools_differently_from_the_model(
    tiny_model, tiny_tokenizer, tmp_path, caplog, pooling, warns
):
    # The tiny model's own sentence_embedding is 2 x max pooling: the same direction as a max-pooling export.
    with caplog.at_level("WARNING", logger="bitext_hf.hub.export"):
        save_for_hub(
            tiny_model, tiny_tokenizer, tmp_path / "x", model_card="# x", sentence_transformers={"pooling": pooling}
        )
    assert ("does not reproduce TinyHubModel.sentence_embedding" in caplog.text) is warns


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pooling": "median"}, "pooling must be one of"),
        ({"pool": "mean"}, "unknown sentence_transformers option"),
        ({"pooling": "mean", "dense": torch.nn.Linear(16, 4)}, "takes 16 features"),
        ({"pooling": "mean", "dense": "not a layer"}, "torch.nn.Linear"),
        ({"pooling": "mean", "token_embeddings_field": "hidden_states"}, "no 3-d tensor 'hidden_states'"),
        ({"pooling": "model", "sentence_embedding_field": "last_hidden_state"}, "no 2-d tensor"),
        ({"pooling": "mean", "max_seq_length": 1}, "max_seq_length"),
    ],
)
def test_invalid_exports_fail_before_writing(tiny_model, tiny_tokenizer, tmp_path, options, message):
    output_dir = tmp_path / "export"
    with pytest.raises(HubExportError, match=message):
        save_for_hub(tiny_model, tiny_tokenizer, output_dir, model_card="# Tiny\n", sentence_transformers=options)
    assert not output_dir.exists()
    assert [path.name for path in tmp_path.iterdir()] == ["code"]  # no staging folder left behind


def test_save_for_hub_rejects_missing_card_or_tokenizer(tiny_model, tiny_tokenizer, tmp_path):
    with pytest.raises(HubExportError, match="model_card"):
        save_for_hub(tiny_model, tiny_tokenizer, tmp_path / "a", model_card="  ")
    with pytest.raises(HubExportError, match="sentence-transformers export needs the tokenizer"):
        save_for_hub(tiny_model, None, tmp_path / "b", model_card="# x", sentence_transformers={})
    with pytest.raises(HubExportError, match="tokenizer"):
        save_for_hub(tiny_model, object(), tmp_path / "b", model_card="# x")
    # A model that reads no text (the light pair classifier) ships without one.
    save_for_hub(tiny_model, None, tmp_path / "d", model_card="# x")
    assert (tmp_path / "d" / "config.json").is_file() and not (tmp_path / "d" / "tokenizer_config.json").exists()
    with pytest.raises(HubExportError, match="PreTrainedModel"):
        save_for_hub(torch.nn.Linear(2, 2), tiny_tokenizer, tmp_path / "c", model_card="# x")


def test_push_to_hub_refuses_a_folder_that_is_not_an_export(tmp_path):
    with pytest.raises(HubExportError, match="not a folder"):
        push_to_hub(tmp_path / "missing", "owner/name")
    (tmp_path / "README.md").write_text("# card")
    with pytest.raises(HubExportError, match=r"no config\.json"):
        push_to_hub(tmp_path, "owner/name")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(HubExportError, match="repo_id"):
        push_to_hub(tmp_path, "a/b/c")


def test_push_to_hub_refused_by_the_hub_is_one_hub_access_error(tmp_path, monkeypatch):
    # The recipes' --push_to_hub goes through the same upload as `bitext-hf push` (tests/test_push.py): a 403 is a
    # BitextError (exit 4) that says nothing was uploaded, and a revision is a branch created first.
    import huggingface_hub
    from huggingface_hub.errors import HfHubHTTPError

    from bitext_hf.hub import HubAccessError

    httpx = pytest.importorskip("httpx2") if importlib.util.find_spec("httpx2") else pytest.importorskip("httpx")
    calls = []
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda self, repo_id, **kw: calls.append("create"))
    monkeypatch.setattr(huggingface_hub.HfApi, "create_branch", lambda self, repo_id, **kw: calls.append(kw["branch"]))

    def refuse(self, **kwargs):
        response = httpx.Response(403, request=httpx.Request("POST", "https://huggingface.co/api/commit"))
        raise HfHubHTTPError("403 Forbidden", response=response)

    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", refuse)
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(HubAccessError, match=r"HTTP 403.*nothing was uploaded") as raised:
        push_to_hub(tmp_path, "owner/name", token="hf_x", revision="v2")
    assert raised.value.exit_code == 4 and calls == ["create", "v2"]


# ---------------------------------------------------------------------------------------------------- model cards


def test_shipped_templates_render_with_the_recipes_fields():
    assert {"generic", "laser3", "onealigner"} <= set(available_templates())
    laser3 = render_model_card(
        "laser3",
        strict=True,
        languages="wo",
        teacher="use-multilingual-v3",
        pooling="max",
        embedding_dim=512,
        xsim_table=[{"language": "wo", "xsim": 5.925}],
        training_data="- `wo=data.tsv`",
        evaluation_data="wo: 50 pairs",
        model_id="org/student",
    )
    assert "LASER3 student encoder for wo, distilled from use-multilingual-v3" in laser3
    assert "| language | xsim |" in laser3 and "| wo | 5.92 |" in laser3
    assert "{" not in laser3.split("```bibtex")[0]  # every placeholder filled
    assert "@inproceedings{heffernan-etal-2022-bitext," in laser3  # escaped braces come out single
    front_matter = yaml.safe_load(laser3.split("---")[1])
    assert front_matter["library_name"] == "transformers"


def test_onealigner_template_renders_the_recipe_fields_and_model_index():
    from huggingface_hub import ModelCard

    from bitext_hf.families.onealigner import results_table

    rows = results_table({"fr/accuracy": 0.9, "fr/xsim": 7.5, "accuracy": 0.9, "xsim": 7.5}, ["fr"])
    card = render_model_card(
        "onealigner",
        strict=True,
        layer=8,
        similarity="bertscore",
        alpha=0.75,
        softmax_temperature=5.0,
        loss_type="global",
        encoder="xlm-roberta-base",
        training_data="- en-fr",
        evaluation_data="fr",
        model_id="org/aligner",
        train_examples=1000,
        results_table=rows,
    )
    assert "hidden state 8" in card and "| fr | 90.0 | 7.5 |" in card
    assert "@inproceedings{niu-etal-2022-onealigner," in card
    found = {(r.dataset_config, r.metric_type): r.metric_value for r in ModelCard(card).data.eval_results}
    assert found == {
        ("fr", "accuracy"): 90.0,
        ("fr", "xsim"): 7.5,
        ("average", "accuracy"): 90.0,
        ("average", "xsim"): 7.5,
    }


def test_generic_template_fills_missing_fields_and_merges_card_data():
    card = render_model_card(
        "generic",
        model_name="My aligner",
        hyperparameters={"learning_rate": 3e-6, "batch_size": 64},
        card_data={"license": "apache-2.0", "language": ["en", "fr"], "base_model": "xlm-roberta-base"},
    )
    front_matter = yaml.safe_load(card.split("---")[1])
    assert front_matter["license"] == "apache-2.0"
    assert front_matter["language"] == ["en", "fr"]
    assert "bitext-hf" in front_matter["tags"]
    assert "# My aligner" in card
    assert "- **learning_rate**: 3e-06\n- **batch_size**: 64" in card
    assert MISSING_VALUE in card


def test_template_text_paths_and_jinja_syntax(tmp_path):
    text = textwrap.dedent(
        """\
        ---
        license: mit
        ---
        # {{ name }}: accuracy {{ "%.1f"|format(accuracy) }}
        {% if note %}note: {{ note }}{% endif %}
        code: {"k": 1} and {% raw %}{{ literal }}{% endraw %} stay
        """
    )
    assert template_fields(text) == ["accuracy", "name", "note"]
    rendered = render_model_card(text, name="X", accuracy=93.456, note="n")
    assert "# X: accuracy 93.5" in rendered
    assert 'code: {"k": 1} and {{ literal }} stay' in rendered
    assert yaml.safe_load(rendered.split("---")[1]) == {"license": "mit"}
    path = tmp_path / "card.md"
    path.write_text(text)
    assert render_model_card(str(path), name="X", accuracy=1.0, note="") == render_model_card(
        text, name="X", accuracy=1.0, note=""
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: render_model_card("generic", model_nam="typo"), r"\['model_nam'\] are not used"),
        (lambda: render_model_card("generic", strict=True, model_name="x"), "needs the fields"),
        (lambda: render_model_card("no-such-template"), "neither a shipped template"),
        (lambda: render_model_card("x {{ a \n"), "line 1"),
        (lambda: render_model_card('x {{ "%.2f"|format(a) }}\n', a="text"), "cannot be rendered"),
        (lambda: render_model_card("---\n- a list\n---\nbody {{ a }}\n", a=1), "front matter must be a YAML mapping"),
    ],
)
def test_model_card_errors(call, message):
    with pytest.raises(ModelCardError, match=message):
        call()


def test_laser3_card_carries_the_model_index_of_the_student_only():
    from huggingface_hub import ModelCard

    from bitext_hf.families.laser3.export import xsim_rows

    results = {
        "teacher_zero_shot": {"wo": {"xsim": 30.0, "n": 50}},
        "student_before": {"wo": {"xsim": 90.0, "n": 50}},
        "student_after": {"wo": {"xsim": 5.925, "n": 50}, "fr": {"xsim": 1.5, "n": 40}},
    }
    text = render_model_card(
        "laser3",
        card_data={"language": ["wo", "fr", "en"], "license": "apache-2.0"},
        languages="wo, fr",
        teacher="t",
        pooling="max",
        embedding_dim=512,
        xsim_table=xsim_rows(results),
        training_data="- x",
    )
    card = ModelCard(text)  # what the Hub parses: the model-index becomes the evaluation table of the page
    assert card.data.model_name == "LASER3 student encoder for wo, fr, distilled from t"
    found = {(r.dataset_config, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert found == {("wo", "xsim"): 5.925, ("fr", "xsim"): 1.5}  # teacher and before-training columns left out
    assert {r.task_type for r in card.data.eval_results} == {"sentence-similarity"}
    assert card.data.license == "apache-2.0" and "laser3" in card.data.tags
    assert "| wo | 50 | 30.00 | 90.00 | 5.92 |" in card.text


def test_explicit_eval_results_and_figures_in_the_generic_card(tmp_path):
    from huggingface_hub import EvalResult, ModelCard

    from bitext_hf.hub import CardFigure

    result = {
        "task_type": "sentence-similarity",
        "dataset_type": "mteb/tatoeba",
        "dataset_name": "Tatoeba",
        "metric_type": "f1",
        "metric_value": 0.93,
        "dataset_config": "deu-eng",
    }
    figure = CardFigure(tmp_path / "xsim_heatmap.png", "xsim by direction: de→en 1.00%.")
    text = render_model_card(
        "generic",
        model_name="Tiny",
        eval_results=[result, EvalResult(**{**result, "metric_type": "accuracy", "metric_value": 0.95})],
        figures=[figure, tmp_path / "training_curve.png"],
        card_data={"tags": ["extra"]},
    )
    card = ModelCard(text)
    assert card.data.model_name == "Tiny"
    assert [(r.metric_type, r.metric_value) for r in card.data.eval_results] == [("f1", 0.93), ("accuracy", 0.95)]
    assert card.data.tags[:2] == ["bitext-hf", "sentence-similarity"] and card.data.tags[-1] == "extra"
    assert "## Figures\n\n![xsim heatmap](xsim_heatmap.png)\n\n*xsim by direction: de→en 1.00%.*" in text
    assert "![training curve](training_curve.png)" in text
    assert "## Figures" not in render_model_card("generic", model_name="Tiny")


def test_markdown_table():
    table = markdown_table([{"pair": "en-fr", "acc": 0.5}, {"pair": "en|de", "xsim": 1.0}])
    assert table.splitlines() == [
        "| pair | acc | xsim |",
        "|---|---|---|",
        "| en-fr | 0.50 |  |",
        "| en\\|de |  | 1.00 |",
    ]
    assert markdown_table([]) == MISSING_VALUE
