"""Compatibility import: the logging integrations live in `trainer.integrations` (one module per tracker)."""

from __future__ import annotations

from .integrations import (
    INTEGRATIONS,
    JsonlCallback,
    MLflowCallback,
    TensorBoardCallback,
    get_available_reporting_integrations,
    get_reporting_integration_callbacks,
    is_mlflow_available,
    is_tensorboard_available,
)

__all__ = [
    "INTEGRATIONS",
    "JsonlCallback",
    "MLflowCallback",
    "TensorBoardCallback",
    "get_available_reporting_integrations",
    "get_reporting_integration_callbacks",
    "is_mlflow_available",
    "is_tensorboard_available",
]
