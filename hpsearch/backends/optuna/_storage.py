"""The study's storage: building and checking it, recovering trials of dead drivers, and the budget.

A storage URL gets an `RDBStorage` with Optuna's heartbeat: a trial whose driver stopped beating for
`GRACE_PERIOD` seconds is failed and its parameters are re-enqueued once. Every trial also carries its driver's
``host:pid`` (user attr ``hpsearch_owner``), so a rerun on the same machine fails and re-enqueues a dead driver's
trial at once, on any storage (journal files have no heartbeat). The budget counts every trial of the study
except a failed trial that was re-enqueued (its retry takes its place) and the empty over-budget trials.
"""

from __future__ import annotations

import logging
import os
import socket
import warnings
from collections.abc import Mapping
from typing import Any

from ...errors import SearchConfigError

logger = logging.getLogger(__name__)

JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")
_RDB_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "oracle", "mssql")

#: Optuna heartbeat of storages built from a URL (seconds): a trial whose driver has not beaten for
#: GRACE_PERIOD is failed by the next driver that starts a trial, and re-enqueued once.
HEARTBEAT_INTERVAL = 10
GRACE_PERIOD = 20
OWNER_ATTR = "hpsearch_owner"
OVER_BUDGET_ATTR = "hpsearch_over_budget"
#: What a finished trial leaves for the translation (name, checkpoint, node, error, last_step), as one JSON user
#: attr: one storage transaction per trial instead of one per field. Studies written before this kept each
#: field in its own ``hpsearch_<field>`` attr; `saved_fields` reads both.
RECORD_ATTR = "hpsearch"
RECORD_FIELDS = ("name", "checkpoint", "node", "error", "last_step")


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_is_dead(value: Any) -> bool:
    """True only for a driver process of this machine that no longer exists (other hosts: unknown)."""
    if not isinstance(value, str) or ":" not in value:
        return False
    host, _, pid_text = value.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists but belongs to someone else
        return False
    return False


def saved_fields(user_attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The record fields a trial's driver saved: the one ``hpsearch`` attr, or the older one-attr-per-field form."""
    saved = user_attrs.get(RECORD_ATTR)
    out = {key: user_attrs[f"hpsearch_{key}"] for key in RECORD_FIELDS if f"hpsearch_{key}" in user_attrs}
    if isinstance(saved, dict):
        out.update(saved)
    return out


def retried_numbers(trials: list[Any]) -> set[int]:
    """Numbers of failed trials that were re-enqueued (by the heartbeat or by `recover_dead_drivers`)."""
    out: set[int] = set()
    for t in trials:
        out.update(t.system_attrs.get("retry_history", ()))
    return out


def budget_trials(trials: list[Any]) -> list[Any]:
    """The trials that use the budget: all but re-enqueued failures and the empty over-budget ones."""
    import optuna

    retried = retried_numbers(trials)
    return [
        t for t in trials
        if not t.user_attrs.get(OVER_BUDGET_ATTR)
        and not (t.state == optuna.trial.TrialState.FAIL and t.number in retried)
    ]


def _retry_callback() -> Any:
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)


def redact_url(url: str) -> str:
    """A storage URL without its password (never printed or saved)."""
    if "://" not in url or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}"


def check_storage_url(url: str, output_dir: str) -> None:
    """A malformed storage URL or a missing folder fails before anything is written."""
    def missing(folder: str) -> bool:
        # output_dir itself is created before the storage is opened.
        return not os.path.isdir(folder) and os.path.abspath(folder) != os.path.abspath(output_dir)

    if url.endswith(JOURNAL_SUFFIXES) and "://" not in url:
        parent = os.path.dirname(os.path.abspath(url))
        if missing(parent):
            raise SearchConfigError(f"storage journal file {url!r}: folder {parent!r} does not exist; create it.")
        return
    scheme = url.split("://", 1)[0].split("+", 1)[0] if "://" in url else ""
    if scheme not in _RDB_SCHEMES:
        raise SearchConfigError(
            f"storage={redact_url(url)!r} is not a database URL or journal file; use e.g. "
            "'sqlite:///study.db', 'postgresql://user@host/db' or a path ending in .log."
        )
    import sqlalchemy.engine

    try:
        parsed = sqlalchemy.engine.make_url(url)
        parsed.port  # noqa: B018 - parsing the port is lazy in some versions
    except Exception as error:
        raise SearchConfigError(
            f"storage={redact_url(url)!r} is not a valid database URL ({type(error).__name__}); write it as "
            "'dialect+driver://user:password@host:port/database', e.g. 'postgresql+psycopg2://me:pw@127.0.0.1:5432/db'."
        ) from None
    if scheme == "sqlite" and parsed.database not in (None, "", ":memory:"):
        parent = os.path.dirname(os.path.abspath(parsed.database))
        if missing(parent):
            raise SearchConfigError(
                f"storage={redact_url(url)!r}: folder {parent!r} of the SQLite file does not exist; create it or use "
                "another path."
            )


def build_storage(storage: Any) -> Any:
    """An Optuna storage for what the user passed: a journal path, a database URL (with heartbeat), or as is."""
    import optuna

    if isinstance(storage, str) and "://" not in storage:
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(storage))
    if isinstance(storage, str):
        # Optuna marks heartbeat_interval experimental; the warning would repeat in every run.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(
                storage,
                heartbeat_interval=HEARTBEAT_INTERVAL,
                grace_period=GRACE_PERIOD,
                heartbeat_stale_trial_callback=_retry_callback(),
            )
    return storage


def recover_dead_drivers(study: Any) -> None:
    """Fail the RUNNING trials of drivers that died, and re-enqueue their parameters once.

    Heartbeat storages do this themselves once GRACE_PERIOD has passed; a driver of this machine whose process
    is gone is certainly dead, so its trials are recovered now, on every storage.
    """
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    retry = _retry_callback()
    for frozen in study.get_trials(deepcopy=True, states=(optuna.trial.TrialState.RUNNING,)):
        if not owner_is_dead(frozen.user_attrs.get(OWNER_ATTR)):
            continue
        try:
            study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
        except (ValueError, RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
            continue  # another driver recovered it first
        logger.warning("Trial %d was left RUNNING by a driver that died (%s); marked FAIL and re-enqueued.",
                       frozen.number, frozen.user_attrs[OWNER_ATTR])
        retry(study, frozen)


def study_summary(storage: str, study_name: str) -> Any:
    """Optuna's summary of ``study_name`` in the storage URL, or None when there is no such study."""
    import optuna

    try:
        summaries = optuna.study.get_all_study_summaries(storage=storage, include_best_trial=False)
    except Exception as error:
        raise SearchConfigError(f"storage={redact_url(storage)!r}: cannot open the storage ({error}); check the URL.") from None
    return next((s for s in summaries if s.study_name == study_name), None)
