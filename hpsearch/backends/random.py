"""A random-search backend with no engine to install: trials drawn from a portable space, in this process.

It is the smallest complete backend (one module and one registry line), used by the contract tests to show
the shared rules without any engine, and useful as a baseline. Parameters are drawn with `SearchSpace.sample`
from a generator seeded by ``seed`` (default: the trainer's ``args.seed``), so a search is repeatable. Nothing
prunes: every trial trains to its end.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from .. import _lockstep
from ..errors import SearchConfigError
from ..executor import run_each
from ..settings import Option
from ..trial import NullReporter, Trial, TrialState
from .base import SearchBackend, call_native_space

if TYPE_CHECKING:
    from spaces import SearchSpace

    from ..session import SearchSession

__all__ = ["RandomBackend"]


class RandomBackend(SearchBackend):
    name = "random"
    requirement = "spaces"
    distribution = "hpsearch"
    install_command = "pip install hpsearch"
    auto_select = False  # never chosen silently in place of a real optimizer
    warm_start_modes = ("evaluate",)  # random search does not learn from earlier trials: no "inform"
    can_resume = True
    resume_hint = "resume=True"
    options = (
        Option("seed", (int,), "seed of the parameter draws (default: the trainer's args.seed)"),
        Option(
            "resume",
            (bool,),
            "continue the interrupted search in output_dir (its search.json): its finished "
            "trials are kept, the others run with the parameters they would have had",
        ),
    )

    @staticmethod
    def default_space(trial: Any = None) -> SearchSpace:
        from spaces import default_space

        return default_space()

    def is_native_space(self, hp_space: Any) -> bool:
        if callable(hp_space) and not hasattr(hp_space, "items"):
            try:
                call_native_space(
                    hp_space, self.name
                )  # names the backend a trial.suggest_* function was written for
            except SearchConfigError:
                raise
            except Exception:
                pass
            raise SearchConfigError(
                "backend='random' takes a portable hp_space (a spaces.SearchSpace or a dict of spaces domains), "
                f"not a callable ({hp_space!r}); it has no native space form."
            )
        return False

    def convert_space(self, space: SearchSpace) -> SearchSpace:
        return space

    def validate(self) -> None:
        seed = self.kwargs.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise SearchConfigError(f"seed must be an integer or None, got {seed!r}; pass e.g. seed=0.")

    def run(self, session: SearchSession, native_space: Any) -> None:
        settings = self.settings
        if _lockstep.is_follower():
            _lockstep.follow(settings, session)
            return
        space = settings.space
        assert space is not None  # a portable space: is_native_space refuses everything else
        seed = self.kwargs.get("seed")
        rng = random.Random(settings.trainer.args.seed if seed is None else seed)
        done = self._resumed(session)
        first = [dict(p.params) for p in self.priors][
            : session.n_trials
        ]  # warm_start "evaluate": these first
        # Drawn here, in order, whatever order the trials end in: the same seed gives the same trials. A resumed
        # run draws its finished trials all the same, so the trials after them get the parameters they would have had.
        drawn = ((n, first[n] if n < len(first) else space.sample(rng)) for n in range(session.n_trials))
        trials = (Trial(str(n), n, params, self.name) for n, params in drawn if n not in done)
        try:
            run_each(
                self.executor.slots,
                trials,
                lambda trial: self.executor.run(settings, trial, NullReporter()),
                session.record,
                lambda: session.stop_reason is not None,
                before=lambda trial: _lockstep.announce(_lockstep.lead(trial)),
            )
        finally:
            _lockstep.announce_end()
        session.save()

    def _resumed(self, session: SearchSession) -> set[int]:
        """With ``resume=True``, the trials the earlier run finished (kept in the results): their numbers."""
        if not self.kwargs.get("resume"):
            return set()
        kept = [
            r
            for r in session.saved_records()
            if r.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
        ]
        session.adopt(kept)
        return {r.number for r in kept}
