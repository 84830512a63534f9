"""`import bitext_hf` registers the model families with the Auto classes without importing torch or transformers
itself (so that the CLI starts fast): at once when transformers is already imported, else right after it is."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_bitext_hf_first_defers_registration_until_transformers_is_imported():
    output = _run(
        """
        import sys
        import bitext_hf
        print("torch" in sys.modules, "transformers" in sys.modules)
        from transformers import AutoConfig
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        from transformers.models.auto.modeling_auto import MODEL_MAPPING
        config = AutoConfig.for_model("onealigner", num_hidden_layers=2, layer=1)
        print(type(config).__name__, MODEL_MAPPING[type(config)].__name__, "laser3_student" in CONFIG_MAPPING)
        """
    )
    assert output.splitlines() == ["False False", "OneAlignerConfig OneAlignerModel True"]


def test_import_transformers_first_registers_at_once():
    output = _run(
        """
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        print("onealigner" in CONFIG_MAPPING)
        import bitext_hf
        print("onealigner" in CONFIG_MAPPING, "laser3_student" in CONFIG_MAPPING)
        """
    )
    assert output.splitlines() == ["False", "True True"]


def test_cli_help_does_not_import_torch():
    output = _run(
        """
        import sys
        from bitext_hf import cli
        try:
            cli.main(["--help"])
        except SystemExit:
            pass
        print("torch" in sys.modules)
        """
    )
    assert output.splitlines()[-1] == "False"


def test_a_probe_for_transformers_does_not_use_up_the_hook():
    # Libraries check whether transformers is installed with find_spec, without importing it.
    output = _run(
        """
        import importlib.util
        import sys
        import bitext_hf
        assert importlib.util.find_spec("transformers") is not None
        print("transformers" in sys.modules)
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        print("onealigner" in CONFIG_MAPPING)
        """
    )
    assert output.splitlines() == ["False", "True"]


def test_transformers_first_imported_from_inside_a_model_family():
    # The deferred registration then runs while that family's package is half-imported; the package completes it.
    output = _run(
        """
        import logging
        warnings = []
        handler = logging.Handler()
        handler.emit = lambda record: warnings.append(record.getMessage())
        logging.getLogger("bitext_hf").addHandler(handler)
        import bitext_hf
        from bitext_hf.modeling.laser3 import Laser3Student
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        print("laser3_student" in CONFIG_MAPPING, "onealigner" in CONFIG_MAPPING, warnings)
        """
    )
    assert output.splitlines() == ["True True []"]
