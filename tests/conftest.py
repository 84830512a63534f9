"""Shared pytest fixtures: a tiny multilingual parallel corpus and a tokenizer trained on it, both offline.

``tiny_parallel_corpus``: 60 (English, translation) pairs, 20 English sentences each translated into French,
German and Spanish, in that order (rows 0-19 French, 20-39 German, 40-59 Spanish).
``tiny_parallel_corpus_by_language``: the same pairs as ``{"fr": [...], "de": [...], "es": [...]}``.
``tiny_tokenizer``: a Unigram tokenizer (``bitext_hf.training.train_tokenizer``, ~300 pieces, XLM-R specials
``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<mask>`` 4) trained on all sides of that corpus.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

# Tests never touch the network: make every Hugging Face library fail fast instead of trying to download.
for _variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_variable, "1")
# Remote code loaded by tests (trust_remote_code) is cached here, not in the user's ~/.cache/huggingface/modules;
# the folder goes when the session ends (one was left behind per run before).
if "HF_MODULES_CACHE" not in os.environ:
    os.environ["HF_MODULES_CACHE"] = tempfile.mkdtemp(prefix="bitext-hf-test-modules-")
    atexit.register(shutil.rmtree, os.environ["HF_MODULES_CACHE"], ignore_errors=True)

# What a run of each set took, from start to summary, on two quiet cores (benchmarks/README.md, "The test suite", has
# the runs and their machines): printed in the header, so that a run that takes far longer says so before it starts.
_STARTED = pytest.StashKey[float]()
EXPECTED_DURATIONS = {
    "default": "5-9 minutes on two quiet cores (by CPU), longer on a busy machine",
    "slow": "18-39 minutes on two quiet cores (by CPU)",
}


def pytest_report_header(config) -> list[str]:
    """The set this run selects and how long it is expected to take, and the arithmetic this CPU gives the
    encoders: the tests hold on CPUs with and without AVX-512, AMX or native bfloat16, and say which ran."""
    selection = config.getoption("markexpr") or ""
    if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        lines = []
    elif selection == "not slow":
        lines = [
            f"bitext-hf: the default tests (not slow): {EXPECTED_DURATIONS['default']}; `python -m pytest -m slow` "
            f"runs the slow set (launches, experiments, other environments, real data; {EXPECTED_DURATIONS['slow']})"
        ]
    elif selection == "slow":
        lines = [f"bitext-hf: the slow set: {EXPECTED_DURATIONS['slow']}"]
    else:
        lines = [f"bitext-hf: tests selected by -m {selection!r}" if selection else "bitext-hf: every test"]
    import torch

    from bitext_hf.encoders.precision import native_bf16

    bf16 = "native bfloat16" if native_bf16() else "no native bfloat16 (bf16 refused on the CPU; its tests pretend)"
    lines.append(f"bitext-hf: this CPU: torch kernels {torch.backends.cpu.get_cpu_capability()}, {bf16}")
    return lines


def pytest_sessionstart(session) -> None:
    session.config.stash[_STARTED] = time.monotonic()


def pytest_terminal_summary(terminalreporter, config) -> None:
    started = config.stash.get(_STARTED, None)
    selection = config.getoption("markexpr") or ""
    expected = {"not slow": EXPECTED_DURATIONS["default"], "slow": EXPECTED_DURATIONS["slow"]}.get(selection)
    whole_suite = config.args_source == pytest.Config.ArgsSource.TESTPATHS  # no file or test named
    if started is not None and expected and whole_suite:
        terminalreporter.write_line(
            f"bitext-hf: this run took {time.monotonic() - started:.0f} s; expected: {expected}"
        )


# English, French, German, Spanish; written for these tests.
_PARALLEL_ROWS: tuple[tuple[str, str, str, str], ...] = (
    (
        "The cat sleeps on the sofa.",
        "Le chat dort sur le canapé.",
        "Die Katze schläft auf dem Sofa.",
        "El gato duerme en el sofá.",
    ),
    (
        "I drink coffee every morning.",
        "Je bois du café tous les matins.",
        "Ich trinke jeden Morgen Kaffee.",
        "Bebo café todas las mañanas.",
    ),
    (
        "The train leaves at eight o'clock.",
        "Le train part à huit heures.",
        "Der Zug fährt um acht Uhr ab.",
        "El tren sale a las ocho.",
    ),
    (
        "My sister lives in a small village.",
        "Ma sœur habite dans un petit village.",
        "Meine Schwester wohnt in einem kleinen Dorf.",
        "Mi hermana vive en un pueblo pequeño.",
    ),
    ("It is raining today.", "Il pleut aujourd'hui.", "Heute regnet es.", "Hoy llueve."),
    ("Where is the station?", "Où est la gare ?", "Wo ist der Bahnhof?", "¿Dónde está la estación?"),
    ("We are reading a book.", "Nous lisons un livre.", "Wir lesen ein Buch.", "Estamos leyendo un libro."),
    (
        "The children play in the garden.",
        "Les enfants jouent dans le jardin.",
        "Die Kinder spielen im Garten.",
        "Los niños juegan en el jardín.",
    ),
    (
        "Open the window, please.",
        "Ouvre la fenêtre, s'il te plaît.",
        "Mach bitte das Fenster auf.",
        "Abre la ventana, por favor.",
    ),
    (
        "This soup is too hot.",
        "Cette soupe est trop chaude.",
        "Diese Suppe ist zu heiß.",
        "Esta sopa está demasiado caliente.",
    ),
    (
        "He works at the hospital.",
        "Il travaille à l'hôpital.",
        "Er arbeitet im Krankenhaus.",
        "Él trabaja en el hospital.",
    ),
    (
        "The shop closes at noon.",
        "Le magasin ferme à midi.",
        "Der Laden schließt am Mittag.",
        "La tienda cierra al mediodía.",
    ),
    (
        "Save the file before closing.",
        "Enregistrez le fichier avant de fermer.",
        "Speichern Sie die Datei vor dem Schließen.",
        "Guarde el archivo antes de cerrar.",
    ),
    (
        "The password is incorrect.",
        "Le mot de passe est incorrect.",
        "Das Passwort ist falsch.",
        "La contraseña es incorrecta.",
    ),
    ("Do you speak English?", "Parlez-vous anglais ?", "Sprechen Sie Englisch?", "¿Habla usted inglés?"),
    (
        "The sky is blue and clear.",
        "Le ciel est bleu et dégagé.",
        "Der Himmel ist blau und klar.",
        "El cielo está azul y despejado.",
    ),
    (
        "I lost my keys yesterday.",
        "J'ai perdu mes clés hier.",
        "Ich habe gestern meine Schlüssel verloren.",
        "Ayer perdí mis llaves.",
    ),
    (
        "The meeting starts in ten minutes.",
        "La réunion commence dans dix minutes.",
        "Die Besprechung beginnt in zehn Minuten.",
        "La reunión empieza en diez minutos.",
    ),
    ("Thank you for your help.", "Merci pour votre aide.", "Danke für Ihre Hilfe.", "Gracias por su ayuda."),
    (
        "The river flows to the sea.",
        "La rivière coule vers la mer.",
        "Der Fluss fließt ins Meer.",
        "El río fluye hacia el mar.",
    ),
)
_LANGUAGE_COLUMNS = {"fr": 1, "de": 2, "es": 3}


@pytest.fixture(autouse=True)
def _private_embedding_cache(monkeypatch, tmp_path_factory):
    """Each test gets an empty encoding cache of its own: nothing is written under ~/.cache, and a test that counts
    encoder calls never finds the sentences of an earlier test in the cache (bitext_hf.encoding.cache)."""
    monkeypatch.setenv("BITEXT_HF_EMBEDDING_CACHE", str(tmp_path_factory.mktemp("embedding-cache")))


@pytest.fixture(scope="session")
def tiny_parallel_corpus_by_language() -> dict[str, list[tuple[str, str]]]:
    """``{"fr" | "de" | "es": [(English, translation), ...]}``, 20 aligned pairs per language."""
    return {lang: [(row[0], row[column]) for row in _PARALLEL_ROWS] for lang, column in _LANGUAGE_COLUMNS.items()}


@pytest.fixture
def tiny_pair_specs(tmp_path, tiny_parallel_corpus_by_language) -> dict[str, str]:
    """``{"fr": "fr=<tmp>/fr.tsv", ...}``: the tiny corpus as English<TAB>xx files, one ``xx=path`` spec per language."""
    specs = {}
    for language, pairs in tiny_parallel_corpus_by_language.items():
        path = tmp_path / f"{language}.tsv"
        path.write_text("".join(f"{english}\t{translation}\n" for english, translation in pairs), encoding="utf-8")
        specs[language] = f"{language}={path}"
    return specs


@pytest.fixture(scope="session")
def tiny_parallel_corpus(tiny_parallel_corpus_by_language) -> list[tuple[str, str]]:
    """60 (English, translation) pairs: 20 French, then 20 German, then 20 Spanish."""
    return [pair for lang in _LANGUAGE_COLUMNS for pair in tiny_parallel_corpus_by_language[lang]]


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A ~300-piece Unigram tokenizer with XLM-R specials, trained on every sentence of the tiny corpus."""
    from bitext_hf.training.tokenizer import train_tokenizer

    sentences = [sentence for row in _PARALLEL_ROWS for sentence in row]
    return train_tokenizer(sentences, vocab_size=300, model_max_length=64)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer):
    """A random 2-layer, 32-wide XLM-R encoder saved with the tiny tokenizer (a Hugging Face model folder)."""
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel

    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=tiny_tokenizer.pad_token_id,
    )
    path = tmp_path_factory.mktemp("tiny-xlmr")
    XLMRobertaModel(config).eval().save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def uninterrupted_align(tmp_path_factory) -> tuple[Path, dict]:
    """``recipe_support.run_align`` with no extra flag: its output folder and results, made once for the tests that
    compare other runs with it (they read it and write nothing there)."""
    from recipe_support import run_align

    output_dir = tmp_path_factory.mktemp("uninterrupted_align") / "run"
    return output_dir, run_align(output_dir)
