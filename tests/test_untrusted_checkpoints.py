"""No code runs that the user did not allow: a checkpoint whose tokenizer ships Python is never imported
unless the caller opted in with ``trust_remote_code=True``.

Each family's tiny checkpoint (the table of ``test_model_contract``) gets a ``tokenizer_config.json`` whose
``auto_map`` points to a module in the folder that writes a marker file when it is imported. Without the opt-in
nothing writes the marker and one line says how to opt in (``model.encode`` in Python, ``bitext-hf eval --model``);
with it the marker appears, which proves that these tests would see the code run. The declared tokenizer class is
either the module's own (transformers cannot load it without the code) or a plain transformers class (transformers
would quietly load that class instead, which need not tokenize as the checkpoint's code does).

The guard (``_resolve_tokenizer``, ``_tokenizer_code``, ``_untrusted_tokenizer_message``, ``from_pretrained``) is one
source and its marked copies in every family, which ``tests/test_modeling_copies.py`` checks identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_fakes import run, write_lines
from remote_code_tf4 import run_without_bitext_hf
from test_model_contract import FAMILIES, SENTENCES, Family
from transformers import AutoModel

from bitext_hf.cli import EXIT_ENCODER
from bitext_hf.encoders import EncoderLoadError, load_encoder

# What the hostile tokenizer_config.json declares as its class: the shipped module's, or a plain transformers one.
DECLARED_CLASSES = ["HostileTokenizer", "PreTrainedTokenizerFast"]

_HOSTILE_MODULE = """\
from pathlib import Path

Path({marker!r}).write_text("the checkpoint's tokenizer code ran", encoding="utf-8")

from transformers import PreTrainedTokenizerFast


class HostileTokenizer(PreTrainedTokenizerFast):
    pass
"""


def _hostile_checkpoint(family: Family, tokenizer: Any, folder: Path, declared_class: str) -> Path:
    """Save the family's tiny model with a tokenizer whose `auto_map` imports a marker-writing module; the marker."""
    family.build(tokenizer).save_pretrained(folder, tokenizer=tokenizer)
    marker = folder.parent / f"{folder.name}-ran"
    (folder / "hostile_tokenizer.py").write_text(_HOSTILE_MODULE.format(marker=str(marker)), encoding="utf-8")
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["auto_map"] = {"AutoTokenizer": [None, "hostile_tokenizer.HostileTokenizer"]}
    config["tokenizer_class"] = declared_class
    config_path.write_text(json.dumps(config), encoding="utf-8")
    return marker


def every_family_and_declared_class(test):
    test = pytest.mark.parametrize("declared_class", DECLARED_CLASSES)(test)
    return pytest.mark.parametrize("family", FAMILIES, ids=[family.name for family in FAMILIES])(test)


@every_family_and_declared_class
@pytest.mark.parametrize(
    "load",
    [
        pytest.param(lambda family, folder: AutoModel.from_pretrained(folder), id="AutoModel"),
        pytest.param(
            lambda family, folder: AutoModel.from_pretrained(folder, trust_remote_code=False), id="refused-explicitly"
        ),
        pytest.param(lambda family, folder: family.model_class.from_pretrained(folder), id="model-class"),
    ],
)
def test_encode_never_runs_the_tokenizer_code_unasked(family, declared_class, load, tiny_tokenizer, tmp_path):
    marker = _hostile_checkpoint(family, tiny_tokenizer, tmp_path / "model", declared_class)
    model = load(family, tmp_path / "model")
    with pytest.raises(ValueError) as raised:
        model.encode(SENTENCES)
    assert not marker.exists()
    message = str(raised.value)
    assert "\n" not in message
    assert (
        "hostile_tokenizer.HostileTokenizer" in message
        and "trust_remote_code of from_pretrained set to True" in message
    )
    assert model.trust_remote_code is False


@every_family_and_declared_class
def test_encode_runs_the_tokenizer_code_once_the_caller_opts_in(family, declared_class, tiny_tokenizer, tmp_path):
    marker = _hostile_checkpoint(family, tiny_tokenizer, tmp_path / "model", declared_class)
    model = AutoModel.from_pretrained(tmp_path / "model", trust_remote_code=True)
    assert model.trust_remote_code is True
    embeddings = model.encode(SENTENCES)
    assert marker.exists()  # so the tests above would have seen the code run
    assert type(model._tokenizer).__name__ == "HostileTokenizer"
    assert embeddings.shape[0] == len(SENTENCES) and torch.isfinite(embeddings).all()


@every_family_and_declared_class
def test_a_tokenizer_given_to_encode_needs_no_trust(family, declared_class, tiny_tokenizer, tmp_path):
    marker = _hostile_checkpoint(family, tiny_tokenizer, tmp_path / "model", declared_class)
    embeddings = AutoModel.from_pretrained(tmp_path / "model").encode(SENTENCES, tiny_tokenizer)
    assert embeddings.shape[0] == len(SENTENCES) and not marker.exists()


@every_family_and_declared_class
def test_cli_and_load_encoder_refuse_the_tokenizer_code(family, declared_class, tiny_tokenizer, tmp_path, capsys):
    marker = _hostile_checkpoint(family, tiny_tokenizer, tmp_path / "model", declared_class)
    text = write_lines(tmp_path / "text.txt", SENTENCES)
    capsys.readouterr()  # the progress bars of saving the checkpoint
    code, out, err = run(capsys, "eval", "--src", text, "--tgt", text, "--model", str(tmp_path / "model"))
    assert code == EXIT_ENCODER and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "tokenizer_config.json" in err and "trust_remote_code=True" in err
    with pytest.raises(EncoderLoadError, match="auto_map"):
        load_encoder(str(tmp_path / "model"))
    assert not marker.exists()


_UNDER_TRANSFORMERS_4 = """
import json
import os
from transformers import AutoModel
results = {{}}
for name, (folder, marker) in {checkpoints!r}.items():
    refused = AutoModel.from_pretrained(folder, trust_remote_code=True)
    refused.trust_remote_code = False
    try:
        refused.encode(["a"])
        message = None
    except ValueError as error:
        message = str(error)
    ran_before = os.path.exists(marker)
    trusted = AutoModel.from_pretrained(folder, trust_remote_code=True)
    results[name] = [message, ran_before, trusted.trust_remote_code, len(trusted.encode(["a", "b"]))]
print(json.dumps(results))
"""


@pytest.mark.slow
def test_the_shipped_code_keeps_the_choice_under_transformers_4_57(tiny_tokenizer, tmp_path):
    # One interpreter for the whole table: starting one costs seconds.
    checkpoints = {}
    for family in FAMILIES:
        marker = _hostile_checkpoint(family, tiny_tokenizer, tmp_path / family.name, "PreTrainedTokenizerFast")
        checkpoints[family.name] = (str(tmp_path / family.name), str(marker))
    results = run_without_bitext_hf(
        _UNDER_TRANSFORMERS_4.format(checkpoints=checkpoints), cwd=tmp_path, transformers_4=True
    )
    assert set(results) == {family.name for family in FAMILIES}
    for name, (message, ran_before, trusted, rows) in results.items():
        assert "trust_remote_code of from_pretrained set to True" in message and not ran_before, name
        assert trusted is True and rows == 2 and Path(checkpoints[name][1]).exists(), name
