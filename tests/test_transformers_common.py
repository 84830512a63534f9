"""transformers' own common model tests, run against the four families as transformers' model folders run them.

``ModelTesterMixin`` (tests/test_modeling_common.py) and ``ConfigTester`` (tests/test_configuration_common.py) come
from the sdist of the installed transformers release, extracted by ``python tests/install_test_environments.py``
(the README's test command and ``.ci/run`` run it first); this module never touches the network. Without that folder the module is skipped,
naming the command, except under ``CI=true`` where it fails.

Each family has a ModelTester (a tiny config and its inputs) and a ``unittest.TestCase`` with the mixin, as in
transformers' ``tests/models/<model>/test_modeling_<model>.py``. ``_prepare_for_class(..., return_labels=True)`` adds
what each family's loss needs (the mixin's hook for labels). The one skip asked for here is ``has_attentions =
False`` for Laser3 and MuSR, its reason beside it; the other skips are transformers' own, each with its reason (an
accelerator, DeepSpeed, flash attention, or a feature these models do not have: a cache, sliding windows, experts).
"""

from __future__ import annotations

import os
import sys
import unittest
import warnings
from typing import ClassVar

import pytest
import torch
import transformers
from install_test_environments import COMMAND as INSTALL_COMMAND
from transformers_common_tests import installed_folder

import bitext_hf.modeling  # noqa: F401  (registers the Auto classes)
from bitext_hf.modeling.contrastive_align import ContrastiveAlignConfig, ContrastiveAlignedEncoder
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig
from bitext_hf.modeling.musr import MuSRConfig, MuSREncoderDecoder
from bitext_hf.modeling.onealigner import OneAlignerConfig, OneAlignerModel
from bitext_hf.modeling.pair_quality import FEATURE_NAMES, PairQualityClassifier, PairQualityConfig

_FOLDER = installed_folder(transformers.__version__)
if _FOLDER is None:
    _MISSING = f"transformers {transformers.__version__}'s common tests are not installed: run `{INSTALL_COMMAND}`"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{_MISSING} (CI=true: .ci/run must run it before the tests)", pytrace=False)
    pytest.skip(_MISSING, allow_module_level=True)
sys.path.append(str(_FOLDER))

with warnings.catch_warnings():  # transformers registers its own marks (flash_attn_test, ...) in its conftest only
    warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
    from transformers_tests.test_configuration_common import ConfigTester
    from transformers_tests.test_modeling_common import ModelTesterMixin, ids_tensor, random_attention_mask

BATCH_SIZE = 3
SEQ_LENGTH = 7
VOCAB_SIZE = 99
HIDDEN_SIZE = 32
NUM_LAYERS = 2
NUM_HEADS = 4


class _Tester:
    """What ModelTesterMixin reads from a model tester: sizes, and a config with its inputs."""

    batch_size = BATCH_SIZE
    seq_length = SEQ_LENGTH
    vocab_size = VOCAB_SIZE
    hidden_size = HIDDEN_SIZE
    num_hidden_layers = NUM_LAYERS
    num_attention_heads = NUM_HEADS
    is_training = True

    def __init__(self, parent: unittest.TestCase) -> None:
        self.parent = parent

    def get_config(self) -> transformers.PretrainedConfig:
        raise NotImplementedError

    def prepare_config_and_inputs_for_common(self) -> tuple[object, dict[str, torch.Tensor]]:
        input_ids = ids_tensor([BATCH_SIZE, SEQ_LENGTH], VOCAB_SIZE)
        attention_mask = random_attention_mask([BATCH_SIZE, SEQ_LENGTH])
        return self.get_config(), {"input_ids": input_ids, "attention_mask": attention_mask}


def _encoder_config(model_type: str) -> dict[str, object]:
    return {
        "model_type": model_type,
        "vocab_size": VOCAB_SIZE,
        "hidden_size": HIDDEN_SIZE,
        "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": NUM_HEADS,
        "intermediate_size": 37,
        "max_position_embeddings": 64,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }


class OneAlignerModelTester(_Tester):
    def get_config(self) -> OneAlignerConfig:
        # The last layer, as `from_encoder` leaves it (it drops the layers above `layer`, which get no gradient).
        return OneAlignerConfig(encoder_config=_encoder_config("xlm-roberta"), layer=NUM_LAYERS, max_seq_length=32)


class ContrastiveAlignedModelTester(_Tester):
    def get_config(self) -> ContrastiveAlignConfig:
        return ContrastiveAlignConfig(encoder_config=_encoder_config("bert"), objective="strong", projection_dim=16)


class Laser3ModelTester(_Tester):
    def get_config(self) -> Laser3StudentConfig:
        return Laser3StudentConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=HIDDEN_SIZE,
            num_hidden_layers=NUM_LAYERS,
            num_attention_heads=NUM_HEADS,
            intermediate_size=37,
            max_position_embeddings=64,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )


class MuSRModelTester(_Tester):
    def get_config(self) -> MuSRConfig:
        return MuSRConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=HIDDEN_SIZE,
            num_encoder_layers=NUM_LAYERS,
            num_decoder_layers=1,
            num_attention_heads=NUM_HEADS,
            encoder_ffn_dim=37,
            decoder_ffn_dim=37,
            max_position_embeddings=64,
            dropout=0.0,
            attention_dropout=0.0,
        )


class PairQualityModelTester(_Tester):
    """The light classifier reads a pair's features (the encoder's cosine and margin, text checks), not tokens."""

    def get_config(self) -> PairQualityConfig:
        return PairQualityConfig(hidden_size=HIDDEN_SIZE)

    def prepare_config_and_inputs_for_common(self) -> tuple[object, dict[str, torch.Tensor]]:
        return self.get_config(), {"features": torch.randn(BATCH_SIZE, len(FEATURE_NAMES))}


class _FamilyTests(ModelTesterMixin):
    """The mixin's setUp, label hook and config test, shared by the four TestCases below (not collected itself)."""

    model_tester_class: type[_Tester]
    config_tester_kwargs: dict[str, object]

    def setUp(self) -> None:
        self.model_tester = self.model_tester_class(self)
        self.config_tester = ConfigTester(self, **self.config_tester_kwargs)

    def loss_inputs(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What the family's loss needs besides `inputs` (the mixin asks with `return_labels=True`)."""
        raise NotImplementedError

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        inputs = super()._prepare_for_class(inputs_dict, model_class, return_labels)
        if return_labels:
            inputs.update(self.loss_inputs(inputs))
        return inputs

    def test_config(self) -> None:
        self.config_tester.run_common_tests()


# has_attentions = False skips the attention tests for Laser3 and MuSR, where they do not apply: their attention is
# torch's fused scaled_dot_product_attention, written in the model, which computes no attention probabilities (forward
# refuses output_attentions=True) and has no eager / flash / flex variants to switch between.


class OneAlignerModelTest(_FamilyTests, unittest.TestCase):
    all_model_classes = (OneAlignerModel,)
    _is_composite = True  # the encoder's config is a sub-config (`encoder_config`)
    model_tester_class = OneAlignerModelTester
    config_tester_kwargs = {"config_class": OneAlignerConfig, "has_text_modality": False}  # noqa: RUF012

    def loss_inputs(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # An aligned target batch (row i translates row i) and the contrastive loss.
        return {"target_input_ids": inputs["input_ids"].flip(0), "return_loss": True}


class ContrastiveAlignedModelTest(_FamilyTests, unittest.TestCase):
    all_model_classes = (ContrastiveAlignedEncoder,)
    _is_composite = True  # the encoder's config is a sub-config (`encoder_config`)
    model_tester_class = ContrastiveAlignedModelTester
    config_tester_kwargs = {"config_class": ContrastiveAlignConfig, "has_text_modality": False}  # noqa: RUF012

    def loss_inputs(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # Unpadded translations, every first token aligned with the first token of its translation.
        ones = torch.ones_like(inputs["input_ids"])
        rows = torch.arange(BATCH_SIZE, device=ones.device)
        links = torch.stack([rows, torch.zeros_like(rows), torch.zeros_like(rows)], dim=1)
        target = inputs["input_ids"].flip(0)
        return {"attention_mask": ones, "target_input_ids": target, "target_attention_mask": ones, "alignments": links}


class Laser3ModelTest(_FamilyTests, unittest.TestCase):
    all_model_classes = (Laser3Student,)
    has_attentions = False  # see above
    model_tester_class = Laser3ModelTester
    config_tester_kwargs = {"config_class": Laser3StudentConfig, "hidden_size": 37, "num_attention_heads": 1}  # noqa: RUF012

    def loss_inputs(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"labels": inputs["input_ids"].clone()}  # the MLM task


class MuSRModelTest(_FamilyTests, unittest.TestCase):
    all_model_classes = (MuSREncoderDecoder,)
    has_attentions = False  # see above
    model_tester_class = MuSRModelTester
    config_tester_kwargs = {"config_class": MuSRConfig, "hidden_size": 37, "num_attention_heads": 1}  # noqa: RUF012

    def loss_inputs(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"labels": inputs["input_ids"].flip(0)}  # the English translation the decoder learns to produce


# The light pair classifier is an MLP over 13 numbers per pair: no tokens, so no embeddings to get, set or resize, no
# attention, and no per-token hidden states of shape (seq_length, hidden_size) for the hidden-state tests to read.
_NO_TOKENS = "an MLP over a pair's features: no token embeddings, attentions or per-token hidden states"


class PairQualityModelTest(_FamilyTests, unittest.TestCase):
    all_model_classes = (PairQualityClassifier,)
    has_attentions = False  # see above
    test_resize_embeddings = False  # see above
    model_tester_class = PairQualityModelTester
    # The config's common properties: the width only (no attention heads, no layers to count).
    config_tester_kwargs: ClassVar[dict[str, object]] = {
        "config_class": PairQualityConfig,
        "has_text_modality": False,
        "common_properties": ["hidden_size"],
    }

    def test_model_get_set_embeddings(self) -> None:
        self.skipTest(_NO_TOKENS)

    def test_hidden_states_output(self) -> None:
        self.skipTest(_NO_TOKENS)

    def test_retain_grad_hidden_states_attentions(self) -> None:
        self.skipTest(_NO_TOKENS)

    def loss_inputs(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"labels": torch.tensor([1.0, 0.0, 1.0])}  # translation or not
