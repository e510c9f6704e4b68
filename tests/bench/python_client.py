#!/usr/bin/env python3
"""The streaming loop of vLLM's Python benchmark client (`vllm bench serve`, its OpenAI
completions backend), written anew for a side-by-side CPU measure: aiohttp, one task per
request, every SSE line read with `async for` over the response, stripped, its "data: " prefix
removed, parsed with json.loads, and a perf_counter timestamp kept for TTFT and ITL.

Usage: python_client.py PORT REQUESTS OUTPUT_TOKENS
Prints one JSON line: events, completed, cpu_s (this process, after imports), wall_s.
"""
import asyncio
import json
import resource
import sys
import time

import aiohttp

TIMEOUT = aiohttp.ClientTimeout(total=6 * 60 * 60)


async def one_request(session, url, output_tokens):
    payload = {"model": "sim-8b", "prompt": "w " * 16, "max_tokens": output_tokens,
               "stream": True, "stream_options": {"include_usage": True}}
    events, itl, ttft, last = 0, [], 0.0, 0.0
    start = time.perf_counter()
    async with session.post(url=url, json=payload) as response:
        if response.status != 200:
            return 0, False
        async for chunk_bytes in response.content:
            chunk_bytes = chunk_bytes.strip()
            if not chunk_bytes:
                continue
            chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
            if chunk == "[DONE]":
                continue
            data = json.loads(chunk)
            if choices := data.get("choices"):
                _ = choices[0].get("text")
                now = time.perf_counter()
                if ttft == 0.0:
                    ttft = now - start
                else:
                    itl.append(now - last)
                last = now
                events += 1
            elif usage := data.get("usage"):
                _ = usage.get("completion_tokens")
    return events, True


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main(port, requests, output_tokens):
    url = f"http://127.0.0.1:{port}/v1/completions"
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=TIMEOUT, connector=connector) as session:
        cpu0, wall0 = cpu_s(), time.perf_counter()
        results = await asyncio.gather(*(one_request(session, url, output_tokens) for _ in range(requests)))
        cpu1, wall1 = cpu_s(), time.perf_counter()
    print(json.dumps({"events": sum(e for e, _ in results), "completed": sum(1 for _, ok in results if ok),
                      "cpu_s": cpu1 - cpu0, "wall_s": wall1 - wall0}))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
