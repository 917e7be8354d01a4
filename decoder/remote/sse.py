"""Server-sent events (the `text/event-stream` framing OpenAI-compatible servers stream in)."""

from __future__ import annotations

from collections.abc import AsyncIterator


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each event: `data:` lines joined by newlines, an event ending at a blank line.
    Comments (`:` lines) and other fields (`event:`, `id:`, `retry:`) are skipped."""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)
