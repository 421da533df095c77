"""`DataclassArgumentParser`: command-line, dict, JSON and YAML front ends for configuration dataclasses.

One ``--field_name`` option is generated per init field of each dataclass, from its type hints. Parsed values
go straight to the dataclass constructor, so whatever the dataclass validates (e.g. ``TrainingArguments``)
is validated for every source the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import shlex
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union

__all__ = ["DataclassArgumentParser"]

_TRUE = ("true", "yes", "y", "t", "on", "1")
_FALSE = ("false", "no", "n", "f", "off", "0")


def _str_to_bool(text: str) -> bool:
    if isinstance(text, bool):
        return text
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(
        f"expected a boolean ({'/'.join(_TRUE[:3] + ('1',))} or {'/'.join(_FALSE[:3] + ('0',))}), got {text!r}"
    )


_str_to_bool.__name__ = "bool"


def _json_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"key\": 1}}', got {text!r} ({error})"
        ) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"key\": 1}}', got {text!r}")
    return value


_json_dict.__name__ = "JSON object"


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) is Union or isinstance(tp, types.UnionType)


def _public_init_fields(dtype: type) -> list[dataclasses.Field]:
    # Leading-underscore fields are private bookkeeping (e.g. TrainingArguments._derived), never options. In
    # __init__'s order: keyword-only fields (a base's come first in fields()) last.
    fields = sorted(dataclasses.fields(dtype), key=lambda f: f.kw_only is True)
    return [f for f in fields if f.init and not f.name.startswith("_")]


def _existing(path: Path, given_by: str) -> Path:
    if not path.is_file():
        raise ValueError(
            f"{given_by} names the argument file {os.fspath(path)!r}, which does not exist; pass the path "
            "of a file of command-line arguments."
        )
    return path


class DataclassArgumentParser(argparse.ArgumentParser):
    """An ``argparse.ArgumentParser`` whose options are the fields of one or more dataclasses.

    Type hints map to options as follows (``X | None`` / ``Optional[X]`` behave as ``X``):

    - ``bool``: ``--flag`` (alone means True) or ``--flag true/false/yes/no/1/0``; a field defaulting to
      True also gets ``--no_flag``.
    - str-valued ``Enum`` and ``Literal[...]``: a choice among the values.
    - ``list[X]``: one or more values (``nargs="+"``).
    - ``dict``: a JSON object string, parsed to a dict.
    - ``int``, ``float``, ``str`` and other one-argument callables: converted with that type.
    - A union of several types uses the list, then the Enum among them, else passes the string through
      (the dataclass then validates and converts it).

    A dataclass with an ``_argument_group_name`` class attribute gets its options under a help group of that
    title (with several dataclasses, each is grouped under its class name otherwise).

    A field without a default is a required option. Help comes from ``field(metadata={"help": ...})``.
    Both ``--field_name`` and ``--field-name`` are accepted. Options not given on the command line are
    left out, so the dataclass's own defaults (including ``default_factory``) apply.

    Prefix abbreviations (``--learn`` for ``--learning_rate``) are off unless ``allow_abbrev=True`` is
    passed: a typo should not silently select another option.
    """

    def __init__(self, dataclass_types: type | Iterable[type], **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(**kwargs)
        if isinstance(dataclass_types, type) or dataclasses.is_dataclass(dataclass_types):
            # One type (a dataclass instance lands here too and is rejected below with a clear message).
            dataclass_types = [dataclass_types]
        self.dataclass_types: list[type] = list(dataclass_types)
        if not self.dataclass_types:
            raise ValueError(
                "dataclass_types must name at least one dataclass type, got none; pass e.g. [MyArgs]."
            )
        seen: dict[str, str] = {}
        for dtype in self.dataclass_types:
            if not (isinstance(dtype, type) and dataclasses.is_dataclass(dtype)):
                raise ValueError(
                    f"dataclass_types must contain dataclass types, got {dtype!r}; decorate it with "
                    "@dataclasses.dataclass and pass the class, not an instance."
                )
            for f in _public_init_fields(dtype):
                if f.name in seen:
                    raise ValueError(
                        f"Field {f.name!r} is defined by both {seen[f.name]} and {dtype.__name__}; "
                        "rename one of them (each field becomes one command-line option)."
                    )
                seen[f.name] = dtype.__name__
            self._add_dataclass_arguments(dtype)

    # ------------------------------------------------------------------------------------------------------

    def _add_dataclass_arguments(self, dtype: type) -> None:
        try:
            hints = typing.get_type_hints(dtype)
        except NameError as error:
            raise ValueError(
                f"Cannot resolve the type hints of {dtype.__name__} ({error}); with `from __future__ import "
                "annotations` every name used in a hint must be importable at module level (not only under "
                "TYPE_CHECKING, and the class must not be defined inside a function)."
            ) from error
        title = getattr(
            dtype, "_argument_group_name", None
        )  # transformers' way to name a dataclass's help group
        if title is None and len(self.dataclass_types) > 1:
            title = dtype.__name__
        group = self.add_argument_group(title) if title is not None else self
        for f in _public_init_fields(dtype):
            self._add_field(group, f, hints[f.name])

    def _add_field(self, group: Any, f: dataclasses.Field, tp: Any) -> None:
        names = [f"--{f.name}"]
        if "_" in f.name:
            names.append(f"--{f.name.replace('_', '-')}")
        kwargs: dict[str, Any] = {"dest": f.name}

        if _is_union(tp):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
            else:
                lists = [a for a in members if typing.get_origin(a) is list]
                enums = [a for a in members if isinstance(a, type) and issubclass(a, enum.Enum)]
                tp = lists[0] if lists else enums[0] if enums else str

        origin = typing.get_origin(tp)
        if tp is bool:
            kwargs.update(type=_str_to_bool, nargs="?", const=True, metavar="{true,false}")
        elif isinstance(tp, type) and issubclass(tp, enum.Enum):
            kwargs.update(type=str, choices=[m.value for m in tp])
        elif origin is Literal:
            choices = list(typing.get_args(tp))
            kwargs.update(type=type(choices[0]), choices=choices)
        elif origin is list or tp is list:
            item = (typing.get_args(tp) or (str,))[0]
            kwargs["nargs"] = "+"
            if isinstance(item, type) and issubclass(item, enum.Enum):
                kwargs.update(type=str, choices=[m.value for m in item])
            elif item is bool:
                kwargs["type"] = _str_to_bool
            else:
                kwargs["type"] = item if callable(item) else str
        elif origin is dict or tp is dict:
            kwargs["type"] = _json_dict
        elif tp is Any:
            kwargs["type"] = str
        elif callable(tp):
            kwargs["type"] = tp
        else:
            raise ValueError(
                f"Cannot build a command-line option for field {f.name!r} of type {tp!r}; give it a simpler "
                "type (bool, int, float, str, an Enum, a Literal, list[X] or dict)."
            )

        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        help_text = f.metadata.get("help", "")
        if default is dataclasses.MISSING:
            kwargs["required"] = True
        else:
            # Absent options stay absent, so the dataclass builds its own (possibly mutable) default.
            kwargs["default"] = argparse.SUPPRESS
            shown = default.value if isinstance(default, enum.Enum) else default
            help_text = f"{help_text} (default: {shown!r})".strip()
        kwargs["help"] = help_text.replace("%", "%%")
        group.add_argument(*names, **kwargs)

        if tp is bool and default is True:
            no_names = [f"--no_{f.name}"] + ([f"--no-{f.name.replace('_', '-')}"] if "_" in f.name else [])
            group.add_argument(
                *no_names,
                dest=f.name,
                action="store_false",
                default=argparse.SUPPRESS,
                help=f"Set {f.name} to False.",
            )

    # ------------------------------------------------------------------------------------------------------

    def parse_args_into_dataclasses(
        self,
        args: Sequence[str] | None = None,
        return_remaining_strings: bool = False,
        look_for_args_file: bool = True,
        args_filename: str | os.PathLike[str] | None = None,
        args_file_flag: str | None = None,
    ) -> tuple[Any, ...]:
        """Parse command-line strings into one instance per dataclass type, in order.

        Args:
            args: The strings to parse; None means ``sys.argv[1:]``.
            return_remaining_strings: Return the strings no option consumed as a last element instead of
                raising ValueError for them.
            look_for_args_file: Read ``<script>.args`` beside the running script (``sys.argv[0]``) when it exists,
                as transformers does; ignored when ``args_filename`` is given.
            args_filename: A file of extra arguments (shell-quoted, any layout), read instead of ``<script>.args``.
            args_file_flag: An option (e.g. ``"--args_file"``) naming more such files on the command line; it may be
                repeated, and later files override earlier ones.

        Argument files are read before the command line, so the command line overrides them (the last value of an
        option wins). A file named by ``args_filename`` or ``args_file_flag`` must exist.

        Returns:
            The dataclass instances; then an ``argparse.Namespace`` if arguments added with ``add_argument``
            remain; then the list of remaining strings if ``return_remaining_strings``.
        """
        strings = list(sys.argv[1:] if args is None else args)
        files: list[Path] = []
        if args_filename is not None:
            files.append(_existing(Path(args_filename), "args_filename"))
        elif look_for_args_file and sys.argv and sys.argv[0]:
            beside = Path(sys.argv[0]).with_suffix(".args")
            if beside.is_file():
                files.append(beside)
        if args_file_flag is not None:
            flag_parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
            flag_parser.add_argument(args_file_flag, dest="files", action="append", default=[])
            found, strings = flag_parser.parse_known_args(strings)
            files += [_existing(Path(path), args_file_flag) for path in found.files]
        strings = [s for path in files for s in shlex.split(path.read_text(), comments=True)] + strings
        namespace, remaining = self.parse_known_args(strings)
        outputs: list[Any] = []
        for dtype in self.dataclass_types:
            names = {f.name for f in _public_init_fields(dtype)}
            values = {name: value for name, value in vars(namespace).items() if name in names}
            for name in values:
                delattr(namespace, name)
            outputs.append(dtype(**values))
        if vars(namespace):
            outputs.append(namespace)
        if return_remaining_strings:
            return (*outputs, remaining)
        if remaining:
            raise ValueError(
                f"Unknown command-line arguments: {remaining}; remove them (see --help for the accepted options) "
                "or pass return_remaining_strings=True to receive them."
            )
        return tuple(outputs)

    def parse_dict(self, data: Mapping[str, Any], allow_extra_keys: bool = False) -> tuple[Any, ...]:
        """Build one instance per dataclass type from a flat dict of field values.

        Keys that are no dataclass field raise ValueError unless ``allow_extra_keys`` (then they are ignored).
        """
        if not isinstance(data, Mapping):
            raise ValueError(
                f"parse_dict needs a dict of field values, got {type(data).__name__}; pass a dict."
            )
        accepted = [f.name for dtype in self.dataclass_types for f in _public_init_fields(dtype)]
        unknown = [key for key in data if key not in accepted]
        if unknown and not allow_extra_keys:
            raise ValueError(
                f"Unknown keys {unknown}; remove them or pass allow_extra_keys=True. "
                f"Accepted keys: {', '.join(accepted)}."
            )
        outputs = []
        for dtype in self.dataclass_types:
            names = {f.name for f in _public_init_fields(dtype)}
            outputs.append(dtype(**{key: value for key, value in data.items() if key in names}))
        return tuple(outputs)

    def parse_json_file(
        self, path: str | os.PathLike[str], allow_extra_keys: bool = False
    ) -> tuple[Any, ...]:
        """:meth:`parse_dict` of a JSON file holding one object."""
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, dict):
            raise ValueError(
                f"{os.fspath(path)} must hold a JSON object of field values, got {type(data).__name__}."
            )
        return self.parse_dict(data, allow_extra_keys=allow_extra_keys)

    def parse_yaml_file(
        self, path: str | os.PathLike[str], allow_extra_keys: bool = False
    ) -> tuple[Any, ...]:
        """:meth:`parse_dict` of a YAML file holding one mapping."""
        import yaml  # lazy: only YAML configs need it

        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError(
                f"{os.fspath(path)} must hold a YAML mapping of field values, got {type(data).__name__}."
            )
        return self.parse_dict(data, allow_extra_keys=allow_extra_keys)
