"""The ``eval`` command: builds an :class:`~bitext_hf.jobs.evaluate.EvalConfig` from the options, runs
:func:`~bitext_hf.jobs.evaluate.run_evaluation` (which also writes ``--out``) and prints the results; and the key
of the results that ``bitext-hf eval --help`` shows (here, so that ``--help`` imports no evaluation code).
"""

from __future__ import annotations

from bitext_hf.cli.arguments import config_from_arguments
from bitext_hf.errors import EXIT_OK

__all__ = ["EVAL_KEYS", "cmd_eval"]

# The unit of every key of the results (shown in `bitext-hf eval --help` and the README).
EVAL_KEYS = """results (JSON; printed, and written with --out):
  model, k, margin  the encoder, and (with xsim or --bucc) the margin's k as used: --k capped at the corpus size
              (the larger side; per subset under `subsets`, the largest at the top) and the margin
  xsim        {xsim, errors, n}: LASER's xsim, the percent (0-100) of sources whose best-margin candidate among
              their k nearest targets is not the gold target; errors of n sources
  xsim_text   the same, but a predicted target whose text equals the gold target's text counts as correct
              (LASER's text mode: duplicate targets are no errors); percent
  accuracy    {src2tgt_accuracy, tgt2src_accuracy, accuracy}: top-1 cosine retrieval in each direction and their
              mean, exactly sentence-transformers' TranslationEvaluator (a retrieved sentence whose text is the
              gold sentence's counts as a hit); fractions in [0, 1]; aligned rows only
  mteb        {accuracy, precision, recall, f1, main_score}: MTEB's bitext-mining metrics (nearest target by
              cosine; precision/recall/f1 weighted over the gold labels as sklearn average="weighted";
              main_score = f1), comparable with the MTEB leaderboard; fractions in [0, 1]
  n_pairs     gold pairs evaluated
  subsets     per-subset results when an MTEB file holds several; the top-level numbers are then their average:
              xsim micro-averaged (sum of errors / sum of n), the fractions the mean over subsets
  bucc_f1     {precision, recall, f1, threshold, ...} of --bucc, fractions in [0, 1]; the threshold is the F1-best
              one on --bucc-train (or on the test split itself, an oracle, when no training split is given)
"""


def cmd_eval(args) -> int:
    """Parse the options into an :class:`~bitext_hf.jobs.evaluate.EvalConfig`, run the job, print the results."""
    from bitext_hf.jobs.evaluate import EvalConfig, run_evaluation

    result = run_evaluation(config_from_arguments(EvalConfig, args))
    print(result.to_json())
    return EXIT_OK
