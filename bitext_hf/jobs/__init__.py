"""The jobs: one module per command, each holding its config (the command's options, checked when made), its
``run_*``, its result and the lines it reports (``*_report``). The command line only builds a config, runs it and
prints those lines; a Python caller gets
the same job, the same checks and the same files in one call:

>>> from bitext_hf.jobs import MiningConfig, run_mining
>>> result = run_mining(MiningConfig("corpus.en", "corpus.de", out="pairs.tsv", threshold=1.05))

- :mod:`~bitext_hf.jobs.encode` (``bitext-hf encode``), :mod:`~bitext_hf.jobs.mine` (``mine``),
  :mod:`~bitext_hf.jobs.score` (``score``), :mod:`~bitext_hf.jobs.align` (``align``),
  :mod:`~bitext_hf.jobs.evaluate` (``eval``), :mod:`~bitext_hf.jobs.gettext` (``data gettext``),
  :mod:`~bitext_hf.jobs.push` (``push``): no job imports another's module.
- :mod:`~bitext_hf.jobs.option_fields`: what makes a field an option and how every config checks its fields;
  :mod:`~bitext_hf.jobs.options`: the options several jobs share (encoder, Ray, margin, threshold, languages,
  filters), declared once;
  :mod:`~bitext_hf.jobs.base`: what every job does the same way, once (``job_run``: the thread limit, the input
  protection and the outputs of a run, every one declared and checked before any work and committed together; the
  ``ReportLine`` a job reports in);
  :mod:`~bitext_hf.jobs.sides`: the inputs of the jobs that mine or score pairs (their outputs' formats, the pairs
  table, the sidecar and the threshold report, are :mod:`bitext_hf.data.pair_files`, which the hub reads too).

The engines below (:mod:`bitext_hf.mining`, :mod:`bitext_hf.alignment`, :mod:`bitext_hf.encoding`,
:mod:`bitext_hf.evaluation`, :mod:`bitext_hf.hub`) take arrays and objects; they import nothing from here.
"""

from __future__ import annotations

from bitext_hf.lazy_imports import lazy_exports

# Each public name and the module that defines it, imported on first access (PEP 562): ``--help`` reads the configs
# without importing what the jobs run.
_SUBMODULE_OF = {
    "AlignConfig": "align",
    "AlignResult": "align",
    "run_alignment": "align",
    "EncodeConfig": "encode",
    "EncodingResult": "encode",
    "run_encoding": "encode",
    "EvalConfig": "evaluate",
    "EvaluationResult": "evaluate",
    "run_evaluation": "evaluate",
    "GettextConfig": "gettext",
    "GettextResult": "gettext",
    "run_gettext": "gettext",
    "MiningConfig": "mine",
    "MiningResult": "mine",
    "run_mining": "mine",
    "PushConfig": "push",
    "PushResult": "push",
    "run_push": "push",
    "ScoreConfig": "score",
    "ScoringResult": "score",
    "run_scoring": "score",
    "EncoderOptions": "options",
    "FilterOptions": "options",
    "LanguageOptions": "options",
    "MarginOptions": "options",
    "RayOptions": "options",
    "ThresholdOptions": "options",
}

__all__ = sorted(_SUBMODULE_OF)


__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULE_OF, globals())
