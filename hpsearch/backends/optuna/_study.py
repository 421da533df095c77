"""Opening the study: a stable default name, and refusing a stored study that belongs to another search.

A search with a ``storage`` and no ``study_name`` gets a name derived from its output folder, and continues that
study when it exists: rerunning the same call after a crash resumes it (the log says so). A study reused by name
must be the same search: same directions, same objective, same space (stored in the study's user attrs when it
is created); anything else is refused, naming what differs, before any trial.

Several workers started at once on a database that does not exist yet race to create Optuna's tables; the losers
saw SQLAlchemy's "table already exists" or "UNIQUE constraint failed" and stopped. Opening is retried on those
errors (the tables are there by then), a few times with a short random wait.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

from ..._redact import redact
from ...errors import SearchConfigError
from ...session import identity_differences, search_identity
from . import _storage

if TYPE_CHECKING:
    from ...session import SearchSession
    from ...settings import TrialSettings
    from ._space import OptunaSpace

logger = logging.getLogger(__name__)

SEARCH_ATTR = "hpsearch_search"


def default_study_name(output_dir: str) -> str:
    """``hpsearch-<folder>-<hash of its absolute path>``: the same for every run of a search in that folder."""
    path = os.path.abspath(os.path.expanduser(output_dir))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", os.path.basename(path.rstrip(os.sep)) or "search")[:40]
    return f"hpsearch-{slug}-{hashlib.sha1(path.encode('utf-8')).hexdigest()[:8]}"


def loads_existing(kwargs: Mapping[str, Any]) -> bool:
    """Whether these options continue a study kept in a storage: ``load_if_exists=True``, or a storage without a study
    name (the study named after output_dir is continued, see `open_study`)."""
    load = kwargs.get("load_if_exists")
    return kwargs.get("storage") is not None and bool(load or (load is None and not kwargs.get("study_name")))


def continues_study(kwargs: Mapping[str, Any], output_dir: str) -> bool:
    """Whether these options continue a study the storage already holds, with trials (an earlier run of this search):
    options that would load a study the storage does not have (a new database) continue nothing."""
    if not loads_existing(kwargs):
        return False
    study_name = kwargs.get("study_name") or default_study_name(output_dir)
    return bool(_storage.stored_trials(kwargs["storage"], study_name))


def open_study(kwargs: dict[str, Any], settings: TrialSettings, session: SearchSession) -> Any:
    import optuna

    storage = kwargs.get("storage")
    study_name = kwargs.get("study_name")
    load_if_exists = kwargs.get("load_if_exists")
    if storage is not None and study_name is None:
        study_name = default_study_name(settings.output_dir)
        if load_if_exists is None:
            load_if_exists = True
        logger.info("Study %r (named after output_dir; a rerun of this search continues it).", study_name)
    directions = cast('list[Literal["minimize", "maximize"]]', list(settings.directions))
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            study = optuna.create_study(
                directions=directions,
                sampler=kwargs.get("sampler"),
                pruner=kwargs.get("pruner"),
                storage=_storage.build_storage(storage),
                study_name=study_name,
                load_if_exists=bool(load_if_exists),
            )
            break
        except optuna.exceptions.DuplicatedStudyError:
            raise SearchConfigError(
                f"study_name={study_name!r} already exists in storage={_describe(storage)!r} and load_if_exists is "
                "not set; pass load_if_exists=True to continue it, or a new study_name.",
                about="study_name",
            ) from None
        except Exception as error:
            import sqlalchemy.exc

            if not isinstance(error, sqlalchemy.exc.SQLAlchemyError):
                raise
            if attempt + 1 < _CREATE_ATTEMPTS and _lost_creation_race(error):
                logger.debug(
                    "Another worker was creating the storage's tables (%s); opening it again.", error
                )
                time.sleep(0.05 * (attempt + 1) + random.random() * 0.1)
                continue
            raise SearchConfigError(
                f"storage={_describe(storage)!r}: the database did not answer ({type(error).__name__}: "
                f"{redact(str(error)).splitlines()[0]}); check that the server is up and reachable (connections and "
                f"statements wait at most {_storage.CONNECT_TIMEOUT_S} s and {_storage.STATEMENT_TIMEOUT_S} s).",
                about="storage",
            ) from None
    _check_same_search(study, settings, study_name)
    return study


_CREATE_ATTEMPTS = 6
#: What SQLite, PostgreSQL and MySQL say to the worker that lost the race to create Optuna's tables or to stamp
#: their schema version. Not "database is locked": SQLite says that only after its 120 s busy timeout, and six
#: such waits would hide a stuck database for twelve minutes.
_RACE_MESSAGES = ("already exists", "unique constraint failed", "duplicate key", "duplicate entry")


def _lost_creation_race(error: BaseException) -> bool:
    text = str(error).lower()
    return any(message in text for message in _RACE_MESSAGES)


def _check_same_search(study: Any, settings: TrialSettings, study_name: str | None) -> None:
    ours = search_identity(settings)
    stored = study.user_attrs.get(SEARCH_ATTR)
    stored_directions = [d.name.lower() for d in study.directions]
    # The study's own directions are the truth; objective and space come from what the search stored, if anything.
    known = {**(stored if isinstance(stored, dict) else {}), "directions": stored_directions}
    problems = identity_differences(known, ours)
    if problems:
        raise SearchConfigError(
            f"study {study_name!r} in this storage belongs to another search: it has {'; '.join(problems)}. "
            "Reusing it would mix results of different searches; pass a new study_name (or output_dir), or the "
            "same direction, objective and hp_space as the stored study.",
            about="study_name",
        )
    if stored is None:
        if study.get_trials(deepcopy=False) and stored_directions == ours["directions"]:
            logger.info("Study %r was created without a record of its search; continuing it.", study_name)
        study.set_user_attr(SEARCH_ATTR, ours)


def _describe(storage: Any) -> str:
    return _storage.redact_url(storage) if isinstance(storage, str) else type(storage).__name__


def replay_trial(adapter: Any, params: Mapping[str, Any]) -> Any:
    """`SearchBackend.replay_trial`: a FixedTrial, so ``trial.suggest_*(name, ...)`` inside model_init gives the
    configuration's ``params[name]`` when it trains again."""
    import optuna

    return optuna.trial.FixedTrial(dict(params))


def warm_start(study: Any, priors: list[Any], mode: str, space: OptunaSpace | None) -> None:
    """Tell the study the earlier trials (inform), or queue their parameters first (evaluate); once per study."""
    import optuna

    from ...warmstart import prior_records

    marker = _storage.SOURCE_ATTR
    if any(t.user_attrs.get(marker) for t in study.get_trials(deepcopy=False)):
        return  # a rerun of this search: the study has them already
    assert space is not None  # warm_start needs a portable space (checked before the run)
    if mode == "evaluate":
        for prior in priors:
            study.enqueue_trial(space.encode(prior.params), user_attrs={marker: "warm_start_evaluate"})
        return
    trials = []
    for prior, record in zip(priors, prior_records(priors)):
        encoded = space.encode(prior.params)
        values = prior.objective if isinstance(prior.objective, list) else [prior.objective]
        trials.append(
            optuna.trial.create_trial(
                params=encoded,
                distributions={k: space.distributions[k] for k in encoded},
                values=values,
                user_attrs={marker: "warm_start", _storage.RECORD_ATTR: _storage.record_attr(record)},
            )
        )
    study.add_trials(trials)
