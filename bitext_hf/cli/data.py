"""``bitext-hf data gettext``: training and test pairs from the gettext catalogs installed on this machine.

``--lang fr --out pairs.tsv`` writes what ``bitext_hf.data.gettext_pairs("fr")`` returns (and what the data spec
``fr=gettext`` loads): English<TAB>French lines, each English message and each translation once, the format that
``fr=pairs.tsv`` specs read. ``--list`` prints the languages found with their pair counts. The job is
:func:`bitext_hf.jobs.gettext.run_gettext`; this module declares the options and prints the lines
its :func:`~bitext_hf.jobs.gettext.gettext_report` gives.
"""

from __future__ import annotations

from bitext_hf.cli.arguments import config_from_arguments
from bitext_hf.cli.commands import print_report
from bitext_hf.errors import EXIT_OK

__all__ = ["EPILOG_GETTEXT", "cmd_data_gettext"]

EPILOG_GETTEXT = """examples:
  bitext-hf data gettext --list                              # languages found, most pairs first
  bitext-hf data gettext --list --lang wo ff                 # the counts of these languages only
  bitext-hf data gettext --lang fr --out pairs.fr.tsv        # English<TAB>French, as `fr=pairs.fr.tsv` reads it
  bitext-hf data gettext --lang de fr --out 'pairs.{lang}.jsonl' --max-pairs 5000
  bitext-hf data gettext --lang wo --catalogs ./my-locale --out - | head

Catalogs are <root>/<lang>/LC_MESSAGES/*.mo and *.po under the system locale folders (/usr/share/locale,
/usr/share/locale-langpack, /usr/local/share/locale), the locale folders of installed Python packages, and every
--catalogs DIR. Messages are made one-line and accelerator-free; pairs without letters or left untranslated are
dropped, and each English message and each translation is kept once (the first catalog in path order wins), so
the pairs are a 1:1 alignment usable as test data. The same pairs as bitext_hf.data.gettext_pairs(lang) and the
data spec `lang=gettext`.

A catalog that cannot be read (not a regular file, over 64 MiB or 200000 entries, truncated or inconsistent, an
unknown charset, a string left open) is skipped with a warning naming it when it is one of this machine's, and is
an error (exit 3) when it lies under a --catalogs folder. Messages holding a NUL character and pairs longer than a
line the readers accept (10000 characters) are left out and counted in the report, so the output always reads back
into `score` and `mine`. --out is never a catalog, by name (.mo, .po) or by content (exit 2).

Output: .tsv (English<TAB>xx, no header), .csv and .parquet (columns en and xx), .jsonl ({"en": ..., "xx": ...});
the format follows the extension, or --format; `-` is stdout (TSV unless --format).
"""


def cmd_data_gettext(args) -> int:
    """Parse the options into a :class:`~bitext_hf.jobs.gettext.GettextConfig`, run the job, print the report."""
    from bitext_hf.jobs.gettext import GettextConfig, gettext_report, run_gettext

    config = config_from_arguments(GettextConfig, args)
    print_report(gettext_report(config, run_gettext(config)), config.out)
    return EXIT_OK
