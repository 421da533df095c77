"""CodeCarbon: an offline emissions tracker per training (``emissions.csv``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ._base import TrackerCallback, run_name

if TYPE_CHECKING:
    from .._callbacks import TrainerState
    from .._training_args import TrainingArguments

#: The country whose energy mix prices the emissions when neither the argument nor the environment names one.
DEFAULT_COUNTRY_ISO_CODE = "USA"


class CodeCarbonCallback(TrackerCallback):
    """Measures a training's energy and emissions with CodeCarbon's offline tracker (no network look-ups).

    ``country_iso_code`` (3 letters) comes from the argument, else ``CODECARBON_COUNTRY_ISO_CODE``, else
    ``"USA"`` (`DEFAULT_COUNTRY_ISO_CODE`); ``CODECARBON_OUTPUT_DIR`` (default ``output_dir``) holds
    ``emissions.csv``, whose ``project_name`` is ``CODECARBON_PROJECT_NAME`` or the run's name (the trial during
    a search). A row is written at every logging step (the emissions so far) and one when the run ends. CodeCarbon
    has no parameters nor run states: the tracker is stopped whatever the trial's end, nothing keeps running.
    """

    name = "codecarbon"
    module = "codecarbon"
    extra = "codecarbon"

    _tracker: Any = None

    def __init__(self, country_iso_code: str | None = None) -> None:
        super().__init__()
        code = country_iso_code or os.environ.get("CODECARBON_COUNTRY_ISO_CODE") or DEFAULT_COUNTRY_ISO_CODE
        if not (isinstance(code, str) and len(code) == 3 and code.isalpha()):
            raise ValueError(
                f"country_iso_code must be a 3-letter ISO 3166 code such as 'USA' or 'FRA', got {code!r}; "
                "pass CodeCarbonCallback(country_iso_code=...) or set CODECARBON_COUNTRY_ISO_CODE."
            )
        self.country_iso_code = code.upper()

    def _open(self, args: TrainingArguments, state: TrainerState) -> None:
        from codecarbon import OfflineEmissionsTracker

        folder = os.environ.get("CODECARBON_OUTPUT_DIR") or args.output_dir
        os.makedirs(folder, exist_ok=True)
        self.output_dir = folder
        self._tracker = OfflineEmissionsTracker(
            country_iso_code=self.country_iso_code,
            output_dir=folder,
            project_name=os.environ.get("CODECARBON_PROJECT_NAME") or run_name(args, state),
            save_to_file=True,
            log_level="error",
            tracking_mode="process",
            allow_multiple_runs=True,
        )
        self._tracker.start()

    def _log(self, metrics: dict[str, float], step: int) -> None:
        self._tracker.flush()

    def _finish(self, final_state: str, objective: float | list[float] | None) -> None:
        tracker, self._tracker = self._tracker, None
        tracker.stop()

    def _run_attributes(self) -> tuple[str, ...]:
        return ("_tracker",)
