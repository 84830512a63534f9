"""``gettext_application_examples``: which application a message comes from, on catalogs the test writes."""

from __future__ import annotations

import pytest
from gettext_catalogs import APPLICATIONS, write_catalogs

from bitext_hf.data.gettext import gettext_application_examples
from bitext_hf.errors import DataValidationError, UsageError


@pytest.fixture
def locale(tmp_path):
    extra = {
        # The same German translation in two applications: ambiguous in German, so dropped in every language.
        "editor": [*APPLICATIONS["editor"], ("Quit the editor right now", "Jetzt beenden", "Quitter l'éditeur")],
        "player": [
            *APPLICATIONS["player"],
            ("Stop playing and exit", "Jetzt beenden", "Arrêter et quitter"),
            ("Shuffle", "Zufall", "Aléatoire"),  # one word: under min_words=2
            ("Play the album in a loop", "Play the album in a loop", "Jouer l'album en boucle"),  # untranslated (de)
        ],
        "mailer": APPLICATIONS["mailer"],
        "viewer": [("Zoom into the picture", "In das Bild zoomen", "Zoomer dans l'image")],
    }
    root = write_catalogs(tmp_path / "locale", extra)
    (root / "fr" / "LC_MESSAGES" / "viewer.mo").unlink()  # the viewer has no French catalog
    return root


def test_labels_are_applications_and_languages_are_parallel(locale):
    examples = gettext_application_examples(["de", "fr"], [locale], min_words=2)
    assert list(examples) == ["en", "de", "fr"]
    english = dict(examples["en"])
    assert set(english.values()) == {"editor", "mailer", "player"}  # no viewer: it lacks French
    assert sum(label == "editor" for label in english.values()) == 6
    # Dropped: the message of two applications, the shared German translation, one word, translation == English.
    for text in ("Close the current window", "Quit the editor right now", "Stop playing and exit", "Shuffle"):
        assert text not in english
    assert "Play the album in a loop" not in english
    rows = {row[0]: row for rows in APPLICATIONS.values() for row in rows}
    for position, (text, label) in enumerate(examples["en"]):
        assert examples["de"][position] == (rows[text][1], label)
        assert examples["fr"][position] == (rows[text][2], label)
    # German alone: the viewer joins, and needs min_per_application=1 for its single message.
    german = gettext_application_examples(["de"], [locale], min_words=2, min_per_application=1)
    assert ("In das Bild zoomen", "viewer") in german["de"]


def test_cap_seed_and_application_choice(locale):
    capped = gettext_application_examples(["de", "fr"], [locale], per_application=3, seed=1)
    assert [label for _, label in capped["en"]] == ["editor"] * 3 + ["mailer"] * 3 + ["player"] * 3
    assert capped == gettext_application_examples(["de", "fr"], [locale], per_application=3, seed=1)
    other_seeds = [gettext_application_examples(["de", "fr"], [locale], per_application=3, seed=s) for s in range(5)]
    assert any(examples["en"] != capped["en"] for examples in other_seeds)
    two = gettext_application_examples(["de", "fr"], [locale], max_applications=2)
    assert len({label for _, label in two["en"]}) == 2


def test_too_few_applications_and_bad_arguments(locale, tmp_path):
    with pytest.raises(DataValidationError, match="need 2"):
        gettext_application_examples(["de", "fr"], [locale], min_per_application=7)
    with pytest.raises(DataValidationError, match="0 application"):
        gettext_application_examples(["es"], [locale])
    with pytest.raises(DataValidationError, match="need 2"):
        gettext_application_examples(["de"], [tmp_path / "nothing"])
    for bad in ({"languages": []}, {"languages": ["en", "de"]}, {"languages": ["de"], "max_applications": 1}):
        with pytest.raises(UsageError):
            gettext_application_examples(roots=[locale], **bad)
