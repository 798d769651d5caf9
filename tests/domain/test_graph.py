"""The compiled task graph: index, dependencies, downstream, topological order, descendants."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workload_domain.compiler import CompiledWorkflow, compile_definition


def compile_tasks(*tasks: tuple[str, list[str]]) -> CompiledWorkflow:
    return compile_definition(
        {
            "id": "wf",
            "tasks": [{"key": key, "action": "mock", "depends_on": deps} for key, deps in tasks],
        }
    )


@pytest.fixture
def diamond() -> CompiledWorkflow:
    #   a -> b -> d
    #   a -> c -> d      e is independent, f depends on d and e
    return compile_tasks(
        ("a", []),
        ("b", ["a"]),
        ("c", ["a"]),
        ("d", ["c", "b"]),
        ("e", []),
        ("f", ["d", "e"]),
    )


def test_task_keys_and_index(diamond: CompiledWorkflow) -> None:
    assert diamond.task_keys == ("a", "b", "c", "d", "e", "f")
    assert dict(diamond.index) == {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 5}


def test_index_is_read_only(diamond: CompiledWorkflow) -> None:
    with pytest.raises(TypeError):
        diamond.index["z"] = 9  # type: ignore[index]


def test_dependencies_follow_depends_on(diamond: CompiledWorkflow) -> None:
    assert diamond.dependencies == ((), (0,), (0,), (2, 1), (), (3, 4))


def test_downstream_is_the_reverse_of_dependencies(diamond: CompiledWorkflow) -> None:
    assert diamond.downstream == ((1, 2), (3,), (3,), (5,), (5,), ())


def test_topological_order(diamond: CompiledWorkflow) -> None:
    assert diamond.topological_order == (0, 1, 2, 3, 4, 5)


def test_descendants(diamond: CompiledWorkflow) -> None:
    assert diamond.descendants(0) == frozenset({1, 2, 3, 5})
    assert diamond.descendants(1) == frozenset({3, 5})
    assert diamond.descendants(2) == frozenset({3, 5})
    assert diamond.descendants(3) == frozenset({5})
    assert diamond.descendants(4) == frozenset({5})
    assert diamond.descendants(5) == frozenset()


def test_topological_order_puts_dependencies_first_and_ties_in_definition_order() -> None:
    compiled = compile_tasks(
        ("late", ["root"]),
        ("root", []),
        ("other", []),
        ("last", ["late", "other"]),
    )
    assert compiled.topological_order == (1, 0, 2, 3)
    assert [compiled.task_keys[i] for i in compiled.topological_order] == [
        "root",
        "late",
        "other",
        "last",
    ]


def test_reverse_chain_is_ordered_backwards() -> None:
    n = 20
    compiled = compile_tasks(*((f"t{i}", [f"t{i + 1}"] if i < n - 1 else []) for i in range(n)))
    assert compiled.topological_order == tuple(range(n - 1, -1, -1))
    assert compiled.descendants(n - 1) == frozenset(range(n - 1))


def test_independent_tasks_keep_definition_order() -> None:
    compiled = compile_tasks(("z", []), ("y", []), ("x", []))
    assert compiled.topological_order == (0, 1, 2)
    assert compiled.dependencies == ((), (), ())
    assert compiled.downstream == ((), (), ())
    assert all(compiled.descendants(i) == frozenset() for i in range(3))


def test_a_thousand_task_chain() -> None:
    n = 1000
    compiled = compile_tasks(*((f"t{i}", [f"t{i - 1}"] if i else []) for i in range(n)))
    assert compiled.topological_order == tuple(range(n))
    assert compiled.descendants(0) == frozenset(range(1, n))
    assert compiled.downstream[n - 1] == ()


def test_wide_fan_in() -> None:
    n = 1000
    tasks: list[tuple[str, list[str]]] = [(f"t{i}", []) for i in range(n - 1)]
    tasks.append(("sink", [f"t{i}" for i in range(n - 1)]))
    compiled = compile_tasks(*tasks)
    assert compiled.dependencies[-1] == tuple(range(n - 1))
    assert compiled.topological_order == tuple(range(n))
    assert all(compiled.descendants(i) == frozenset({n - 1}) for i in range(n - 1))


@st.composite
def dags(draw: st.DrawFn) -> dict[str, Any]:
    """A random DAG whose tasks are listed in a random order (not necessarily topological)."""
    n = draw(st.integers(1, 12))
    rank = draw(st.permutations(range(n)))  # rank[i] < rank[j] is required for i -> j edges
    tasks = []
    for i in range(n):
        lower = [j for j in range(n) if rank[j] < rank[i]]
        deps = draw(st.lists(st.sampled_from(lower), unique=True, max_size=4)) if lower else []
        tasks.append({"key": f"k{i}", "action": "mock", "depends_on": [f"k{j}" for j in deps]})
    return {"id": "wf", "tasks": tasks}


@settings(max_examples=50, deadline=None, derandomize=True)
@given(raw=dags())
def test_graph_properties(raw: dict[str, Any]) -> None:
    compiled = compile_definition(raw)
    n = len(raw["tasks"])
    assert sorted(compiled.topological_order) == list(range(n))
    position = {task: p for p, task in enumerate(compiled.topological_order)}
    for i, deps in enumerate(compiled.dependencies):
        assert [compiled.task_keys[d] for d in deps] == raw["tasks"][i]["depends_on"]
        for d in deps:
            assert position[d] < position[i]
            assert i in compiled.downstream[d]
    for i, down in enumerate(compiled.downstream):
        assert list(down) == sorted(down)
        for j in down:
            assert i in compiled.dependencies[j]
    # Ties in definition order: at each step the smallest ready index comes first.
    done: set[int] = set()
    for task in compiled.topological_order:
        ready = [i for i in range(n) if i not in done and set(compiled.dependencies[i]) <= done]
        assert task == min(ready)
        done.add(task)
    # Descendants are the transitive closure of downstream.
    for i in range(n):
        closure: set[int] = set()
        frontier = set(compiled.downstream[i])
        while frontier:
            closure |= frontier
            frontier = {j for f in frontier for j in compiled.downstream[f]} - closure
        assert compiled.descendants(i) == closure
