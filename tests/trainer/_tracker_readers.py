"""Read a tracker's offline run back from the files its library wrote, into one shape the tests compare.

Each reader returns a list of `Run` (one per run found under a folder): its name, group/tags, parameters, the
metric history {key: {step: value}}, the final state we recorded and the objective. The parsing uses each
library's own formats: W&B's record log (its protobuf ``Record`` messages), Comet's offline archive, Neptune's
offline operation queue, ClearML's offline session, DVCLive's files, CodeCarbon's CSV.
"""

from __future__ import annotations

import glob
import json
import os
import struct
import time
import zipfile
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Run:
    name: str | None = None
    group: str | None = None
    tags: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, dict[int, float]] = field(default_factory=dict)
    state: str | None = None
    objective: Any = None
    closed: bool = False
    raw: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- wandb
def _wandb_records(path: str) -> list[bytes]:
    """The records of a ``.wandb`` file: a 7-byte header, then LevelDB-log blocks of 32 KiB."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    block, pos, records, pending = 32768, 7, [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pos += 7
        if kind == 0 and length == 0:
            pos += left - 7
            continue
        chunk, pos = data[pos : pos + length], pos + length
        if kind == 1:
            records.append(chunk)
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            records.append(pending + chunk)
            pending = b""
    return records


def read_wandb(folder: str, timeout: float = 30.0) -> list[Run]:
    """The W&B runs under ``folder``. W&B's service writes a run's file a moment after ``finish()`` returned, so
    each file is read again until it holds the run's exit record (or ``timeout`` seconds passed)."""
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "offline-run-*", "run-*.wandb"), recursive=True)):
        deadline = time.monotonic() + timeout
        run = _read_wandb_file(path)
        while not run.closed and time.monotonic() < deadline:
            time.sleep(0.2)
            run = _read_wandb_file(path)
        runs.append(run)
    return runs


def _read_wandb_file(path: str) -> Run:
    from wandb.proto import wandb_internal_pb2 as pb

    run = Run(raw={"path": path})
    for data in _wandb_records(path):
        record = pb.Record()
        try:
            record.ParseFromString(data)
        except Exception:  # the last record is still being written
            break
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.name, run.group = record.run.display_name, record.run.run_group
            run.tags = list(record.run.tags)
            run.params.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
            run.raw["project"] = record.run.project
        elif kind == "config":
            run.params.update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
            step = int(items.pop("_step"))
            for key, value in items.items():
                if not key.startswith("_"):
                    run.metrics.setdefault(key, {})[step] = value
        elif kind == "summary":
            for item in record.summary.update:
                key = item.key or "/".join(item.nested_key)
                if key == "hpsearch/state":
                    run.state = json.loads(item.value_json)
                elif key == "objective":
                    run.objective = json.loads(item.value_json)
        elif kind == "artifact":
            artifact = record.artifact
            run.raw.setdefault("artifacts", []).append(
                {
                    "name": artifact.name,
                    "type": artifact.type,
                    "aliases": list(artifact.aliases),
                    "files": sorted(entry.path for entry in artifact.manifest.contents),
                }
            )
        elif kind == "exit":
            run.closed = True
            run.raw["exit_code"] = record.exit.exit_code
    return run


# ---------------------------------------------------------------------------------------------- comet
def read_comet(folder: str) -> list[Run]:
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "*.zip"))):
        with zipfile.ZipFile(path) as archive:
            experiment = json.loads(archive.read("experiment.json"))
            messages = [
                json.loads(line) for line in archive.read("messages.json").decode().splitlines() if line
            ]
        run = Run(tags=list(experiment.get("tags") or []), closed=True, raw={"path": path, **experiment})
        run.group = experiment.get("project_name")
        for message in messages:
            payload = message["payload"]
            if message["type"] == "parameter_msg" and payload["param"]["source"] == "manual":
                run.params[payload["param"]["paramName"]] = payload["param"]["paramValue"]
            elif message["type"] == "metric_msg":
                metric = payload["metric"]
                if metric["metricName"] != "process duration":
                    run.metrics.setdefault(metric["metricName"], {})[int(metric["step"])] = metric[
                        "metricValue"
                    ]
            elif message["type"] == "log_other":
                if payload["key"] == "Name":
                    run.name = payload["value"]
                elif payload["key"] == "hpsearch_state":
                    run.state = payload["value"]
                elif payload["key"] == "objective":
                    run.objective = payload["value"]
        runs.append(run)
    return runs


# ---------------------------------------------------------------------------------------------- neptune
def read_neptune(folder: str) -> list[Run]:
    runs = []
    for run_dir in sorted(glob.glob(os.path.join(folder, "offline", "run__*"))):
        run = Run(raw={"path": run_dir})
        for log in sorted(glob.glob(os.path.join(run_dir, "data-*.log"))):
            with open(log, encoding="utf-8") as f:
                operations = [json.loads(line)["obj"] for line in f if line.strip()]
            for op in operations:
                path = "/".join(op["path"])
                if path == "sys/name":
                    run.name = op["value"]
                elif path == "sys/tags":
                    run.tags += op["values"]
                elif path == "sys/group_tags":
                    run.group = op["values"][0]
                elif path.startswith("parameters/"):
                    run.params[path[len("parameters/") :]] = op["value"]
                elif op["type"] == "LogFloats":
                    for point in op["values"]:
                        run.metrics.setdefault(path, {})[int(point["step"])] = point["value"]
                elif path == "hpsearch/state":
                    run.state = op["value"]
                    run.closed = True
                elif path == "hpsearch/objective":
                    run.objective = op["value"]
                elif path == "sys/failed":
                    run.raw["failed"] = op["value"]
        runs.append(run)
    return runs


# ---------------------------------------------------------------------------------------------- clearml
def read_clearml(session: str) -> Run:
    with open(os.path.join(session, "task.json"), encoding="utf-8") as f:
        task = json.load(f)
    hyper = task.get("hyperparams") or {}
    run = Run(name=task["name"], group=task.get("project_name"), tags=list(task.get("tags") or []), raw=task)
    run.params = {key: entry["value"] for key, entry in (hyper.get("Args") or {}).items()}
    extra = hyper.get("hpsearch") or {}
    run.state = (extra.get("state") or {}).get("value")
    run.objective = (extra.get("objective") or {}).get("value")
    metrics_file = os.path.join(session, "metrics.jsonl")
    if os.path.exists(metrics_file):
        with open(metrics_file, encoding="utf-8") as f:
            for line in f:
                for event in json.loads(line) if line.strip() else []:
                    if event.get("type") == "training_stats_scalar":
                        key = f"{event['metric']}/{event['variant']}"
                        run.metrics.setdefault(key, {})[int(event["iter"])] = event["value"]
    run.closed = os.path.exists(session + ".zip")  # the archive is written when the task closes
    return run


# ---------------------------------------------------------------------------------------------- dvclive
def read_dvclive(folder: str) -> Run:
    import yaml

    run = Run(raw={"path": folder})
    with open(os.path.join(folder, "params.yaml"), encoding="utf-8") as f:
        run.params = yaml.safe_load(f)
    with open(os.path.join(folder, "metrics.json"), encoding="utf-8") as f:
        summary = json.load(f)
    run.state = summary.get("hpsearch_state")
    run.objective = summary.get("objective")
    run.closed = run.state is not None
    plots = os.path.join(folder, "plots", "metrics")
    for path in glob.glob(os.path.join(plots, "**", "*.tsv"), recursive=True):
        key = os.path.relpath(path, plots)[: -len(".tsv")]
        with open(path, encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f][1:]
        run.metrics[key] = {int(step): float(value) for step, value in rows}
    return run


# ---------------------------------------------------------------------------------------------- codecarbon
def read_codecarbon(folder: str) -> Any:
    import pandas as pd

    return pd.read_csv(os.path.join(folder, "emissions.csv"))


def all_bytes_under(folder: str) -> bytes:
    """Every file's content under ``folder``, zip archives opened, as one byte string (to look for secrets)."""
    chunks = []
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            try:
                with open(path, "rb") as f:
                    chunks.append(f.read())
                if zipfile.is_zipfile(path):
                    with zipfile.ZipFile(path) as archive:
                        chunks.extend(archive.read(member) for member in archive.namelist())
            except OSError:
                continue
    return b"\n".join(chunks)
