"""``bitext-hf push``: upload a saved model folder, or mined pairs as a dataset with its card, to the Hub.

Checks run before any network access, cheapest first: the repository id and the folder or pairs file (exit 2 for
a folder that is not a saved model or holds a link out of it, 3 for a pairs file that cannot be read), then the
token (exit 4 when there is none). A model folder publishes the exported model only, checked file by file
(:mod:`bitext_hf.hub.model_files`); ``--dry-run`` prints what would go up and what stays local, and why. The upload
is one commit (all files or none); a refusal of the Hub (401/403, 404, no network) is exit 4 and its message says
that nothing was uploaded. The job is :func:`bitext_hf.jobs.push.run_push`; this module declares the options and
prints the lines its :func:`~bitext_hf.jobs.push.push_report` gives.
"""

from __future__ import annotations

from bitext_hf.cli.arguments import config_from_arguments
from bitext_hf.cli.commands import print_report
from bitext_hf.errors import EXIT_OK

__all__ = ["EPILOG_PUSH", "cmd_push"]

EPILOG_PUSH = """examples:
  bitext-hf push --model runs/laser3-wol --repo me/laser3-wol --private
  bitext-hf push --model runs/laser3-wol --repo me/laser3-wol --dry-run   # what would go up, what stays local
  bitext-hf push --model runs/musr --repo me/musr --include 'eval_results.json' --exclude '*.png'
  bitext-hf push --pairs pairs.parquet --repo me/mined-en-de --languages en de

--model publishes the exported model only: the files save_for_hub (and save_pretrained) write: config.json, the
weights (safetensors, shards and index; a PEFT adapter), the tokenizer files, the remote code that config.json's
auto_map names (with the modules it imports), the sentence-transformers files (modules.json, its configs and the
module folders it names: 1_Pooling/, 2_Dense/...), README.md and the images it shows. Everything else stays
local: checkpoint-*/, stage1/ and stage2/, teacher_cache/, alignments/, tokenizer/, training_args.bin, the
Trainer's state, logs, evaluation results, hidden files, and sub-folders holding a model of their own (push them
with their own --model, e.g. --model runs/musr/sentence-transformers). --include PATTERN adds files, --exclude
PATTERN removes files (both repeatable; fnmatch patterns on the path inside the folder, as huggingface_hub's
allow/ignore patterns: '*' also crosses '/', 'NAME/' is everything in a folder).

Links and odd files: a symbolic link whose target is outside the folder is refused (exit 2, the message names the
link) unless --exclude names it; a link to a file inside the folder goes up as that file's content under the
link's name; links to folders are not followed; FIFOs, sockets and devices are never opened. What goes up is
exactly what was checked: the files are staged as hard links (or copies) in a temporary folder and each is
verified to be the file that was checked: a file swapped for a link or another file meanwhile is never followed
(before staging: refused, exit 2; after: the checked file is what goes up).

--dry-run prints each file of the commit with its size and the total, then what stays local and why (a folder as
one line); with --pairs also the row count, the columns and the first rows. No token, no network. Control
characters of the data and of file names (terminal escape sequences, tabs, line breaks, bidirectional overrides)
are shown escaped (\x1b, \t, \u202e), never sent to the terminal.

--pairs publishes a `datasets` dataset: a Parquet train split, a dataset card with the mining parameters, counts
and score histogram, and mining.json. The parameters come from the sidecar `<pairs file>.meta.json` when it
exists (or --meta FILE); what it lacks is marked [More Information Needed] in the card. Every file push reads (the
pairs, the sidecar or --meta, the threshold report beside the pairs) is read once, bounded before a byte is read
(the pairs: the input bound, $BITEXT_HF_MAX_INPUT_BYTES or 2G; the sidecar and the report's sample: 4 MiB), and
must be a regular file: a FIFO or a device is never opened. A score, src_index, tgt_index or doc_id that is empty,
NaN or infinite is refused (the card would publish nan statistics), naming the file and line.

Token: --token, else the HF_TOKEN variable, else the saved `hf auth login`.

exit codes:
  0  uploaded (the commit URL is printed), or a dry run
  1  a file could not be staged for the upload (a full disk); a stdout whose encoding cannot represent the
     dry run's text (PYTHONIOENCODING=ascii: set PYTHONIOENCODING=utf-8)
  2  wrong usage: a bad --repo, a --model folder without config.json or weights, a link out of the folder,
     nothing left to upload, a file that changed while it was checked, a --pairs or --meta that is not a
     regular file (a FIFO, a device, a folder: named as such, never opened)
  3  a pairs, metadata or threshold report file that is missing, larger than its bound, unreadable, not in its
     format, or holds an empty, NaN or infinite number the card would summarize (the message names file and line)
  4  the Hub: no token, no write permission (HTTP 401/403), repository or revision not found, no network;
     nothing was uploaded (one commit: all files or none)
Errors are one line on stderr; --debug or BITEXT_HF_DEBUG=1 shows the traceback instead."""


def cmd_push(args) -> int:
    """Parse the options into a :class:`~bitext_hf.jobs.push.PushConfig`, run the job, print the report."""
    from bitext_hf.jobs.push import PushConfig, push_report, run_push

    config = config_from_arguments(PushConfig, args)
    print_report(push_report(config, run_push(config)), None)
    return EXIT_OK
