"""Registration with the Auto classes is explicit: importing `bitext_hf.modeling` registers the model families, and
`import bitext_hf` stays fast (no torch, no transformers, no import hook). The package's own loaders import
`bitext_hf.modeling` themselves, so `load_encoder(<a bitext-hf checkpoint>)` works after importing only its module.

Each check runs in a fresh interpreter: the pytest process has long imported everything.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_model_contract import LASER3

# The slow set (`python -m pytest -m slow`, which CI also runs): fresh interpreters that import the package.
pytestmark = pytest.mark.slow


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        stdin=subprocess.DEVNULL,  # transformers asks on the terminal before running unregistered remote code
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.fixture(scope="module")
def laser3_checkpoint(tiny_tokenizer, tmp_path_factory) -> Path:
    """A tiny Laser3 checkpoint as `save_pretrained` writes it: weights, config with `auto_map`, tokenizer."""
    folder = tmp_path_factory.mktemp("laser3-checkpoint")
    LASER3.build(tiny_tokenizer).save_pretrained(folder, tokenizer=tiny_tokenizer)
    return folder


def test_import_bitext_hf_imports_neither_torch_nor_transformers_and_installs_no_hook():
    output = _run(
        """
        import sys
        finders = list(sys.meta_path)
        import bitext_hf
        print("torch" in sys.modules, "transformers" in sys.modules, sys.meta_path == finders)
        """
    )
    assert output.splitlines() == ["False False True"]


def test_import_bitext_hf_modeling_registers_the_families(laser3_checkpoint):
    # Without registration transformers refuses the checkpoint (its auto_map needs trust_remote_code); registered,
    # it builds bitext_hf's own classes, not the copies shipped in the folder.
    output = _run(
        f"""
        import sys
        import bitext_hf.modeling
        from transformers import AutoConfig, AutoModel
        config = AutoConfig.from_pretrained({str(laser3_checkpoint)!r})
        model = AutoModel.from_pretrained({str(laser3_checkpoint)!r})
        # transformers installs a finder of its own; none may be ours
        ours = [finder for finder in sys.meta_path if type(finder).__module__.startswith("bitext_hf")]
        print(type(config).__module__, type(model).__module__, ours)
        """
    )
    assert output.splitlines() == [
        "bitext_hf.modeling.laser3.configuration_laser3 bitext_hf.modeling.laser3.modeling_laser3 []"
    ]


def test_import_bitext_hf_alone_does_not_register(laser3_checkpoint):
    output = _run(
        f"""
        import bitext_hf
        from transformers import AutoModel
        try:
            AutoModel.from_pretrained({str(laser3_checkpoint)!r})
        except ValueError as error:
            print("refused:", "trust_remote_code" in str(error))
        """
    )
    assert output.endswith("refused: True")  # after transformers' own notice and prompt


def test_cli_help_does_not_import_torch():
    output = _run(
        """
        import sys
        from bitext_hf import cli
        try:
            cli.main(["--help"])
        except SystemExit:
            pass
        print("torch" in sys.modules, "transformers" in sys.modules)
        """
    )
    assert output.splitlines()[-1] == "False False"


def test_load_encoder_of_a_bitext_hf_checkpoint_after_importing_only_the_encoders(laser3_checkpoint):
    output = _run(
        f"""
        import sys
        from bitext_hf.encoders import load_encoder
        assert "bitext_hf.modeling" not in sys.modules
        encoder = load_encoder({str(laser3_checkpoint)!r}, pooling="model")
        vectors = encoder.encode(["The cat sleeps.", "Le chat dort."])
        print(type(encoder.model).__module__, vectors.shape)
        """
    )
    assert output.splitlines() == ["bitext_hf.modeling.laser3.modeling_laser3 (2, 16)"]
