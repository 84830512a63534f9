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


# Byte offsets of the .mo header's little-endian fields (polib writes little-endian): the number of strings and the
# offsets of the table of original strings and of the table of translations.
MO_COUNT, MO_ORIGINALS, MO_TRANSLATIONS = 8, 12, 16


def mo_bytes(entries: list[tuple[str, str]], *, charset: str = "UTF-8") -> bytes:
    """A ``.mo`` catalog of ``entries`` (msgid, msgstr) whose header declares ``charset``."""
    import polib

    catalog = polib.POFile()
    catalog.metadata = {"Content-Type": f"text/plain; charset={charset}"}
    for msgid, msgstr in entries:
        catalog.append(polib.POEntry(msgid=msgid, msgstr=msgstr))
    return catalog.to_binary()


def with_field(data: bytes, offset: int, value: int) -> bytes:
    """``data`` with the little-endian 32-bit field at ``offset`` set to ``value``: a lying .mo header or table."""
    import struct

    return data[:offset] + struct.pack("<I", value) + data[offset + 4 :]


def po_text(entries: list[tuple[str, str]], *, charset: str = "UTF-8") -> str:
    """A ``.po`` catalog written out by hand (the messages as given, escaped only for quotes and backslashes), so
    that a test can put in what polib would never write: a raw NUL or line separator, a string left open."""

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    header = f'msgid ""\nmsgstr "Content-Type: text/plain; charset={charset}\\n"\n'
    return header + "".join(f"\nmsgid {quoted(msgid)}\nmsgstr {quoted(msgstr)}\n" for msgid, msgstr in entries)
