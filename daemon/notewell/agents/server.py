"""The MCP server the daemon hosts for each agent session (``session`` runs it).

Built on the official SDK's low-level ``Server`` (``mcp`` 2.x): the tools' schemas are
generated in ``tools`` from the ops' arguments (``wire.requests``) rather than derived
from Python signatures, so unknown arguments are refused and every argument error names
the argument, and no model classes are built at start. Each call is one request to the
daemon's own handlers (``link``), run on a worker thread so a slow answer never holds the
session.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from notewell import __version__
from notewell.agents import tools
from notewell.agents.link import DaemonLink, Refused, Unavailable
from notewell.wire.requests import MAX_PAGE_CHARS, BadArguments

log = logging.getLogger(__name__)

NOTE_URI = "notewell://note/"
NOTE_TEMPLATE = NOTE_URI + "{note_id}"
RESOURCE_MAX_CHARS = 400_000  # a resource has no pages: beyond this, get_note pages
INSTRUCTIONS = (
    "Read-only access to the user's own notes (Bear, Obsidian, Markdown folders), "
    "answered by notewell's local index: search_notes finds notes by meaning and "
    "keywords, get_note reads one (or one section), recent_notes, similar_notes and "
    "list_tags browse, index_status tells how fresh the index is."
)


def _tool(spec: tools.ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name, title=spec.title, description=spec.description,
        input_schema=spec.input_schema, output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            title=spec.title, read_only_hint=True, destructive_hint=False,
            idempotent_hint=True, open_world_hint=False))


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)],
                                is_error=True)


class NotewellTools:
    """The handlers, over one link to the daemon."""

    def __init__(self, link: DaemonLink) -> None:
        self.link = link
        self.listed = [_tool(spec) for spec in tools.TOOLS.values()]

    async def list_tools(self, ctx: ServerRequestContext, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.listed)

    async def call_tool(self, ctx: ServerRequestContext, params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        return await self.call(params.name, params.arguments)

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        spec = tools.TOOLS.get(name)
        if spec is None:
            return _error(f"unknown tool {name[:100]!r}; notewell's tools: "
                          f"{', '.join(tools.TOOLS)}")
        try:
            args = tools.check(spec, arguments)
        except BadArguments as e:
            return _error(f"{name}: {e}")
        op, request = tools.request(name, args)
        try:
            result = await anyio.to_thread.run_sync(lambda: self.link.ask(op, **request))
        except (Unavailable, Refused) as e:
            return _error(f"{name}: {e}")
        out = tools.structured(name, result, args)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=tools.text(name, out, args))],
            structured_content=out)

    async def list_resources(self, ctx: ServerRequestContext, params: Any
                             ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])  # notes are reached by the template

    async def list_templates(self, ctx: ServerRequestContext, params: Any
                             ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            name="note", title="A note", uri_template=NOTE_TEMPLATE, mime_type="text/markdown",
            description="A note's Markdown by its note_id (as search_notes gives it).")])

    async def read_resource(self, ctx: ServerRequestContext,
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if not uri.startswith(NOTE_URI) or len(uri) == len(NOTE_URI):
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri[:200]!r}; notes are "
                           f"{NOTE_TEMPLATE}")
        note_id = urllib.parse.unquote(uri[len(NOTE_URI):])
        try:
            body, more = await anyio.to_thread.run_sync(self._whole_note, note_id)
        except (Unavailable, Refused) as e:
            raise MCPError(types.INVALID_PARAMS if isinstance(e, Refused) else
                           types.INTERNAL_ERROR, str(e)) from None
        if more is not None:
            body += (f"\n\n[{more[1] - more[0]} more characters: get_note(note_id, "
                     f"offset={more[0]})]")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="text/markdown", text=body)])

    def _whole_note(self, note_id: str) -> tuple[str, tuple[int, int] | None]:
        """The note's text up to ``RESOURCE_MAX_CHARS``, and (next offset, total) when
        there is more."""
        parts, offset = [], 0
        while True:
            page = self.link.ask("note", note_id=note_id, offset=offset,
                                 max_chars=MAX_PAGE_CHARS)  # the largest page
            parts.append(page["text"])
            offset = page["next_offset"]
            if offset is None:
                return "".join(parts), None
            if offset >= RESOURCE_MAX_CHARS:
                return "".join(parts), (offset, page["total_chars"])


def build(link: DaemonLink) -> Server:
    handlers = NotewellTools(link)
    return Server(
        "notewell", version=__version__, title="notewell", instructions=INSTRUCTIONS,
        on_list_tools=handlers.list_tools, on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources,
        on_list_resource_templates=handlers.list_templates,
        on_read_resource=handlers.read_resource)
