"""When the first passage is enough (issue 48): the mount's guide (``semfs guide``) and the MCP
server's instructions both tell an agent that the results start with the best answer, and to
stop there when its hit is strong and its lines say what was asked (else read on)."""

from __future__ import annotations

from semfs.fusefs.agent import guide, mcp


def test_both_guides_say_when_the_first_passage_is_enough() -> None:
    for text in (guide.GUIDE, mcp.GUIDE):
        flat = " ".join(text.split())
        assert '"Answer: 1. PATH lines 41-44 [its section]"' in flat
        assert "is strong and its lines say what you asked, that is enough: stop" in flat
