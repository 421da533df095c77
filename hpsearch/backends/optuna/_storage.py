"""The study's storage: building and checking it, recovering trials of dead drivers, and the budget.

A storage URL gets an `RDBStorage` with Optuna's heartbeat: a trial whose driver stopped beating for
`GRACE_PERIOD` seconds is failed and its parameters are re-enqueued once. Every trial also carries its driver's
``host:pid`` (user attr ``hpsearch_owner``), so a rerun on the same machine fails and re-enqueues a dead driver's
trial at once, on any storage (journal files have no heartbeat). A driver killed after the storage created its trial
but before the owner was written is known by the marker it keeps in output_dir while it asks (`asking`). The budget
counts every trial of the study except a failed trial that was re-enqueued (its retry takes its place) and the
empty over-budget trials.
"""

from __future__ import annotations

import contextlib
import datetime
import glob
import importlib.util
import json
import logging
import os
import socket
import threading
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from ..._files import json_default
from ..._redact import redact, redact_url
from ...errors import HPSearchError, SearchConfigError
from ...trial import TrialRecord
from . import _pg_wait
from ._optimize import fail_stale

logger = logging.getLogger(__name__)

JOURNAL_SUFFIXES = (".log", ".journal", ".jsonl")
_RDB_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "oracle", "mssql")

#: Optuna heartbeat of storages built from a URL (seconds): a trial whose driver has not beaten for
#: GRACE_PERIOD is failed by the next driver that starts a trial, and re-enqueued once.
HEARTBEAT_INTERVAL = 10
GRACE_PERIOD = 20
OWNER_ATTR = "hpsearch_owner"
OVER_BUDGET_ATTR = "hpsearch_over_budget"
#: The whole record a finished trial leaves in the study (one JSON user attr, set before the study is told): the
#: study alone can rebuild search.json. Older studies kept only some fields (name, checkpoint, node, error,
#: last_step), in this attr or one attr each; `saved_fields` reads those.
RECORD_ATTR = "hpsearch"
RETRY_OF_ATTR = "hpsearch_retry_of"
INTERRUPTED_ATTR = "hpsearch_interrupted"
REQUEUE_ATTR = "hpsearch_requeue"
SOURCE_ATTR = "hpsearch_source"
RECORD_FIELDS = ("name", "checkpoint", "node", "error", "last_step")


def owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


ASKING_PREFIX = ".hpsearch-asking-"


def outlives_driver(study: Any) -> bool:
    """Whether ``study``'s storage can outlive this driver's process (a database or a journal file; Optuna's
    in-memory storage cannot): only then may a rerun find this driver's trials, and only then is an `asking` marker
    ever read."""
    import optuna

    return not isinstance(study._storage, optuna.storages.InMemoryStorage)


@contextlib.contextmanager
def asking(output_dir: str, study_name: str) -> Iterator[None]:
    """Around ``study.ask()`` and the owner attr that follows it: a marker file naming this driver, the study and the
    time, so that a rerun can tell whose trial an owner-less RUNNING trial is if this driver is killed in between."""
    path = os.path.join(output_dir, f"{ASKING_PREFIX}{owner()}@{threading.get_ident()}")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"study": study_name, "since": datetime.datetime.now().isoformat()}))
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)


def _dead_askers(output_dir: str, study_name: str) -> list[tuple[str, str, datetime.datetime]]:
    """The asking markers of this machine's dead drivers on ``study_name``: (path, owner, since). A marker torn by
    the kill counts from its file's time, less a second."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(output_dir), ASKING_PREFIX + "*")):
        dead = os.path.basename(path)[len(ASKING_PREFIX) :].rpartition("@")[0]
        if not owner_is_dead(dead):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                marker = json.load(handle)
            since = datetime.datetime.fromisoformat(marker["since"])
            if marker["study"] != study_name:
                continue
        except (OSError, ValueError, KeyError, TypeError):
            try:
                since = datetime.datetime.fromtimestamp(os.path.getmtime(path) - 1.0)
            except OSError:
                continue  # removed meanwhile by another rerun
        found.append((path, dead, since))
    return found


def _orphans(running: list[Any], askers: list[tuple[str, str, datetime.datetime]]) -> dict[int, str]:
    """The owner-less RUNNING trials that dead drivers were asking for: each asker's is the first owner-less trial
    created after its marker (one ask, one trial; a live driver's later trial is not it)."""
    unowned = sorted(
        (t for t in running if OWNER_ATTR not in t.user_attrs and t.datetime_start is not None),
        key=lambda t: t.datetime_start,
    )
    found: dict[int, str] = {}
    for _, dead, since in sorted(askers, key=lambda asker: asker[2]):
        trial = next((t for t in unowned if t.datetime_start >= since and t.number not in found), None)
        if trial is not None:
            found[trial.number] = dead
    return found


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


def _saved(user_attrs: Mapping[str, Any]) -> Any:
    """The record attr as a dict: stored as JSON text (older studies: a dict), None when absent or unreadable."""
    saved = user_attrs.get(RECORD_ATTR)
    if isinstance(saved, str):
        try:
            saved = json.loads(saved)
        except ValueError:
            return None
    return saved


def saved_record(user_attrs: Mapping[str, Any]) -> TrialRecord | None:
    """The record a trial's driver saved in the study, when it saved the whole record."""
    saved = _saved(user_attrs)
    if isinstance(saved, dict) and "trial_id" in saved:
        try:
            return TrialRecord.from_dict(saved)
        except (KeyError, TypeError, ValueError):
            return None
    return None


def record_attr(record: TrialRecord) -> str:
    """The record as Optuna stores it: its JSON text (anything JSON cannot hold becomes plain data or a string).

    Text rather than the decoded dict: Optuna deep-copies a finished trial, user attrs included, for every callback
    and most reads of the study, and a string is copied for free.
    """
    return json.dumps(record.to_dict(), default=json_default)


def saved_fields(user_attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The record fields a trial's driver saved: the one ``hpsearch`` attr, or the older one-attr-per-field form."""
    saved = _saved(user_attrs)
    out = {key: user_attrs[f"hpsearch_{key}"] for key in RECORD_FIELDS if f"hpsearch_{key}" in user_attrs}
    if isinstance(saved, dict):
        out.update(saved)
    return out


def superseded_numbers(trials: list[Any]) -> set[int]:
    """Numbers of trials whose parameters were queued again (their driver died, or they were interrupted): the
    new trial takes their place in the budget. Read over the whole study, so every worker agrees."""
    out: set[int] = set()
    for t in trials:
        out.update(t.system_attrs.get("retry_history", ()))  # Optuna's own heartbeat retries (older studies)
        retry_of = t.user_attrs.get(RETRY_OF_ATTR)
        if isinstance(retry_of, int):
            out.add(retry_of)
    return out


def budget_trials(trials: list[Any], below: int | None = None) -> list[Any]:
    """The trials that use the budget (numbered below ``below`` if given): all but the superseded failures and the
    empty over-budget ones."""
    import optuna

    superseded = superseded_numbers(trials)
    return [
        t
        for t in trials
        if (below is None or t.number < below)
        and not t.user_attrs.get(OVER_BUDGET_ATTR)
        and t.user_attrs.get(SOURCE_ATTR) != "warm_start"
        and not (t.state == optuna.trial.TrialState.FAIL and t.number in superseded)
    ]


def requeue(study: Any, number: int, params: Mapping[str, Any]) -> None:
    """Queue ``params`` again as a new trial that takes the place of trial ``number`` (any number of times: a
    kill is never the trial's fault, so a retry killed again is retried again)."""
    study.enqueue_trial(dict(params), user_attrs={RETRY_OF_ATTR: number}, skip_if_exists=False)


def queue_interrupted(study: Any, optuna_trial: Any) -> None:
    """Mark a trial Ctrl-C interrupted (it stays out of the results) and queue its parameters again.

    A second Ctrl-C in between is held off (the search stops anyway): landing after the mark and before the queueing,
    it would leave a trial out of the results and never trained again, one trial short of the budget."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        optuna_trial.set_user_attr(INTERRUPTED_ATTR, True)
        requeue(study, optuna_trial.number, optuna_trial.params)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _requeue_stale(study: Any, frozen: Any) -> None:
    """Optuna's heartbeat callback: a trial whose driver stopped beating was failed; queue its parameters again."""
    requeue(study, frozen.number, frozen.params)


def check_storage_url(url: str, output_dir: str) -> None:
    """A malformed storage URL or a missing folder fails before anything is written."""

    def missing(folder: str) -> bool:
        # output_dir itself is created before the storage is opened.
        return not os.path.isdir(folder) and os.path.abspath(folder) != os.path.abspath(output_dir)

    if "://" not in url:
        if os.path.isdir(url):
            raise SearchConfigError(
                f"storage={url!r} is a folder; a journal storage is a file: pass a file path such as "
                f"{os.path.join(url, 'study.log')!r}.",
                about="storage",
            )
        if not url.endswith(JOURNAL_SUFFIXES):
            raise SearchConfigError(
                f"storage={url!r} is neither a database URL nor a journal file; use e.g. 'sqlite:///study.db', "
                "'postgresql+psycopg2://user@host/db' or a path ending in .log.",
                about="storage",
            )
        parent = os.path.dirname(os.path.abspath(url))
        if missing(parent):
            raise SearchConfigError(
                f"storage journal file {url!r}: folder {parent!r} does not exist; create it.", about="storage"
            )
        return
    if url.startswith("sqlite://") and not url.startswith("sqlite:///"):
        fixed = "sqlite:///" + url[len("sqlite://") :]
        raise SearchConfigError(
            f"storage={url!r}: a SQLite URL has three slashes before a relative path and four before an absolute "
            f"one (sqlite:///study.db, sqlite:////tmp/study.db); write {fixed!r}.",
            about="storage",
        )
    scheme = url.split("://", 1)[0].split("+", 1)[0] if "://" in url else ""
    if scheme not in _RDB_SCHEMES:
        raise SearchConfigError(
            f"storage={redact_url(url)!r} is not a database URL or journal file; use e.g. "
            "'sqlite:///study.db', 'postgresql+psycopg2://user@host/db' or a path ending in .log.",
            about="storage",
        )
    import sqlalchemy.engine

    try:
        parsed = sqlalchemy.engine.make_url(url)
        parsed.port  # noqa: B018 - parsing the port is lazy in some versions
    except Exception as error:
        raise SearchConfigError(
            f"storage={redact_url(url)!r} is not a valid database URL ({type(error).__name__}); write it as "
            "'dialect+driver://user:password@host:port/database', e.g. 'postgresql+psycopg2://me:pw@127.0.0.1:5432/db'.",
            about="storage",
        ) from None
    _check_driver(url, parsed)
    if scheme == "sqlite" and "?" in url and not all("=" in item for item in url.split("?", 1)[1].split("&")):
        raise SearchConfigError(
            f"storage={url!r}: the '?' starts a query in a URL, so the SQLite file would be "
            f"{parsed.database!r}; choose a path without '?'.",
            about="storage",
        )
    if scheme == "sqlite" and parsed.database not in (None, "", ":memory:"):
        parent = os.path.dirname(os.path.abspath(parsed.database))
        if missing(parent):
            raise SearchConfigError(
                f"storage={redact_url(url)!r}: folder {parent!r} of the SQLite file does not exist; create it or use "
                "another path.",
                about="storage",
            )


def _check_driver(url: str, parsed: Any) -> None:
    """The URL's database driver must be importable: SQLAlchemy imports it only when the study is opened."""
    try:
        parsed.get_dialect().import_dbapi()
    except ImportError as error:
        backend = parsed.get_backend_name()
        installed = [d for d, module in _DRIVERS.get(backend, ()) if _importable(module)]
        if installed:
            fixed = redact_url(str(parsed.set(drivername=f"{backend}+{installed[0]}")))
            fix = f"name an installed one in the URL, e.g. {fixed!r}"
        elif backend in _DRIVERS:
            driver, module = _DRIVERS[backend][0]
            fix = f"install one and name it in the URL (e.g. `pip install {module}`, then '{backend}+{driver}://...')"
        else:
            fix = "install it"
        raise SearchConfigError(
            f"storage={redact_url(url)!r}: its database driver {parsed.get_driver_name()!r} is not installed "
            f"({error}); {fix}.",
            about="storage",
        ) from None
    except Exception:  # a dialect SQLAlchemy cannot load fails with its own message when the study is opened
        pass


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # its parent package is missing
        return False


#: Drivers SQLAlchemy knows per database (URL name, module), the usual first.
_DRIVERS = {
    "postgresql": (("psycopg2", "psycopg2"), ("psycopg", "psycopg"), ("pg8000", "pg8000")),
    "mysql": (("pymysql", "pymysql"), ("mysqldb", "MySQLdb"), ("mysqlconnector", "mysql.connector")),
}


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
                engine_kwargs=_engine_kwargs(storage),
                heartbeat_interval=HEARTBEAT_INTERVAL,
                grace_period=GRACE_PERIOD,
                heartbeat_stale_trial_callback=_requeue_stale,
            )
    return storage


#: Seconds to wait for a database server: one that accepts the connection and never answers must not hang a
#: search for ever.
CONNECT_TIMEOUT_S = 15
STATEMENT_TIMEOUT_S = 120


def _engine_kwargs(url: str) -> dict[str, Any]:
    scheme = url.split("://", 1)[0].split("+", 1)[0]
    if scheme in ("postgresql", "postgres"):
        driver = url.split("://", 1)[0].partition("+")[2] or "psycopg2"
        if driver == "psycopg2":
            # statement_timeout is the server's: it cannot end a wait on a frozen server (see _pg_wait).
            _pg_wait.install(CONNECT_TIMEOUT_S, STATEMENT_TIMEOUT_S + CONNECT_TIMEOUT_S)
        return {
            "connect_args": {
                "connect_timeout": CONNECT_TIMEOUT_S,
                "options": f"-c statement_timeout={STATEMENT_TIMEOUT_S * 1000}",
            },
            "pool_timeout": CONNECT_TIMEOUT_S,
        }
    if scheme == "mysql":
        return {
            "connect_args": {
                "connect_timeout": CONNECT_TIMEOUT_S,
                "read_timeout": STATEMENT_TIMEOUT_S,
                "write_timeout": STATEMENT_TIMEOUT_S,
            },
            "pool_timeout": CONNECT_TIMEOUT_S,
        }
    if scheme == "sqlite":
        return {"connect_args": {"timeout": STATEMENT_TIMEOUT_S}}
    return {}


def recover_dead_drivers(study: Any, output_dir: str) -> None:
    """Fail the RUNNING trials of drivers that died, and re-enqueue their parameters once.

    Heartbeat storages do this themselves once GRACE_PERIOD has passed; a driver of this machine whose process
    is gone is certainly dead, so its trials are recovered now, on every storage (an owner-less trial too, when
    a dead driver's asking marker in ``output_dir`` shows it was killed while asking for it).
    """
    import optuna

    fail_stale(study)
    askers = _dead_askers(output_dir, study.study_name)
    queued = superseded_numbers(study.get_trials(deepcopy=False))
    running = study.get_trials(deepcopy=True, states=(optuna.trial.TrialState.RUNNING,))
    orphans = _orphans(running, askers)
    for frozen in running:
        dead = frozen.user_attrs.get(OWNER_ATTR) or orphans.get(frozen.number)
        if not owner_is_dead(dead):
            continue
        # A trial interrupted (Ctrl-C) and queued again just before its driver was killed is only failed: its
        # parameters must not be queued a second time.
        again = frozen.number not in queued
        if again:
            # Marked first: a rerun killed between failing the trial and queueing it again still queues it.
            with contextlib.suppress(Exception):
                study._storage.set_trial_user_attr(frozen._trial_id, REQUEUE_ATTR, True)
        try:
            study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
        except (ValueError, RuntimeError, optuna.exceptions.UpdateFinishedTrialError):
            continue  # another driver recovered it first
        logger.warning(
            "Trial %d was left RUNNING by a driver that died (%s); marked FAIL%s.",
            frozen.number,
            dead,
            " and re-enqueued" if again else " (already queued again)",
        )
        if again:
            requeue(study, frozen.number, frozen.params)
    for path, _, _ in askers:
        with contextlib.suppress(OSError):
            os.remove(path)
    trials = study.get_trials(deepcopy=False)
    superseded = superseded_numbers(trials)
    for frozen in trials:
        if (
            frozen.state == optuna.trial.TrialState.FAIL
            and frozen.user_attrs.get(REQUEUE_ATTR)
            and frozen.number not in superseded
        ):
            requeue(study, frozen.number, frozen.params)


def stored_trials(storage: Any, study_name: str) -> int | None:
    """How many trials ``study_name`` holds in ``storage`` (None: there is no such study), read without creating
    anything: a SQLite or journal file that does not exist, or a database without Optuna's tables, holds no study."""
    import optuna

    engine: Any = None
    if isinstance(storage, str) and "://" not in storage:
        if not os.path.isfile(storage):
            return None
        storage = build_storage(storage)
    elif isinstance(storage, str):
        import sqlalchemy

        url = storage
        database = sqlalchemy.engine.make_url(url).database
        if url.startswith("sqlite:") and (database in (None, "", ":memory:") or not os.path.isfile(database)):
            return None
        try:
            engine = sqlalchemy.create_engine(url, **_engine_kwargs(url))
            if not sqlalchemy.inspect(engine).has_table("studies"):
                return None
            storage = optuna.storages.RDBStorage(
                url, engine_kwargs=_engine_kwargs(url), skip_table_creation=True
            )
        except Exception as error:
            raise SearchConfigError(
                f"storage={redact_url(url)!r}: cannot open the storage ({redact(str(error)).splitlines()[0]}); check "
                "the URL and that the database answers.",
                about="storage",
            ) from None
        finally:
            if engine is not None:
                engine.dispose()
    try:
        return int(storage.get_n_trials(storage.get_study_id_from_name(study_name)))
    except KeyError:
        return None
    finally:
        if isinstance(storage, optuna.storages.RDBStorage) and engine is not None:
            storage.engine.dispose()  # only a storage built here: one the user passed stays open


@contextlib.contextmanager
def storage_errors(storage: Any) -> Iterator[None]:
    """A database that fails mid-search (lost, frozen past its bound) stops the search with the database's own
    cause and the storage named, not Optuna's generic "An exception is raised during the commit"."""
    import optuna

    try:
        yield
    except (optuna.exceptions.StorageInternalError, _sqlalchemy_errors()) as error:
        cause = (
            error.__cause__
            if isinstance(error, optuna.exceptions.StorageInternalError) and error.__cause__
            else error
        )
        where = redact_url(storage) if isinstance(storage, str) else type(storage).__name__
        first = (redact(str(getattr(cause, "orig", None) or cause)).strip().splitlines() or [""])[0]
        raise HPSearchError(
            f"storage={where!r} failed during the search ({type(cause).__name__}: {first}); the trials finished "
            "before are saved in output_dir and in the study. Check that the database server is up and answers, "
            "then run the same search again with load_if_exists=True to continue it."
        ) from error


def _sqlalchemy_errors() -> type[BaseException]:
    try:
        from sqlalchemy.exc import OperationalError
    except ImportError:
        return HPSearchError  # nothing to add when SQLAlchemy is missing
    return OperationalError
