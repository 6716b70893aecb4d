"""rlx-serve: an OpenAI-compatible HTTP server with continuous batching.

:mod:`rlx.serve.engine` runs the batched model (one decode call advances every running
request); :mod:`rlx.serve.app` is the HTTP side (aiohttp); :mod:`rlx.serve.api` parses and
builds OpenAI's request and response bodies; :mod:`rlx.serve.cli` is ``rlx-serve``. Nothing
in rlx imports this package (it sits on the top floor, beside the tools).
"""
