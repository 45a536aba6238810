#!/usr/bin/env python3
"""``vocalis serve`` against ``vocalis serve --ray`` (1 and 2 replicas), side by side in one
run: each server is started in turn on 127.0.0.1, loaded with ``scripts/load_test.py``
(TTFA and aggregate x real time at the same concurrency levels, the same requests), and
stopped; a table compares them.

    python scripts/ray_bench.py --model ckpt --voice ckpt/voice.wav --max-frames 40 \\
        --concurrency 1,8 --requests-per-client 4

Configurations (``--configs``, comma-separated):

* ``serve``: ``vocalis serve --threads T`` (one process, T torch threads);
* ``ray1``: ``vocalis serve --ray --replicas 1 --replica-cpus T --threads T``;
* ``ray2``: ``vocalis serve --ray --replicas 2 --replica-cpus T/2 --threads T/2`` (the
  same cores split between two replicas).

T is ``--threads`` (default: the machine's CPU count). Each Ray configuration starts its
own local Ray instance (its start-up is not measured). Loopback only, bounded like
``load_test.py``.

Besides wall-clock figures, each level reports the CPU seconds that the server used per
second of audio: every process of the server's session (for Ray: the driver, GCS, raylet,
Serve's controller and proxy, the replicas), from ``/proc``. Unlike x real time, this
figure hardly moves when other work shares the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], timeout: float) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    log: list[str] = []

    def read():
        for line in proc.stderr:
            log.append(line.decode("utf-8", "replace"))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not any("vocalis: serving" in ln for ln in log):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            sys.exit("error: server did not start:\n" + "".join(log[-30:]))
        time.sleep(0.2)
    return proc, log


def session_cpu_s(sid: int) -> float:
    """User + system CPU seconds of the live processes of session ``sid`` (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # fields after "(comm)": state ppid pgrp session ...
            total += int(fields[11]) + int(fields[12])  # utime stime
    return total / tick


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--voice", required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    p.add_argument("--configs", default="serve,ray1,ray2")
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--requests-per-client", type=int, default=4)
    p.add_argument("--max-frames", type=int, default=40)
    p.add_argument("--max-batch", type=int, default=16)
    p.add_argument("--out", default=None, help="write the JSON report here")
    args = p.parse_args(argv)
    t = args.threads
    half = max(1, t // 2)
    base = [sys.executable, "-m", "vocalis.cli", "serve", "--model", args.model, "--voice",
            args.voice, "--max-batch", str(args.max_batch), "--quiet"]
    configs = {
        "serve": ["--threads", str(t)],
        "ray1": ["--ray", "--replicas", "1", "--replica-cpus", str(t), "--threads", str(t),
                 "--ray-cpus", str(t)],
        "ray2": ["--ray", "--replicas", "2", "--replica-cpus", str(t / 2), "--threads",
                 str(half), "--ray-cpus", str(t)],
    }
    chosen = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in configs]
    if unknown:
        sys.exit(f"error: unknown config(s) {unknown}; known: {', '.join(configs)}")
    report: dict = {"threads": t, "max_frames": args.max_frames, "results": {}}
    with tempfile.TemporaryDirectory(prefix="vocalis-ray-bench-") as tmp:
        for name in chosen:
            port = free_port()
            cmd = base + ["--port", str(port), "--voices-dir", f"{tmp}/voices"] + configs[name]
            print(f"== {name}: {' '.join(cmd[2:])}", flush=True)
            proc, _ = start(cmd, 300)
            load = [sys.executable, str(HERE / "load_test.py"), "--url",
                    f"http://127.0.0.1:{port}", "--requests-per-client",
                    str(args.requests_per_client), "--max-frames", str(args.max_frames)]
            levels = []
            try:
                # warm-up: the first requests of a fresh process (and replica) are slower
                subprocess.run(load + ["--concurrency", "2", "--requests-per-client", "1"],
                               check=False, stdout=subprocess.DEVNULL)
                for level in args.concurrency.split(","):
                    out = Path(tmp) / f"{name}-{level}.json"
                    cpu0 = session_cpu_s(proc.pid)
                    subprocess.run(load + ["--concurrency", level, "--no-warmup", "--out",
                                           str(out)], check=False)
                    cpu = session_cpu_s(proc.pid) - cpu0
                    if out.exists():
                        lv = json.loads(out.read_text())["levels"][0]
                        lv["server_cpu_s"] = round(cpu, 2)
                        lv["server_cpu_per_audio_s"] = (round(cpu / lv["audio_s"], 3)
                                                        if lv["audio_s"] else None)
                        levels.append(lv)
            finally:
                stop(proc)
            report["results"][name] = levels
    print()
    print(f"{'config':>7} {'clients':>7} {'err':>4} {'TTFA p50':>9} {'TTFA p95':>9} "
          f"{'x real time':>11} {'CPU s/audio s':>13}")
    for name, levels in report["results"].items():
        for lv in levels:
            def ms(v):
                return f"{v:.0f}" if v is not None else "-"

            cpu = lv["server_cpu_per_audio_s"]
            print(f"{name:>7} {lv['clients']:>7} {lv['errors']:>4} {ms(lv['ttfa_ms_p50']):>9} "
                  f"{ms(lv['ttfa_ms_p95']):>9} {(lv['aggregate_x_real_time'] or 0):>11.2f} "
                  f"{cpu if cpu is not None else '-':>13}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
