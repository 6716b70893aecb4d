"""The HTTP side of rlx-serve, on aiohttp: OpenAI's ``/v1/completions`` and
``/v1/chat/completions`` (whole responses and server-sent-event streams), ``/v1/models`` and
``/health``, in front of one :class:`~rlx.serve.engine.Engine`.

aiohttp is one kept package (aio-libs) that is the server itself: no ASGI layer and no
second server process to pair with it, streaming responses as plain writes, a graceful
shutdown that stops listening and waits for in-flight handlers, and handler cancellation when
a client goes away (which is how a dropped stream frees its slot at once).

Every refused request is a 4xx JSON body in OpenAI's shape (``{"error": {"message", "type",
"param", "code"}}``), aiohttp's own (unknown route, wrong method, body too large) included.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from rlx.serve import api
from rlx.serve.engine import Engine, EngineError, Event, Request

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Server:
    """The routes around ``engine``; ``name`` is the model id clients ask for."""

    engine: Engine
    name: str
    created: int = field(default_factory=lambda: int(time.time()))
    draining: bool = False

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors])
        app.add_routes([web.post("/v1/completions", self.completions),
                        web.post("/v1/chat/completions", self.chat),
                        web.get("/v1/models", self.models),
                        web.get("/health", self.health)])
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except api.ApiError as e:
            return web.json_response(e.body(), status=e.status)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            kind = "invalid_request_error" if e.status < 500 else "server_error"
            return web.json_response(api.ApiError(e.reason, status=e.status, kind=kind).body(),
                                     status=e.status)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": self.name, "object": "model", "created": self.created, "owned_by": "rlx"}]})

    async def health(self, request: web.Request) -> web.Response:
        e = self.engine
        body = {"status": "draining" if self.draining else "ok",
                "slots_total": e.model.batch, "slots_busy": len(e.running),
                "waiting": e.waiting.qsize() + len(e.held), "steps": e.steps, "peak_batch": e.peak,
                "steps_by_rows": {str(r): n for r, n in e.model.calls.items()}}
        return web.json_response(body, status=503 if self.draining else 200)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=True)

    async def _complete(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            body = json.loads(await request.read())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise api.ApiError(f"the body is not valid JSON: {e}") from None
        model = body.get("model") if isinstance(body, dict) else None
        if model is not None and model != self.name:
            raise api.ApiError(f"model: this server serves {self.name!r}, found {model!r}",
                               "model", status=404, code="model_not_found")
        cfg = self.engine.model.config
        s = api.parse(body, chat, self.engine.tokenizer, cfg.vocab_size)
        context = self.engine.model.context
        if len(s.prompt_ids) >= context:
            raise api.ApiError(f"the prompt has {len(s.prompt_ids)} tokens; this server's "
                               f"context is {context} (prompt and output together)",
                               "messages" if chat else "prompt", code="context_length_exceeded")
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Event] = asyncio.Queue()
        req = Request(s.prompt_ids, s.max_tokens or context, sampling=s.sampling, stop=s.stop,
                      emit=lambda ev: loop.call_soon_threadsafe(events.put_nowait, ev))
        try:
            self.engine.submit(req)
        except EngineError as e:
            raise api.ApiError(str(e), status=503, kind="server_error") from None
        try:
            if s.stream:
                return await self._stream(request, req, events, chat, s.include_usage)
            return await self._whole(req, events, chat)
        finally:
            req.cancel()  # a finished request is gone already; a dropped client's is freed

    async def _whole(self, req: Request, events: asyncio.Queue[Event], chat: bool
                     ) -> web.Response:
        text: list[str] = []
        while True:
            ev = await events.get()
            text.append(ev.text)
            if ev.finish is not None:
                break
        if ev.finish == "error":
            raise api.ApiError(f"generation failed: {ev.error}", status=500, kind="server_error")
        counts = (len(req.prompt_ids), ev.tokens)
        return web.json_response(api.completion(api.new_id(chat), self.name, chat,
                                                "".join(text), ev.finish, counts))

    async def _stream(self, request: web.Request, req: Request, events: asyncio.Queue[Event],
                      chat: bool, include_usage: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        rid = api.new_id(chat)

        async def send(obj: Any) -> None:
            await resp.write(f"data: {json.dumps(obj)}\n\n".encode())

        try:
            await self._events(send, req, events, chat, include_usage, rid)
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionResetError:  # the client went away: the caller frees its slot
            pass
        return resp

    async def _events(self, send: Callable[[Any], Awaitable[None]], req: Request,
                      events: asyncio.Queue[Event], chat: bool, include_usage: bool, rid: str
                      ) -> None:
        """The stream's events, from the role chunk to the usage chunk."""
        if chat:
            await send(api.chunk(rid, self.name, chat, "", None, role=True))
        while True:
            ev = await events.get()
            batch = [ev]
            while ev.finish is None and not events.empty():
                ev = events.get_nowait()
                batch.append(ev)
            text = "".join(e.text for e in batch)
            if text:
                await send(api.chunk(rid, self.name, chat, text, None))
            if ev.finish is not None:
                break
        if ev.finish == "error":
            await send(api.ApiError(f"generation failed: {ev.error}", status=500,
                                    kind="server_error").body())
        else:
            await send(api.chunk(rid, self.name, chat, None, ev.finish))
            if include_usage:
                await send(api.usage_chunk(rid, self.name, chat,
                                           (len(req.prompt_ids), ev.tokens)))


async def serve(server: Server, host: str, port: int, shutdown_timeout: float,
                ready: Callable[[str], None] = print) -> None:
    """Serve until SIGTERM / SIGINT, then stop listening, let in-flight requests finish
    (``shutdown_timeout`` seconds at most) and stop the engine."""
    runner = web.AppRunner(server.app(), shutdown_timeout=shutdown_timeout,
                           handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0]
    ready(f"rlx-serve: {server.name} on http://{host}:{bound[1]} "
          f"({server.engine.model.batch} slots, context {server.engine.model.context})")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.draining = True
    ready("rlx-serve: stopping: finishing in-flight requests")
    await runner.cleanup()
    await asyncio.to_thread(server.engine.stop, shutdown_timeout)
    ready("rlx-serve: stopped")


__all__ = ["Server", "serve"]
