"""Tiny gettext catalogs written by the tests themselves (polib): ``<root>/<lang>/LC_MESSAGES/<app>.mo``."""

from __future__ import annotations

from pathlib import Path

# Three applications, English with German and French, written for these tests: each message is unique to its
# application, except the one the data function must drop as ambiguous ("Close the current window", in two).
APPLICATIONS: dict[str, list[tuple[str, str, str]]] = {
    "editor": [
        *(
            (f"Open the text file number {i}", f"Die Textdatei Nummer {i} öffnen", f"Ouvrir le fichier texte {i}")
            for i in range(6)
        ),
        ("Close the current window", "Das aktuelle Fenster schließen", "Fermer la fenêtre actuelle"),
    ],
    "mailer": [
        *(
            (f"Send the mail to contact {i}", f"Die Mail an Kontakt {i} senden", f"Envoyer le courriel au contact {i}")
            for i in range(6)
        ),
        ("Close the current window", "Aktuelles Fenster schließen", "Fermer cette fenêtre"),
    ],
    "player": [
        *(
            (f"Play the song on track {i}", f"Das Lied auf Spur {i} abspielen", f"Jouer la chanson de la piste {i}")
            for i in range(6)
        ),
    ],
}
COLUMNS = {"de": 1, "fr": 2}


def write_catalogs(root: Path, applications: dict[str, list[tuple[str, ...]]] = APPLICATIONS) -> Path:
    """One ``.mo`` per application and language under ``root``; returns ``root``."""
    import polib

    for language, column in COLUMNS.items():
        folder = root / language / "LC_MESSAGES"
        folder.mkdir(parents=True, exist_ok=True)
        for application, rows in applications.items():
            catalog = polib.POFile()
            catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
            for row in rows:
                catalog.append(polib.POEntry(msgid=row[0], msgstr=row[column]))
            catalog.save_as_mofile(str(folder / f"{application}.mo"))
    return root
