#!/usr/bin/env python3
"""Exec-to-exit of `weft version` and `weft ps` for weft binaries, side by side.

    bench/startup.py N HOST BINARY...

Runs each command N times per binary, alternating the binaries, and prints
the wall time (p50, min), the CPU time (user + system, from wait4) and the
peak RSS (ru_maxrss) of each. HOST is the address of a running `weft serve`
that `weft ps` asks (e.g. 127.0.0.1:7878). Compare binaries as copies made
the same way (cp): peak RSS counts the pages of the binary's file, which
follow how the file sits in the page cache.
"""
import os
import statistics
import sys
import time


def once(argv):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execv(argv[0], argv)
    _, _, ru = os.wait4(pid, 0)
    return (time.perf_counter() - t0) * 1000, (ru.ru_utime + ru.ru_stime) * 1000, ru.ru_maxrss / 1024


def main():
    n, host, bins = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    print("load average", " ".join(open("/proc/loadavg").read().split()[:3]))
    for name, args in (("version", ["version"]), ("ps", ["--host", host, "ps"])):
        res = {b: [] for b in bins}
        for _ in range(n):
            for b in bins:
                res[b].append(once([b] + args))
        for b in bins:
            w, c, r = (sorted(x[i] for x in res[b]) for i in range(3))
            print(f"{name:8s} {b}: wall p50 {statistics.median(w):.2f} ms, min {w[0]:.2f} ms; "
                  f"CPU p50 {statistics.median(c):.2f} ms; peak RSS p50 {statistics.median(r):.1f} MiB")
    print("load average", " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
