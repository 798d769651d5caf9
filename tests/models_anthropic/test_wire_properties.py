"""Properties of the Messages API mapping over any conversation (no server: pure functions)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from workload_domain.agent.llm import Message, ModelRequest, Role, ToolCall, ToolSchema
from workload_model_anthropic._wire import ANSWER_TOOL, wire_messages, wire_request

TEXT = st.one_of(st.none(), st.text(max_size=20))
ARGUMENTS: st.SearchStrategy[Any] = st.one_of(
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.lists(st.integers(), max_size=3),
    st.text(max_size=10),
    st.integers(),
    st.none(),
)
CALL = st.builds(ToolCall, st.text(min_size=1, max_size=8), st.text(max_size=8), ARGUMENTS)
MESSAGE = st.one_of(
    st.builds(Message, st.sampled_from([Role.SYSTEM, Role.USER]), TEXT),
    st.builds(Message, st.just(Role.ASSISTANT), TEXT, st.lists(CALL, max_size=3).map(tuple)),
    st.builds(Message, st.just(Role.TOOL), TEXT, st.just(()), st.text(min_size=1, max_size=8)),
)
CONVERSATION = st.lists(MESSAGE, max_size=12).map(tuple)


def wired_of(conversation: tuple[Message, ...]) -> tuple[str | None, list[Any]]:
    """``wire_messages`` with the messages untyped (the tests index them freely)."""
    system, wired = wire_messages(conversation)
    return system, list(wired)


def _is_results(wired: Any) -> bool:
    content = wired["content"]
    return isinstance(content, list) and all(b["type"] == "tool_result" for b in content)


@given(CONVERSATION)
def test_every_message_is_sent_once_in_order(conversation: tuple[Message, ...]) -> None:
    system, wired = wired_of(conversation)

    texts = [m.content for m in conversation if m.role is Role.SYSTEM and m.content]
    assert system == ("\n\n".join(texts) if texts else None)
    results = [b for w in wired if _is_results(w) for b in w["content"]]
    tools = [m for m in conversation if m.role is Role.TOOL]
    assert [b["tool_use_id"] for b in results] == [m.tool_call_id for m in tools]
    assert [b.get("content", "") for b in results] == [m.content or "" for m in tools]
    others = [m for m in conversation if m.role in (Role.USER, Role.ASSISTANT)]
    assert [w["role"] for w in wired if not _is_results(w)] == [m.role.value for m in others]


@given(CONVERSATION)
@example(  # a system message between results (found by this test) splits them no more
    (
        Message(Role.TOOL, "1", tool_call_id="a"),
        Message(Role.SYSTEM, "Be brief."),
        Message(Role.TOOL, "2", tool_call_id="b"),
    )
)
def test_consecutive_tool_results_share_one_user_message(
    conversation: tuple[Message, ...],
) -> None:
    _, wired = wired_of(conversation)

    assert all(w["role"] == "user" for w in wired if _is_results(w))
    pairs = itertools.pairwise(wired)
    assert not [pair for pair in pairs if _is_results(pair[0]) and _is_results(pair[1])]


@given(CONVERSATION)
def test_every_tool_use_input_is_an_object(conversation: tuple[Message, ...]) -> None:
    _, wired = wired_of(conversation)

    uses = [
        block
        for w in wired
        if w["role"] == "assistant" and isinstance(w["content"], list)
        for block in w["content"]
        if block["type"] == "tool_use"
    ]
    calls = [c for m in conversation if m.role is Role.ASSISTANT for c in m.tool_calls]
    assert [u["id"] for u in uses] == [c.id for c in calls]
    assert all(isinstance(u["input"], dict) for u in uses)


@given(st.lists(st.sampled_from([ANSWER_TOOL, *(f"{ANSWER_TOOL}_{n}" for n in range(2, 6))])))
def test_the_answer_tool_is_always_a_new_name(names: list[str]) -> None:
    tools = tuple(ToolSchema(name, "", {"type": "object"}) for name in dict.fromkeys(names))
    request = ModelRequest("m", (), tools, output_schema={"type": "object"})

    wire = wire_request(request)

    assert wire.answer is not None
    assert wire.answer.name not in {t.name for t in tools}
    assert [t["name"] for t in wire.tools] == [*(t.name for t in tools), wire.answer.name]
    expected = {"type": "any"} if tools else {"type": "tool", "name": wire.answer.name}
    assert wire.tool_choice == expected
