"""An MCP client for the tests: a session over stdio or streamable HTTP, and the fields of a
tool result under either SDK major's spelling."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from tests.helpers import SEMFS

try:  # mcp 2 renamed it; both majors are supported
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:
    from mcp.client.streamable_http import streamablehttp_client as http_client

T = TypeVar("T")


def stdio(*args: str) -> StdioServerParameters:
    # The SDK passes only a few variables by default: PYTHONPATH and SEMFS_STORE must go too.
    return StdioServerParameters(command=SEMFS, args=["mcp", *args], env=dict(os.environ))


def run(fn: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(fn)


@asynccontextmanager
async def connect(
    server: StdioServerParameters | str, token: str | None = None
) -> AsyncIterator[ClientSession]:
    """A session with the server: a command over stdio, or a streamable HTTP URL (with a
    bearer ``token``)."""
    if isinstance(server, StdioServerParameters):
        transport = stdio_client(server)
    else:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        try:  # mcp 2 takes an httpx client; mcp 1 the headers
            transport = http_client(server, headers=headers)
        except TypeError:  # pragma: no cover - mcp 2
            import httpx

            transport = http_client(server, http_client=httpx.AsyncClient(headers=headers))
    async with transport as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield session


def attr(obj: Any, name: str) -> Any:
    """A result field by its snake_case name (mcp 2) or its camelCase one (mcp 1)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    head, *rest = name.split("_")
    return getattr(obj, head + "".join(p.title() for p in rest))


def is_error(result: CallToolResult) -> bool:
    return bool(attr(result, "is_error"))


def data(result: CallToolResult) -> Any:
    return attr(result, "structured_content")


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    return block.text


def grep_lines(result: CallToolResult) -> list[str]:
    """The grep lines of a grep result: its first ``shown`` lines (notes follow them)."""
    assert not is_error(result), text(result)
    found = data(result)
    assert found is not None
    assert found["shown"] == found["matches"]
    return text(result).split("\n")[: found["shown"]]


async def call(client: ClientSession, name: str, **args: Any) -> CallToolResult:
    return await client.call_tool(name, args)
