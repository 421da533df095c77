"""SigOpt backend: an experiment (in memory through the ``lite`` driver, or on a SigOpt server) drives the trials.

Drivers. ``driver="lite"`` runs SigOpt's own optimizer (``sigoptlite``) in this process, with no server and no
account; it is the default when ``SIGOPT_API_TOKEN`` is not set. ``driver="http"`` (the default when the token
is set) talks to the hosted API or to a self-hosted sigopt-server named by ``SIGOPT_API_URL``. The token is read
by the sigopt client itself from the environment: this module never reads, logs or saves it.

Space conversion (bounds inclusive on both sides, as in `spaces` and in SigOpt):

- ``Float`` -> ``double`` (``log=True`` -> ``"transformation": "log"``);
- ``Int`` -> ``int``; ``Int(log=True)`` is refused (SigOpt has no log transform for ints: use
  ``Float(log=True)`` and round it in ``model_init``);
- a ``step`` (``Float`` or ``Int``) is *emulated*: SigOpt searches the grid index ``k`` as an ``int`` in
  ``[0, n]`` and the trial gets ``low + k * step``; in SigOpt's own view that parameter shows the index;
- ``Categorical`` -> ``categorical`` with string labels (``str(value)``, or ``"i:repr(value)"`` where two
  values would print alike), mapped back to the original Python values; a single choice is a constant;
- ``Fixed`` is not sent to SigOpt; it is inserted into the trial's parameters;
- conditions: a ``Categorical`` that other parameters depend on becomes a SigOpt *conditional* (its value is
  still suggested and given to the trial) and each dependent parameter gets ``conditions``. SigOpt's
  conditionals cannot themselves be conditional and only take string values, so a parent must be an
  unconditional ``Categorical`` (a ``Fixed`` parent is resolved here, once).

A native ``hp_space`` is the Hugging Face form: a callable returning the list of SigOpt parameter dicts (or
that list itself). Its assignments are given to the trial as SigOpt returns them, except that a categorical
string naming an ``int``/``float`` field of ``TrainingArguments`` (``per_device_train_batch_size: "32"``) is
converted to that type, and transformers' misspelled ``"transformamtion"`` key is corrected.

Resume. ``resume=True`` (``hpsearch run --resume``) continues a killed search from its ``search.json``: a new
experiment (lite keeps its experiment in the process that made it; a server's earlier experiment is left as it
was) is told every finished trial, the records are kept unchanged and count toward ``n_trials``, and only the rest
is run. A trial running when the process died is lost with its suggestion. See ``_resume``.

SigOpt has no pruning: intermediate objectives are only recorded. The final objective of a trial is sent as
an observation; a failed trial is sent as ``failed=True``. One or two objectives (two are SigOpt's
multimetric mode, which needs ``observation_budget``); the best trial(s) come from our own records, marked
with ``extra["sigopt_best"]`` where SigOpt's ``best_assignments`` agree.
"""

from ._adapter import SigOptBackend

__all__ = ["SigOptBackend"]
