"""The echo floor: the same server stack answering ``POST /mutate`` with no logic.

aiohttp on uvloop with the same TLS setup as ``carbonshift serve``; it reads each
review, parses it with orjson and answers ``allowed: true`` with the request's uid and
no patch. What the real server costs above this is carbonshift's own work (deciding,
patching, logging, metrics). Started by :mod:`bench.admission` as
``python -m bench.floor serve --port P --cert-dir D``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import orjson
import uvloop
from aiohttp import web

from webhook.serve import certs
from webhook.serve.tls import ReloadingTLS


async def mutate(request: web.Request) -> web.Response:
    review = orjson.loads(await request.read())
    answer = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True},
    }
    return web.Response(body=orjson.dumps(answer), content_type="application/json")


async def ok(_request: web.Request) -> web.Response:
    return web.Response(body=b'{"status":"ok"}', content_type="application/json")


async def serve(port: int, cert_dir: Path) -> None:
    certs.issue(["localhost", "127.0.0.1"]).write(cert_dir)
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/mutate", mutate)
    app.router.add_get("/healthz", ok)
    app.router.add_get("/readyz", ok)
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ReloadingTLS(cert_dir).front).start()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--config", help="ignored (same command line as carbonshift serve)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert-dir", type=Path, required=True)
    args = parser.parse_args()
    uvloop.run(serve(args.port, args.cert_dir))


if __name__ == "__main__":
    main()
