"""Build the graph of functions and variables behind some outputs, and dump it as Graphviz dot."""
from typing import Any, Iterable, List, Optional, Tuple

from .function import Function
from .variable import Variable

__all__ = ["ComputationalGraph", "DotNode", "build_computational_graph"]


def _dot_attrs(attrs: dict) -> str:
    parts = []
    for key, value in attrs.items():
        text = str(value).replace("\\", "\\\\").replace('"', '\\"')
        parts.append(f'{key}="{text}"')
    return ",".join(parts)


class DotNode:
    """One node (a Variable or a Function) of a graph, as a line of Graphviz dot."""

    def __init__(self, node: Any) -> None:
        if not isinstance(node, (Variable, Function)):
            raise TypeError(f"DotNode: expected a Variable or a Function, got {type(node).__name__}.")
        self.node = node
        self.id_ = id(node)
        self.attribute = {"label": node.label, "shape": "oval" if isinstance(node, Variable) else "box"}

    @property
    def label(self) -> str:
        """The node's dot statement: `<id> [label="...",shape="..."];`."""
        return f"{self.id_} [{_dot_attrs(self.attribute)}];"


class ComputationalGraph:
    """Nodes (Variables and Functions) and edges (pairs of nodes) of a computational graph."""

    def __init__(
        self,
        nodes: Iterable[Any],
        edges: Iterable[Tuple[Any, Any]],
        variable_style: Optional[dict] = None,
        function_style: Optional[dict] = None,
        rankdir: str = "TB",
    ) -> None:
        self.nodes = list(nodes)
        self.edges = list(edges)
        # Without styles or a direction (all Chainer 1.7.2 has), dump() writes 1.7.2's text;
        # with any of them, later Chainer's (styled nodes, named variables, rankdir).
        self._styled = variable_style is not None or function_style is not None or rankdir != "TB"
        self.variable_style = dict(variable_style or {"shape": "octagon", "fillcolor": "#E0E0E0", "style": "filled"})
        self.function_style = dict(function_style or {"shape": "record", "fillcolor": "#6495ED", "style": "filled"})
        if rankdir not in ("TB", "BT", "LR", "RL"):
            raise ValueError(f"ComputationalGraph: rankdir must be one of TB, BT, LR, RL, got {rankdir!r}.")
        self.rankdir = rankdir

    def _to_dot(self) -> str:
        if not self._styled:
            # Chainer 1.7.2's text: one line, `<id> [label="...",shape="oval|box"];` per node, then edges.
            return ("digraph graphname{"
                    + "".join(DotNode(node).label for node in self.nodes)
                    + "".join(f"{id(head)} -> {id(tail)};" for head, tail in self.edges)
                    + "}")
        lines = ["digraph graphname{", f"rankdir={self.rankdir};"]
        for node in self.nodes:
            style = self.variable_style if isinstance(node, Variable) else self.function_style
            label = node.label
            if isinstance(node, Variable) and node.name:
                label = f"{node.name}: {label}"
            attrs = dict(style, label=label)
            lines.append(f"{id(node)} [{_dot_attrs(attrs)}];")
        for head, tail in self.edges:
            lines.append(f"{id(head)} -> {id(tail)};")
        lines.append("}")
        return "\n".join(lines)

    def dump(self, format: str = "dot") -> str:  # noqa: A002 - chainer's argument name
        """The graph as text in the given format (only 'dot' is supported)."""
        if format != "dot":
            raise NotImplementedError(
                f"ComputationalGraph.dump: format {format!r} is not supported; use 'dot'."
            )
        return self._to_dot()

    def __str__(self) -> str:
        return self.dump()


def build_computational_graph(
    outputs: Iterable[Any],
    remove_split: bool = True,
    variable_style: Optional[dict] = None,
    function_style: Optional[dict] = None,
    rankdir: str = "TB",
) -> ComputationalGraph:
    """The graph of everything backward-reachable from outputs (Variables or Functions).

    Edges go input variable -> function -> output variable. Traversal stops at variables
    whose history was cut with unchain_backward. remove_split is accepted either way: plait
    builds no Split functions.
    """
    # remove_split=False kept Chainer 1.7.2's Split functions in the graph; plait has none to keep.
    nodes: List[Any] = []
    seen = set()
    edges = []
    edge_seen = set()
    stack: List[Any] = []

    def visit(node: Any) -> None:
        if id(node) not in seen:
            seen.add(id(node))
            nodes.append(node)
            stack.append(node)

    def add_edge(a: Any, b: Any) -> None:
        key = (id(a), id(b))
        if key not in edge_seen:
            edge_seen.add(key)
            edges.append((a, b))

    for out in outputs:
        if not isinstance(out, (Variable, Function)):
            raise TypeError(
                f"build_computational_graph: outputs must be Variables or Functions, got {type(out).__name__}."
            )
        visit(out)
    while stack:
        node = stack.pop()
        if isinstance(node, Variable):
            creator = node.creator
            if creator is not None:
                add_edge(creator, node)
                visit(creator)
        else:
            for x in getattr(node, "inputs", None) or ():
                add_edge(x, node)
                visit(x)
    return ComputationalGraph(nodes, edges, variable_style, function_style, rankdir)
