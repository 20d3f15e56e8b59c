"""One webhook replica for the multi-process tests: ``python replica.py CONFIG PORT``.

Serves the real admission app (:func:`webhook.server.build_app`) over plain HTTP on
127.0.0.1 with the feed built by :meth:`IntensityFeed.from_config`, so the cache
backend follows ``CARBONSHIFT_REDIS_URL`` as in production. Stops on SIGTERM. Plain
HTTP: certificates are not what is tested.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from aiohttp import web

from webhook import config as config_mod
from webhook import logs
from webhook.feed import IntensityFeed
from webhook.server import build_app
from webhook.state import ServerState


async def main(path: str, port: int) -> None:
    logs.configure("info")  # production logging: one JSON line per admission
    config = config_mod.load(path)
    feed = IntensityFeed.from_config(config)
    runner = web.AppRunner(build_app(ServerState(config=config, feed=feed)), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await feed.start(wait=False)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()
    await feed.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
