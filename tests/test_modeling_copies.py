"""The code the model families share is copied from one source and checked identical ("# Copied from", as
transformers' utils/check_copies.py; the checker is ``tests/modeling_copies.py``).

A family folder ships alone to the hub as remote code and cannot import another family, so what every family must
carry (encode's loop, loading, saving, the tokenizer guard, the error class) is one source and marked copies. These
tests hold the tree to it, prove that the checker sees drift, unknown sources and misplaced markers and that
``--fix`` repairs drift, and make a definition that two families share either a marked copy or a deliberate,
listed difference, so that a new hand copy cannot slip in.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from modeling_copies import ROOT, check, find_copies, fix, main, shared_definitions

ALL_FAMILIES = {"onealigner", "laser3", "musr", "contrastive_align"}  # the families that read text (a tokenizer)
# The light pair classifier reads features, not text: of what the others carry it shares only the input error.
EVERY_FAMILY = ALL_FAMILIES | {"pair_quality"}
WRAPPERS = {"onealigner", "contrastive_align"}  # the families that wrap a transformers encoder
FROM_SCRATCH = {"laser3", "musr"}  # the families whose Transformer is written here

# Definitions that two families or more hold under the same (family-neutral) name but that differ on purpose: what
# each does, in one line. Whatever else two families share must be a marked copy.
FAMILY_SPECIFIC = {
    "{Config}": "each configuration has its own fields; the members the families share are copied one by one",
    "{Config}.__init__": "each configuration's own fields and defaults",
    "{Config}._validate": "each configuration checks its own fields",
    "{Config}.embedding_dim": "laser3's embedding takes the teacher's width when it projects; the others' is d",
    "_build_encoder_config": "onealigner refuses encoders that are not XLM-R-like; contrastive_align takes any "
    "encoder (mBERT by default) and copies the config it is given",
    "{Family}Embeddings": "laser3 normalizes the embedding sum (BERT); musr scales the tokens by sqrt(d) (fairseq)",
    "{Family}Embeddings.__init__": "the same difference: LayerNorm (laser3) or a sqrt(d) scale (musr)",
    "{Family}Embeddings.forward": "the same difference: LayerNorm (laser3) or a sqrt(d) scale (musr)",
    "{Family}Layer": "laser3's feed-forward also drops out after the activation; musr's layer serves the encoder "
    "(width d) and the decoder (2d)",
    "{Family}Layer.__init__": "laser3 reads its sizes from the config; musr's come as arguments (encoder or decoder)",
    "{Family}Layer.forward": "laser3 drops out after the activation too; musr does not",
    "{Family}Output": "each model returns its own fields",
    "{Family}PreTrainedModel": "its class attributes name the family's config, prefix and layers",
    "{Family}PreTrainedModel._init_weights": "onealigner also resets its idf weights, contrastive_align its linear "
    "maps to identity (musr's is laser3's copy)",
    "{Model}": "each model's own architecture; what the families share is copied member by member",
    "{Model}.__init__": "each model builds its own modules",
    "{Model}.forward": "each model's own computation and outputs",
    "{Model}._embed_batch": "the family's own step from token ids to sentence vectors, the one thing the copied "
    "_encode_texts leaves to each",
    "{Model}.encode": "the public signature, defaults and docstring (musr also encodes token ids, contrastive_align "
    "takes a language); each calls the copied _encode_texts",
    "{Model}.from_encoder": "onealigner picks the layer and drops the layers above it; contrastive_align wraps the "
    "whole encoder (both read it with the copied _encoder_config)",
    "{Model}.get_input_embeddings": "laser3 and musr hold their token embeddings at their own paths",
    "{Model}.set_input_embeddings": "laser3 and musr hold their token embeddings at their own paths",
    "{Model}.get_output_embeddings": "laser3's MLM decoder, musr's translation head",
    "{Model}.set_output_embeddings": "laser3's MLM decoder, musr's translation head",
    "{Model}.pool": "laser3 pools as configured (max or BOS) and projects; musr max-pools",
    "{Model}.resize_token_embeddings": "onealigner also resizes its idf weights, musr its decoder's embeddings",
}

# What each family must carry, copied from one source (the guard the name-based test of test_untrusted_checkpoints
# held, and what encode, loading and saving need): key -> the families that hold it.
COPIED_EVERYWHERE = {
    "_tokenizer_code": ALL_FAMILIES,
    "_untrusted_tokenizer_message": ALL_FAMILIES,
    "_portable_tokenizer_class": ALL_FAMILIES,
    "{Model}.from_pretrained": ALL_FAMILIES,
    "{Model}._resolve_tokenizer": ALL_FAMILIES,
    "{Model}.save_pretrained": ALL_FAMILIES,
    "{Model}._encode_texts": ALL_FAMILIES,
    "{Family}InputError": EVERY_FAMILY,
    "_position_capacity": WRAPPERS,
    "_encoder_config": WRAPPERS,
    "{Model}._encode": WRAPPERS,
    "{Model}.token_states": WRAPPERS,
    "{Family}SelfAttention": FROM_SCRATCH,
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the repository's modeling/ folder to break."""
    shutil.copytree(ROOT / "modeling", tmp_path / "modeling", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _find_copy(root: Path, family: str, name: str):
    return next(copy for copy in find_copies(root)[0] if copy.path.parent.name == family and copy.name == name)


def _change_line(path: Path, line: int, old: str, new: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    assert old in lines[line - 1], lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new)
    path.write_text("\n".join(lines), encoding="utf-8")


def _line_of(path: Path, text: str, after: int = 0) -> int:
    lines = path.read_text(encoding="utf-8").split("\n")
    return next(number for number, line in enumerate(lines, 1) if number > after and text in line)


# -- the tree --------------------------------------------------------------------------------------------------


def test_every_copy_in_the_tree_is_its_source():
    problems = check()
    assert problems == [], "\n".join(map(str, problems)) + "\n(python tests/modeling_copies.py --fix rewrites them)"


def test_the_command_reports_a_clean_tree():
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "modeling_copies.py")], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize(("key", "families"), COPIED_EVERYWHERE.items(), ids=list(COPIED_EVERYWHERE))
def test_what_every_family_carries_is_one_source_and_its_copies(key, families):
    definitions = shared_definitions()[key]
    assert {definition.family for definition in definitions} == families
    sources = {definition.copied_from for definition in definitions if definition.copied_from is not None}
    originals = [definition for definition in definitions if definition.copied_from is None]
    assert len(sources) == 1 and len(originals) == 1, (sources, originals)
    assert originals[0].dotted == next(iter(sources))


def test_every_definition_two_families_share_is_copied_or_listed_as_family_specific():
    shared = shared_definitions()
    unmarked = {
        key: sorted(definition.family for definition in definitions)
        for key, definitions in shared.items()
        if any(definition.copied_from is None and not definition.is_source for definition in definitions)
    }
    unlisted = {key: families for key, families in unmarked.items() if key not in FAMILY_SPECIFIC}
    assert not unlisted, (
        f"defined in several families without '# Copied from' (mark the copies, or list the key in FAMILY_SPECIFIC "
        f"with the reason it differs): {unlisted}"
    )
    stale = sorted(set(FAMILY_SPECIFIC) - set(unmarked))
    assert not stale, f"FAMILY_SPECIFIC lists keys that are now copied or gone: {stale}"


def test_the_inventory_names_a_hand_copy(tree):
    """A definition a family gains by hand under a name another family holds is caught, marked copies are not."""
    path = tree / "modeling" / "musr" / "modeling_musr.py"
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "\n\ndef _position_capacity(encoder):\n    return None\n", encoding="utf-8")
    definitions = shared_definitions(tree)["_position_capacity"]
    hand_copies = [item for item in definitions if item.copied_from is None and not item.is_source]
    assert [(item.family, item.name) for item in hand_copies] == [("musr", "_position_capacity")]


# -- the checker -----------------------------------------------------------------------------------------------


def test_a_changed_line_in_a_copy_is_reported_at_its_line(tree, capsys):
    copy = _find_copy(tree, "laser3", "Laser3Student._resolve_tokenizer")
    line = _line_of(copy.path, '"the tokenizer saved beside its weights"', after=copy.start)
    _change_line(copy.path, line, "saved beside", "kept beside")
    problems = check(tree)
    assert len(problems) == 1
    problem = problems[0]
    assert (problem.path, problem.line, problem.name) == (copy.path, line, "Laser3Student._resolve_tokenizer")
    assert "kept beside" in problem.message and "saved beside" in problem.message
    assert "OneAlignerModel._resolve_tokenizer with OneAligner->Laser3" in problem.message

    assert main(["--root", str(tree)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [str(problem).replace(str(tree) + "/", "")]
    assert out.startswith(f"modeling/laser3/modeling_laser3.py:{line}: Laser3Student._resolve_tokenizer: differs")


@pytest.mark.parametrize(
    ("family", "name", "old", "new"),
    [
        # a decorator changed
        ("musr", "MuSREncoderDecoder._encode_texts", "@torch.no_grad()", "@torch.inference_mode()"),
        # a replacement not applied (the source's name left in)
        (
            "contrastive_align",
            "ContrastiveAlignedEncoder._resolve_tokenizer",
            "raise ContrastiveAlign",
            "raise OneAligner",
        ),
        # a line of a copied class
        ("musr", "MuSRSelfAttention", "self.dropout_prob = dropout", "self.dropout_prob = 0.0"),
    ],
)
def test_every_kind_of_drift_is_reported(tree, family, name, old, new):
    copy = _find_copy(tree, family, name)
    line = _line_of(copy.path, old, after=copy.start - 1)
    _change_line(copy.path, line, old, new)
    assert [(problem.name, problem.line) for problem in check(tree)] == [(name, line)]


def test_trailing_whitespace_is_not_drift(tree):
    copy = _find_copy(tree, "laser3", "Laser3Student.save_pretrained")
    lines = copy.path.read_text(encoding="utf-8").split("\n")
    lines[copy.start - 1] += "   "
    copy.path.write_text("\n".join(lines), encoding="utf-8")
    assert check(tree) == []


def test_fix_rewrites_the_drifted_copies_from_their_sources(tree, capsys):
    laser3 = _find_copy(tree, "laser3", "Laser3Student._resolve_tokenizer")
    _change_line(laser3.path, _line_of(laser3.path, "saved beside", after=laser3.start), "saved", "kept")
    musr = _find_copy(tree, "musr", "_portable_tokenizer_class")
    lines = musr.path.read_text(encoding="utf-8").split("\n")
    del lines[musr.end - 1]  # the copy loses its last line
    musr.path.write_text("\n".join(lines), encoding="utf-8")
    assert len(check(tree)) == 2

    assert main(["--fix", "--root", str(tree)]) == 0
    assert capsys.readouterr().out.count("fixed modeling/") == 2
    assert check(tree) == []
    for path in (laser3.path, musr.path):  # back to the repository's files, byte for byte
        assert path.read_bytes() == (ROOT / path.relative_to(tree)).read_bytes()


@pytest.mark.parametrize(
    "source",
    [
        "modeling.onealigner.modeling_onealigner.OneAlignerModel.no_such_method",
        "modeling.nowhere.modeling_nowhere.Model.save_pretrained",
        "transformers.PreTrainedModel.save_pretrained",  # sources live under modeling/
    ],
)
def test_an_unknown_source_is_reported_and_left_alone_by_fix(tree, source):
    copy = _find_copy(tree, "laser3", "Laser3Student.save_pretrained")
    _change_line(copy.path, copy.line, copy.source, source)
    problems = check(tree)
    assert [(problem.line, problem.name) for problem in problems] == [(copy.line, "Laser3Student.save_pretrained")]
    assert problems[0].message == f"unknown source {source!r}"
    before = copy.path.read_bytes()
    rewritten, left = fix(tree)
    assert rewritten == [] and left == problems and copy.path.read_bytes() == before


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda line: line + "\n", "not right above a definition"),  # a blank line between marker and definition
        (lambda line: "    " + line, "not right above a definition"),  # at another indentation
        (lambda line: line.replace("OneAligner->Laser3", "OneAligner=>Laser3"), "cannot read the marker"),
        (lambda line: line.replace(" with OneAligner->Laser3", " width OneAligner->Laser3"), "cannot read the marker"),
    ],
    ids=["blank-line", "indentation", "bad-replacement", "bad-with"],
)
def test_a_misplaced_or_unreadable_marker_is_reported(tree, edit, message):
    copy = _find_copy(tree, "laser3", "Laser3InputError")
    lines = copy.path.read_text(encoding="utf-8").split("\n")
    lines[copy.line - 1] = edit(lines[copy.line - 1])
    copy.path.write_text("\n".join(lines), encoding="utf-8")
    problems = check(tree)
    assert [problem.line for problem in problems] == [copy.line] and message in problems[0].message


def _tiny_tree(root: Path, copy_code: str) -> Path:
    """modeling/a/source_a.py (the sources) and modeling/b/copy_b.py holding `copy_code`."""
    (root / "modeling" / "a").mkdir(parents=True)
    (root / "modeling" / "b").mkdir()
    (root / "modeling" / "a" / "source_a.py").write_text(
        "def helper(x):\n"
        '    """Alpha helper; alpha stays lowercase."""\n'
        "    return Alpha(x)\n"
        "\n\n"
        "class Outer:\n"
        "    class Inner:\n"
        "        @staticmethod\n"
        "        def method(x):\n"
        "            return Alpha(x) + Beta(x)\n",
        encoding="utf-8",
    )
    path = root / "modeling" / "b" / "copy_b.py"
    path.write_text(copy_code, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "copy_code",
    [
        # replacements in order, case-sensitive (the lowercase "alpha" stays)
        "# Copied from modeling.a.source_a.helper with Alpha->Gamma\n"
        "def helper(x):\n"
        '    """Gamma helper; alpha stays lowercase."""\n'
        "    return Gamma(x)\n",
        # a nested method, its decorator included, several replacements applied one after the other
        "class Mine:\n"
        "    # Copied from modeling.a.source_a.Outer.Inner.method with Alpha->Beta, Beta->Delta\n"
        "    @staticmethod\n"
        "    def method(x):\n"
        "        return Delta(x) + Delta(x)\n",
        # a top-level function copied as a method: re-indented
        "class Mine:\n"
        "    # Copied from modeling.a.source_a.helper\n"
        "    def helper(x):\n"
        '        """Alpha helper; alpha stays lowercase."""\n'
        "        return Alpha(x)\n",
    ],
    ids=["function", "nested-method", "reindented"],
)
def test_sources_resolve_through_classes_and_replacements_apply_in_order(tmp_path, copy_code):
    _tiny_tree(tmp_path, copy_code)
    assert check(tmp_path) == []


def test_a_replacement_applies_to_the_source_only_as_written(tmp_path):
    path = _tiny_tree(
        tmp_path,
        "# Copied from modeling.a.source_a.helper with Alpha->Gamma\n"
        "def helper(x):\n"
        '    """Gamma helper; gamma stays lowercase."""\n'  # a replacement is case-sensitive
        "    return Gamma(x)\n",
    )
    problems = check(tmp_path)
    assert [(problem.path, problem.line) for problem in problems] == [(path, 3)]
    assert '\'"""Gamma helper; alpha stays lowercase."""\'' in problems[0].message
