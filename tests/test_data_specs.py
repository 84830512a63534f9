"""The data specs every recipe understands: ``load_pairs`` / ``load_monolingual`` / ``parse_spec``.

gettext specs read this machine's real catalogs (Wolof and Fula are small, so these stay fast); files are tiny tmp
files; hub specs use a ``save_to_disk`` folder, and an uncached hub id must fail at once offline.
"""

from __future__ import annotations

import os
import time

import pytest

from bitext_hf.data import gettext_pairs
from bitext_hf.data.specs import PairSet, is_english, load_monolingual, load_pairs, parse_spec
from bitext_hf.errors import DataValidationError, UsageError


def _write(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- parsing ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("fr=gettext", ("fr", "en", "gettext", None, None, None)),
        ("en-fr=gettext", ("en", "fr", "gettext", None, None, None)),
        ("wol=hub:allenai/nllb:eng_Latn-wol_Latn", ("wol", "en", "hub", "allenai/nllb", "eng_Latn-wol_Latn", "train")),
        ("de-en=hub:mteb/tatoeba:deu-eng@test", ("de", "en", "hub", "mteb/tatoeba", "deu-eng", "test")),
        ("de-en=hub:mteb/tatoeba:deu-eng:test", ("de", "en", "hub", "mteb/tatoeba", "deu-eng", "test")),
        ("fr=hub:org/name", ("fr", "en", "hub", "org/name", None, "train")),
        ("fr=hub:org/name::validation", ("fr", "en", "hub", "org/name", None, "validation")),
        ("fr=hub:org/name:cfg:train[:100]", ("fr", "en", "hub", "org/name", "cfg", "train[:100]")),
        ("fr=a.fr,a.en", ("fr", "en", "moses", None, None, None)),
        ("fr-de=pairs.tsv", ("fr", "de", "tsv", None, None, None)),
    ],
)
def test_parse_spec(spec, expected):
    parsed = parse_spec(spec)
    assert (parsed.src_lang, parsed.tgt_lang, parsed.kind, parsed.dataset, parsed.config, parsed.split) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "gettext",
        "fr=",
        "=gettext",
        "fr-=gettext",
        "fr-fr=gettext",
        "en=gettext",
        "fr=hub:",
        "fr=a,b,c",
        "f r=x.tsv",
        "fr=hub:org/name:cfg:test@train",
    ],
)
def test_parse_spec_refuses_bad_specs_naming_them(spec):
    with pytest.raises(DataValidationError) as caught:
        parse_spec(spec)
    assert repr(spec) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_parse_spec_monolingual():
    assert parse_spec("wo=corpus.txt", monolingual=True).kind == "text"
    assert parse_spec("wo=corpus.txt", monolingual=True).tgt_lang is None
    for spec in ("wo-en=corpus.txt", "wo=a.txt,b.txt"):
        with pytest.raises(DataValidationError, match="monolingual"):
            parse_spec(spec, monolingual=True)


def test_is_english():
    assert all(map(is_english, ["en", "eng", "English", "en_US", "eng_Latn", "sentence_eng_Latn", "text-en"]))
    assert not any(map(is_english, ["fr", "ben", "sentence1", "wol_Latn", "deu"]))


# -- gettext ----------------------------------------------------------------------------------------------------------


def test_gettext_xx_spec_pairs_xx_with_english():
    pairs = load_pairs("wo=gettext")
    catalog = gettext_pairs("wo")
    assert (pairs.src_lang, pairs.tgt_lang, pairs.name) == ("wo", "en", "wo-en:gettext")
    assert list(pairs) == [(translation, english) for english, translation in catalog]


def test_gettext_english_first_and_pivot():
    assert list(load_pairs("en-wo=gettext")) == gettext_pairs("wo")
    pivot = load_pairs("wo-ff=gettext")
    wolof_by_english = dict(gettext_pairs("wo"))
    fula_by_english = dict(gettext_pairs("ff"))
    shared = {english for english in wolof_by_english if english in fula_by_english}
    assert 0 < len(pivot) <= len(shared)
    expected = {(wolof_by_english[english], fula_by_english[english]) for english in shared}
    assert set(pivot) <= expected
    assert len(set(pivot.tgt)) == len(pivot)  # a 1:1 gold alignment


def test_gettext_unknown_language_names_the_spec():
    with pytest.raises(DataValidationError, match=r"^zz_nothing=gettext: .*no gettext catalogs"):
        load_pairs("zz_nothing=gettext")


def test_monolingual_gettext_is_the_translated_side():
    language, texts = load_monolingual("wo=gettext", max_sentences=5)
    assert language == "wo"
    assert texts == [translation for _, translation in gettext_pairs("wo")][:5]


# -- files ------------------------------------------------------------------------------------------------------------


def test_tsv_xx_spec_is_english_then_xx(tmp_path):
    path = _write(tmp_path / "p.tsv", "Hello\t Bonjour \nThank you\tMerci\n")
    pairs = load_pairs(f"fr={path}")
    assert (pairs.src, pairs.tgt) == (["Bonjour", "Merci"], ["Hello", "Thank you"])
    assert pairs.name == "fr-en:p.tsv"


def test_tsv_two_language_spec_is_xx_then_yy(tmp_path):
    path = _write(tmp_path / "p.tsv", "Bonjour\tHallo\nMerci\tDanke\n")
    pairs = load_pairs(f"fr-de={path}")
    assert (pairs.src_lang, pairs.tgt_lang, pairs.src, pairs.tgt) == (
        "fr",
        "de",
        ["Bonjour", "Merci"],
        ["Hallo", "Danke"],
    )


def test_moses_files_src_first_and_stripped(tmp_path):
    french = _write(tmp_path / "a.fr", " Bonjour\nMerci \n")
    english = _write(tmp_path / "a.en", "Hello\nThank you\n")
    pairs = load_pairs(f"fr={french},{english}", max_pairs=1)
    assert (pairs.src, pairs.tgt, pairs.name) == (["Bonjour"], ["Hello"], "fr-en:a.fr,a.en")


def test_file_errors_name_spec_file_and_line(tmp_path):
    bad = _write(tmp_path / "bad.tsv", "Hello\tBonjour\nno tab here\n")
    with pytest.raises(DataValidationError, match=r"^fr=.*bad\.tsv: .*bad\.tsv:2: "):
        load_pairs(f"fr={bad}")
    english = _write(tmp_path / "a.en", "Hello\n\nBye\n")
    french = _write(tmp_path / "a.fr", "Bonjour\nSalut\nAu revoir\n")
    with pytest.raises(DataValidationError, match=r"a\.en:2: empty line"):
        load_pairs(f"fr={french},{english}")
    with pytest.raises(DataValidationError, match=r"missing\.tsv"):
        load_pairs(f"fr={tmp_path / 'missing.tsv'}")


def test_monolingual_text_file(tmp_path):
    path = _write(tmp_path / "wo.txt", " Jërëjëf \nNanga def\n")
    assert load_monolingual(f"wo={path}") == ("wo", ["Jërëjëf", "Nanga def"])


def test_limits_are_validated():
    with pytest.raises(UsageError, match="max_pairs"):
        load_pairs("wo=gettext", max_pairs=0)
    with pytest.raises(UsageError, match="max_sentences"):
        load_monolingual("wo=gettext", max_sentences=-1)


# -- hub --------------------------------------------------------------------------------------------------------------


def _save(tmp_path, name: str, columns: dict, split: str | None = None, features=None) -> str:
    import datasets

    dataset = datasets.Dataset.from_dict(columns, features=features)
    folder = tmp_path / name
    (datasets.DatasetDict({split: dataset}) if split else dataset).save_to_disk(str(folder))
    return str(folder)


def test_hub_translation_column_by_language(tmp_path):
    folder = _save(
        tmp_path, "opus", {"translation": [{"en": "Hello", "fr": "Bonjour"}, {"en": " ", "fr": "Vide"}]}, "train"
    )
    pairs = load_pairs(f"fr=hub:{folder}")
    assert (pairs.src, pairs.tgt) == (["Bonjour"], ["Hello"])  # the row with an empty side is dropped
    missing_first = _save(
        tmp_path, "missing", {"translation": [{"en": None, "fr": "Vide"}, {"en": "Yes", "fr": "Oui"}]}
    )
    assert list(load_pairs(f"fr=hub:{missing_first}")) == [("Oui", "Yes")]  # sides come from the features
    import datasets

    opus = _save(
        tmp_path,
        "opus_typed",  # OPUS-100's feature type
        {"translation": [{"en": "Hi", "es": "Hola"}]},
        "train",
        features=datasets.Features({"translation": datasets.Translation(languages=["en", "es"])}),
    )
    assert list(load_pairs(f"es=hub:{opus}:en-es:train")) == [("Hola", "Hi")]
    assert list(load_pairs(f"en-fr=hub:{folder}:train")) == [("Hello", "Bonjour")]


def test_hub_english_column_heuristic_and_sentence_columns(tmp_path):
    flores = _save(
        tmp_path, "flores", {"id": ["1"], "sentence_eng_Latn": ["Hello"], "sentence_wol_Latn": ["Salaam"]}, "dev"
    )
    pairs = load_pairs(f"wol=hub:{flores}@dev")
    assert (pairs.src, pairs.tgt) == (["Salaam"], ["Hello"])
    tatoeba = _save(tmp_path, "tatoeba", {"sentence1": ["Hallo", "Danke"], "sentence2": ["Hello", "Thanks"]})
    assert list(load_pairs(f"de-en=hub:{tatoeba}")) == [("Hallo", "Hello"), ("Danke", "Thanks")]
    named = _save(tmp_path, "named", {"fr": ["Bonjour"], "de": ["Hallo"]})
    assert list(load_pairs(f"de-fr=hub:{named}")) == [("Hallo", "Bonjour")]


def test_hub_unknown_columns_and_split_name_the_spec(tmp_path):
    folder = _save(tmp_path, "odd", {"a": ["x"], "b": ["y"]}, "train")
    with pytest.raises(DataValidationError, match=r"cannot tell the 'fr' and 'en' sides .*\['a', 'b'\]"):
        load_pairs(f"fr=hub:{folder}")
    with pytest.raises(DataValidationError, match=r"no split 'test'; available: train"):
        load_pairs(f"fr=hub:{folder}::test")
    text = _save(tmp_path, "text", {"text": ["Salaam", ""]})
    assert load_monolingual(f"wo=hub:{text}") == ("wo", ["Salaam"])
    with pytest.raises(DataValidationError, match="needs a 'text' column"):
        load_monolingual(f"wo=hub:{folder}")


def test_hub_uncached_dataset_fails_at_once_offline(monkeypatch):
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    started = time.perf_counter()
    with pytest.raises(DataValidationError) as caught:
        load_pairs("fr=hub:nobody-here/no-such-dataset-xyz:fr-en")
    assert time.perf_counter() - started < 10
    message = str(caught.value)
    assert message.startswith("fr=hub:nobody-here/no-such-dataset-xyz:fr-en: cannot load hub dataset")
    assert "offline" in message.lower() and "\n" not in message
    assert os.environ["HF_DATASETS_OFFLINE"] == "1"


def test_pairset_select_and_length_check():
    pairs = PairSet("fr", "en", "x", ["a", "b", "c"], ["A", "B", "C"], name="fr-en:x")
    chosen = pairs.select([2, 0, 2])
    assert (chosen.src, chosen.tgt, chosen.name, len(chosen)) == (["c", "a", "c"], ["C", "A", "C"], "fr-en:x", 3)
    with pytest.raises(DataValidationError, match="2 source but 1 target"):
        PairSet("fr", "en", "x", ["a", "b"], ["A"])


# -- datasets interop -------------------------------------------------------------------------------------------------


def test_pairset_round_trips_through_a_datasets_translation_column():
    import datasets

    pairs = PairSet("fr", "en", "files", ["Bonjour", "Merci", "Bonjour"], ["Hello", "Thanks", "Hi"], name="fr-en:x")
    dataset = pairs.to_dataset()
    assert isinstance(dataset.features["translation"], datasets.Translation)
    assert dataset[1] == {"translation": {"fr": "Merci", "en": "Thanks"}}
    assert "fr-en:x" in dataset.info.description
    # The datasets operations apply, and the result reads back in order, duplicates kept.
    kept = dataset.filter(lambda row: row["translation"]["fr"] == "Bonjour")
    back = PairSet.from_dataset(kept, "fr", "en")
    assert (back.src, back.tgt, back.src_lang, back.tgt_lang) == (["Bonjour", "Bonjour"], ["Hello", "Hi"], "fr", "en")
    assert PairSet.from_dataset(dataset, "fr").src == pairs.src


def test_pairset_from_dataset_finds_the_sides_as_a_hub_spec_does():
    import datasets

    columns = datasets.Dataset.from_dict({"sentence1": [" Hallo ", "", "Danke"], "sentence2": ["Hello", "x", None]})
    pairs = PairSet.from_dataset(columns, "de", "en", source="mine")
    assert (pairs.src, pairs.tgt, pairs.name) == (["Hallo"], ["Hello"], "de-en:mine")  # stripped, empties dropped
    unnamed = datasets.Dataset.from_dict({"a": ["x"], "b": ["y"], "c": ["z"]})
    with pytest.raises(DataValidationError, match="cannot tell the 'de' and 'fr' sides"):
        PairSet.from_dataset(unnamed, "de", "fr")
    empty = datasets.Dataset.from_dict({"de": [""], "en": ["Hello"]})
    with pytest.raises(DataValidationError, match="no sentence pairs"):
        PairSet.from_dataset(empty, "de")
