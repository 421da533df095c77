"""Reading a sweep file's YAML safely: bounded alias expansion, no recursive aliases, no duplicate keys.

PyYAML's safe loader shares the node of an anchor with every alias of it, so composing is linear in the text, but
anything that then walks the data (the schema, the line finder, a backend) sees every alias expanded: a 1 KB
"billion laughs" file is 10^9 nodes to walk. The composer below counts the nodes the document has once aliases
are expanded and refuses it past `MAX_NODES` (or nested past `MAX_DEPTH`), at the line where the limit is
crossed; an alias used inside its own anchor (a recursive document) and a key given twice in one mapping (PyYAML
silently keeps the last) are refused too. Each problem is a `YAMLProblem` carrying its line.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["MAX_CHARS", "MAX_DEPTH", "MAX_NODES", "YAMLProblem", "key_lines", "load"]

#: Nodes a document may have once every alias is expanded (a sweep file has a few hundred).
MAX_NODES = 10_000
#: Characters of text the values may hold once every alias is expanded (a sweep file has a few thousand): a long
#: string repeated by thousands of aliases stays under `MAX_NODES` but would be copied into every message and check.
MAX_CHARS = 1_000_000
#: How deeply collections may nest.
MAX_DEPTH = 64

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YAMLProblem(Exception):
    """A document that is not valid YAML, or that the loader refuses; ``line`` is 1-based (None: unknown)."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


class _Loader(yaml.SafeLoader):
    """A safe loader that reads ``1e-5`` as a float (YAML 1.1 wants ``1.0e-5``; people write ``1e-5``), and
    composes with the limits of this module."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded = 0  # nodes so far with aliases expanded
        self._chars = 0  # characters of their scalars
        self._depth = 0
        self._sizes: dict[
            int, tuple[int, int]
        ] = {}  # id(node) -> its expanded (nodes, characters), once complete

    def _grow(self, count: int, chars: int, mark: Any) -> None:
        self._expanded += count
        self._chars += chars
        if self._expanded > MAX_NODES:
            raise YAMLProblem(
                f"the document expands to more than {MAX_NODES:,} values once its aliases (*name) are expanded "
                "(nested aliases, as in a 'billion laughs' file?); write the values out or use fewer aliases.",
                mark.line + 1,
            )
        if self._chars > MAX_CHARS:
            raise YAMLProblem(
                f"the document's values hold more than {MAX_CHARS:,} characters once its aliases (*name) are "
                "expanded (a long text repeated by aliases?); a sweep file needs far less: shorten the values or use "
                "fewer aliases.",
                mark.line + 1,
            )

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None:
                size = self._sizes.get(id(target))
                if size is None:  # the anchor's node is still being composed: it contains itself
                    raise YAMLProblem(
                        f"the alias *{event.anchor} is used inside the value it names (&{event.anchor}), which makes "
                        "the document recursive; write the value out instead.",
                        event.start_mark.line + 1,
                    )
                self._grow(*size, event.start_mark)
            return super().compose_node(parent, index)  # an undefined alias is PyYAML's own error
        event = self.peek_event()
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YAMLProblem(
                f"values are nested more than {MAX_DEPTH} levels deep; flatten the document.",
                event.start_mark.line + 1,
            )
        before, before_chars = self._expanded, self._chars
        self._grow(1, 0, event.start_mark)
        node = super().compose_node(parent, index)
        if isinstance(node, yaml.ScalarNode):
            self._grow(0, len(node.value), event.start_mark)
        self._depth -= 1
        self._sizes[id(node)] = (self._expanded - before, self._chars - before_chars)
        return node

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        seen: dict[tuple[str, str], int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            line = key_node.start_mark.line + 1
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise YAMLProblem(
                    f"duplicate key {key_node.value!r} (lines {seen[key]} and {line}); YAML would silently keep "
                    "the last one, so delete or rename one of them.",
                    line,
                )
            seen[key] = line
        return node


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def load(text: str) -> tuple[Any, yaml.Node | None]:
    """(the data, the composed root node or None for an empty document); `YAMLProblem` for anything wrong."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # reads the first characters: a control character is refused here
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or str(error)
        raise YAMLProblem(
            f"invalid YAML: {problem}; fix the syntax (indentation, colons, quotes) at this line.",
            None if mark is None else mark.line + 1,
        ) from None
    except yaml.reader.ReaderError as error:  # a character YAML does not allow (a control character, a NUL)
        raise YAMLProblem(
            f"invalid YAML: the character {_character(error.character)} is not allowed in a YAML file; remove it.",
            text.count("\n", 0, error.position) + 1,
        ) from None
    except yaml.YAMLError as error:
        raise YAMLProblem(f"invalid YAML: {error}.", None) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, root


def _character(value: Any) -> str:
    return f"{chr(value)!r} (U+{value:04X})" if isinstance(value, int) else repr(value)


def key_lines(root: yaml.Node | None) -> dict[tuple[Any, ...], int]:
    """The 1-based line of every key (and list item) of a composed document, by its path of keys and indexes.

    The walk sees aliases expanded, which `load` has bounded. A key given by a merge (``<<: *base``) keeps the
    line of the mapping that merges it.
    """
    lines: dict[tuple[Any, ...], int] = {}
    if root is None:
        return lines
    lines[()] = root.start_mark.line + 1
    # (node, its path, whether it came from a merge: an explicit key wins over a merged one, as in the data)
    stack: list[tuple[yaml.Node, tuple[Any, ...], bool]] = [(root, (), False)]
    while stack:
        node, prefix, merged = stack.pop()
        children: list[tuple[Any, yaml.Node, yaml.Node]] = []
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _MERGE_TAG:
                    stack.extend((m, prefix, True) for m in _merged(value_node))
                else:
                    children.append(
                        (
                            key_node.value if isinstance(key_node, yaml.ScalarNode) else None,
                            key_node,
                            value_node,
                        )
                    )
        elif isinstance(node, yaml.SequenceNode):
            children = [(i, item, item) for i, item in enumerate(node.value)]
        for key, mark_node, value_node in children:
            path = (*prefix, key)
            if merged:
                lines.setdefault(path, mark_node.start_mark.line + 1)
            else:
                lines[path] = mark_node.start_mark.line + 1
            stack.append((value_node, path, merged))
    return lines


def _merged(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return [n for n in node.value if isinstance(n, yaml.MappingNode)]
    return [node] if isinstance(node, yaml.MappingNode) else []
