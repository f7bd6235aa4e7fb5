"""Native snapshots (issue 4) and AOF rewrite (issue 5), sections of
scripts/bench (`--only-snapshot`, `--only-rewrite`; `--skip-snapshot` and
`--skip-rewrite` leave them out of a full run).

`snapshot`: the mixed dataset into both servers, SAVE timed and the files
compared (dump.hoz vs dump.rdb), the longest PING round trip of a
PING-loop process during BGSAVE, each server's restart on its dump until
+PONG. `rewrite`: the same dataset with the AOF on, BGREWRITEAOF per
preamble variant (the last with a writer process) under the same PING
loop, the rewritten files' sizes and a restart on them. The docstring of
scripts/bench describes both.

The functions take the bench module as `b` (as bench_repl and
bench_memtypes do). What other sections and scripts share stays there:
Server, Conn, command, log, the mixed dataset (`snapshot_dataset`,
`SNAPSHOT_FLAGS`, `SNAPSHOT_SEED`) and its loader `send_chunks`,
`info_fields`, `snapshot_sample`, `median_or_none`, `print_errors_list`.
The PING loop and the writer run in processes of their own (`b.MP`, a fork
context, so nothing is pickled) and take `b` first like the rest.
"""

import array
import math
import os
import queue
import re
import select
import shlex
import shutil
import socket
import statistics
import time

import bench_charts

# --------------------------------------------------------------- snapshot --
#
# Native snapshots (issue 4): hozon's dump.hoz against Redis's dump.rdb of
# the same mixed dataset, both servers with b.SNAPSHOT_FLAGS (why those:
# see there).

SNAPSHOT_FILES = {"hozon": "dump.hoz", "redis": "dump.rdb"}
# Issue 4's targets: hozon/redis ratio at most this.
SNAPSHOT_TARGETS = {"load": 0.5, "save": 1.0, "size": 1.0, "pause": 1.0}


def snapshot_compare(b, ports, samples):
    """None when the sample keys read the same on both servers, else what
    differs."""
    got = {name: b.snapshot_sample(port, samples) for name, port in ports.items()}
    diffs = [(h, r) for h, r in zip(got["hozon"], got["redis"]) if h != r]
    if not diffs:
        return None
    (key, hv, ht), (_, rv, rt) = diffs[0]
    show = lambda v: repr(v)[:160]  # noqa: E731
    return (f"{len(diffs)} of {len(samples)} sampled keys differ; first {key.decode()}: "
            f"hozon {show(hv)} (pexpiretime {ht}) vs redis {show(rv)} (pexpiretime {rt})")


def _ping_loop(b, port, stop, ready_w, results):
    """The PING loop (own process, so the parent's work does not delay it):
    one PING outstanding at a time on one connection, each round trip timed
    with the monotonic clock, until `stop` is set. Puts (start times ns,
    latencies ns, error) on `results`."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ping, pong = b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n"
        starts, lats = array.array("q"), array.array("q")
        clock, send, recv = time.monotonic_ns, s.sendall, s.recv
        send(ping)
        if recv(64) != pong:
            raise b.WorkloadError("PING did not answer +PONG")
        os.write(ready_w, b"r")
        while not stop.value:
            t0 = clock()
            send(ping)
            data = recv(64)
            while data[-2:] != b"\r\n":
                more = recv(64)
                if not more:
                    raise ConnectionError("connection closed")
                data += more
            t1 = clock()
            if data != pong:
                raise b.WorkloadError(f"PING answered {data!r}")
            starts.append(t0)
            lats.append(t1 - t0)
        s.close()
        results.put((starts.tobytes(), lats.tobytes(), None))
    except Exception as e:
        results.put((b"", b"", f"PING loop: {type(e).__name__}: {e}"))
        try:
            os.write(ready_w, b"x")
        except OSError:
            pass


def ping_stats(b, starts, lats, t_from, t_to):
    """Max and p99 (ms), count, how many took over 10 ms, and when the
    longest started (seconds after t_from) of the PINGs in flight at some
    time in [t_from, t_to] (ns)."""
    pairs = [(lat, st) for st, lat in zip(starts, lats) if st <= t_to and st + lat >= t_from]
    if not pairs:
        return None
    sel = sorted(lat for lat, _ in pairs)
    longest, at = max(pairs)
    return {"max": longest / 1e6, "p99": b.percentile(sel, 99) / 1e6, "count": len(sel),
            "over_10ms": sum(1 for lat in sel if lat > 10_000_000),
            # A PING already in flight at t_from counts as starting then.
            "max_at_secs": max(0.0, (at - t_from) / 1e9)}


def start_helper(b, target, args, what):
    """Starts `target(*args, stop, ready_w, results)` in its own process (so
    the parent's work does not delay it) and waits until it writes b"r" on
    ready_w. Its last result field is an error or None. Returns the handle
    for stop_helper/abandon_helper."""
    stop = b.MP.RawValue("b", 0)
    ready_r, ready_w = os.pipe()
    results = b.MP.Queue()
    proc = b.MP.Process(target=target, args=(*args, stop, ready_w, results), daemon=True)
    proc.start()
    os.close(ready_w)
    try:
        r, _, _ = select.select([ready_r], [], [], 30)
        ready = bool(r) and os.read(ready_r, 1) == b"r"
    finally:
        os.close(ready_r)
    helper = (proc, stop, results)
    if not ready:
        try:
            err = results.get(timeout=5)[-1]
        except queue.Empty:
            err = None
        abandon_helper(helper)
        raise b.WorkloadError(err or f"{what} did not start within 30 s")
    return helper


def stop_helper(b, helper, what, timeout=60):
    """Tells the helper to stop and returns its results (raises
    WorkloadError with its error)."""
    proc, stop, results = helper
    stop.value = 1
    try:
        # Before join: a process exits only once its queued data is read.
        res = results.get(timeout=timeout)
    except queue.Empty:
        res = None
    finally:
        abandon_helper(helper)
    if res is None:
        raise b.WorkloadError(f"{what} did not report")
    if res[-1]:
        raise b.WorkloadError(res[-1])
    return res


def abandon_helper(helper):
    proc, stop, _ = helper
    stop.value = 1
    proc.join(timeout=5)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=5)


# What pause_under starts and waits for: the command, the replies that mean
# it started (or was scheduled), the INFO persistence fields that must all be
# 0 when it is over (the first one must be present), the status field that
# must then be ok, and integer fields whose largest value while polling is
# reported (`peaks`; absent fields are left out).
BGSAVE_JOB = {"command": ("BGSAVE",), "replies": ("Background saving started",),
              "busy": ("rdb_bgsave_in_progress",), "status": "rdb_last_bgsave_status",
              "peak": ()}
REWRITE_JOB = {"command": ("BGREWRITEAOF",),
               "replies": ("Background append only file rewriting started",
                           "Background append only file rewriting scheduled"),
               "busy": ("aof_rewrite_in_progress", "aof_rewrite_scheduled"),
               "status": "aof_last_bgrewrite_status",
               # hozon's bytes of diff not yet copied into the new file.
               "peak": ("aof_rewrite_buffer_length",)}


def run_background_job(b, c, job, timeout):
    """Sends the job's command on connection c and polls INFO persistence
    every 10 ms until it is over; raises WorkloadError unless it ends ok.
    Returns (t_sent, t_replied, t_over) in monotonic ns, the last INFO
    persistence and the peaks of the job's `peak` fields."""
    t_bg0 = time.monotonic_ns()
    what = " ".join(job["command"])
    c.send(b.resp_command(*job["command"]))
    reply = c.read()
    t_reply = time.monotonic_ns()
    if reply not in job["replies"]:
        raise b.WorkloadError(f"{what} answered {reply!r}")
    deadline = time.monotonic() + timeout
    first, rest = job["busy"][0], job["busy"][1:]
    peaks = {}
    while True:
        info = b.info_fields(c, "persistence")
        for f in job["peak"]:
            if info.get(f, "").isdigit():
                peaks[f] = max(peaks.get(f, 0), int(info[f]))
        if info.get(first) == "0" and all(info.get(f, "0") == "0" for f in rest):
            t_bg1 = time.monotonic_ns()
            break
        if time.monotonic() > deadline:
            raise b.WorkloadError(f"{what} still in progress after {timeout:.0f} s")
        time.sleep(0.01)
    if info.get(job["status"]) != "ok":
        raise b.WorkloadError(f"{job['status']}:{info.get(job['status'])}")
    return t_bg0, t_reply, t_bg1, info, peaks


def pause_under(b, srv, job, baseline_secs, timeout, writer=None):
    """One background job (BGSAVE_JOB, REWRITE_JOB) under a PING loop: the
    loop runs baseline_secs without the job (the noise floor), then the
    job's command is sent and INFO persistence polled every 10 ms until its
    busy fields are all 0. With `writer` (the arguments of _set_writer after
    `b` and the port), a writer process runs SETs from before the baseline
    until the job is over. Returns metrics (`info`: the final INFO persistence;
    `written`: SETs the writer had acknowledged, None without one)."""
    helpers = {}
    c = None
    try:
        helpers["ping"] = start_helper(b, _ping_loop, (b, srv.port), "the PING loop")
        if writer is not None:
            helpers["writer"] = start_helper(b, _set_writer, (b, srv.port, *writer),
                                             "the writer")
        c = b.Conn(srv.port, timeout=timeout)
        time.sleep(0.2)  # the loop settles
        t_base0 = time.monotonic_ns()
        time.sleep(baseline_secs)
        t_bg0, t_reply, t_bg1, info, peaks = run_background_job(b, c, job, timeout)
        fork_usec = b.info_fields(c, "stats").get("latest_fork_usec")
        written = write_secs = None
        if writer is not None:
            written, werrors, wfirst, write_secs, _ = stop_helper(b, helpers.pop("writer"),
                                                                  "the writer")
            if werrors:
                raise b.WorkloadError(f"the writer got {werrors} error replies, first: {wfirst}")
        starts_b, lats_b, _ = stop_helper(b, helpers.pop("ping"), "the PING loop")
    finally:
        for h in helpers.values():
            abandon_helper(h)
        if c is not None:
            c.close()
    starts, lats = array.array("q"), array.array("q")
    starts.frombytes(starts_b)
    lats.frombytes(lats_b)
    during = ping_stats(b, starts, lats, t_bg0, t_bg1)
    base = ping_stats(b, starts, lats, t_base0, t_bg0 - 1)
    series = bench_charts.ping_series(starts, lats, t_base0, t_bg0, t_bg1)
    if during is None or base is None:
        raise b.WorkloadError(f"no PING completed during the baseline or the "
                              f"{' '.join(job['command'])}")
    return {"max": during["max"], "p99": during["p99"], "pings": during["count"],
            "over_10ms": during["over_10ms"], "max_at_secs": during["max_at_secs"],
            "peaks": peaks,
            "rate": during["count"] / ((t_bg1 - t_bg0) / 1e9),
            "base_max": base["max"], "base_p99": base["p99"],
            "base_rate": base["count"] / ((t_bg0 - t_base0) / 1e9),
            "base_secs": (t_bg0 - t_base0) / 1e9,
            "reply_ms": (t_reply - t_bg0) / 1e6, "wall_secs": (t_bg1 - t_bg0) / 1e9,
            "fork_ms": int(fork_usec) / 1000 if (fork_usec or "").isdigit() else None,
            "info": info, "written": written, "series": series,
            "write_rate": written / write_secs if written is not None and write_secs else None}


def bgsave_pause(b, srv, baseline_secs, timeout):
    """One BGSAVE under a PING loop (pause_under)."""
    return pause_under(b, srv, BGSAVE_JOB, baseline_secs, timeout)


def snapshot_file(name, wdir):
    path = os.path.join(wdir, SNAPSHOT_FILES[name])
    return os.path.getsize(path) if os.path.exists(path) else None


def load_dataset(b, section, name, port, chunks, nkeys):
    """Sends the mixed dataset's chunks to the server on `port` and checks
    it took them all (no error reply, DBSIZE `nkeys`; WorkloadError
    otherwise); returns the seconds the sending took."""
    secs, errors, first = b.send_chunks(port, chunks)
    n = b.dbsize(port)
    b.log(f"{section} {name}: dataset loaded in {secs:.2f} s, {errors} error replies, "
          f"DBSIZE {n}")
    if errors:
        raise b.WorkloadError(f"{errors} error replies, first: {first}")
    if n != nkeys:
        raise b.WorkloadError(f"DBSIZE {n} after loading {nkeys} keys")
    return secs


def snapshot(b, args, binaries, workroot):
    """The native-snapshot section: load the mixed dataset into both servers,
    time SAVE, measure the PING-loop pause during BGSAVE, then time each
    server's restart on its dump; rounds alternate hozon/redis. Failures are
    recorded per server and phase (reported under the table), never raised."""
    nkeys = args.snapshot_keys
    b.log(f"snapshot: generating the mixed dataset ({nkeys:,} keys)...")
    t0 = time.monotonic()
    chunks, stats, samples = b.snapshot_dataset(nkeys)
    gen_secs = time.monotonic() - t0
    b.log(f"snapshot: {stats['commands']:,} commands, {stats['bytes'] / 1048576:,.1f} MiB of "
          f"RESP, {stats['elements']:,} elements, in {gen_secs:.1f} s")
    out = {"stats": stats, "nkeys": nkeys, "errors": [], "content": {}}
    for name in ("hozon", "redis"):
        out[name] = {"load_secs": None, "used_memory": None, "save": [], "size": None,
                     "size_bg": None,
                     "bg": [], "start": [], "server_secs": [], "loading_replies": 0,
                     "failed": set()}
    servers = {}

    def fail(name, phase, e):
        record_failure(b, out, "snapshot", name, phase, e)

    try:
        for name in ("hozon", "redis"):
            wdir = os.path.join(workroot, f"snapshot-{name}")
            servers[name] = b.Server(name, binaries[name], b.SNAPSHOT_FLAGS, workroot,
                                     wdir=wdir).start()
        # 1. The dataset, the same bytes to each server.
        for name, srv in servers.items():
            m = out[name]
            try:
                m["load_secs"] = load_dataset(b, "snapshot", name, srv.port, chunks, nkeys)
                m["used_memory"] = b.info_used_memory(srv.port)
                b.log(f"snapshot {name}: used_memory {m['used_memory']}")
            except Exception as e:
                fail(name, "dataset", e)
        del chunks
        ok = lambda name, *phases: not (out[name]["failed"] & {"dataset", *phases})  # noqa: E731
        if ok("hozon") and ok("redis"):
            try:
                out["content"]["loaded"] = snapshot_compare(
                    b, {n: s.port for n, s in servers.items()}, samples)
            except Exception as e:
                out["content"]["loaded"] = f"{type(e).__name__}: {e}"
        # 2. SAVE.
        for rnd in range(1, args.rounds + 1):
            for name, srv in servers.items():
                if not ok(name, "save"):
                    continue
                try:
                    t = time.monotonic()
                    r = b.command(srv.port, "SAVE", timeout=600)
                    secs = time.monotonic() - t
                    if r != "OK":
                        raise b.WorkloadError(f"SAVE answered {r!r}")
                    size = snapshot_file(name, srv.wdir)
                    if size is None:
                        raise b.WorkloadError(f"no {SNAPSHOT_FILES[name]} after SAVE")
                    out[name]["save"].append(secs)
                    out[name]["size"] = size
                    b.log(f"[round {rnd}/{args.rounds}] SAVE    {name:5} {secs:8.3f} s, "
                          f"{SNAPSHOT_FILES[name]} {size:,} B")
                except Exception as e:
                    fail(name, "save", e)
        # 3. BGSAVE under a PING loop.
        for rnd in range(1, args.rounds + 1):
            for name, srv in servers.items():
                if not ok(name, "bgsave"):
                    continue
                saves = out[name]["save"]
                baseline = min(10.0, max(1.0, statistics.median(saves) if saves else 1.0))
                try:
                    time.sleep(0.5)
                    m = bgsave_pause(b, srv, baseline, args.timeout * 5)
                    out[name]["bg"].append(m)
                    fork = f"{m['fork_ms']:.3f} ms" if m["fork_ms"] is not None else "n/a"
                    b.log(f"[round {rnd}/{args.rounds}] BGSAVE  {name:5} PING max "
                          f"{m['max']:.3f} ms, p99 {m['p99']:.3f} ms ({m['pings']} pings; "
                          f"baseline {baseline:.1f} s: max {m['base_max']:.3f} ms, p99 "
                          f"{m['base_p99']:.3f} ms); reply {m['reply_ms']:.3f} ms, until done "
                          f"{m['wall_secs']:.3f} s, latest_fork_usec {fork}")
                    # The file a BGSAVE writes may differ in size from SAVE's (its
                    # blocks are cut where the capture slices end).
                    out[name]["size_bg"] = snapshot_file(name, srv.wdir)
                except Exception as e:
                    fail(name, "bgsave", e)
        # 4. Restart on the dump.
        for rnd in range(1, args.rounds + 1):
            for name, srv in servers.items():
                m = out[name]
                before = m["size_bg"] or m["size"]
                if not ok(name, "start") or before is None:
                    continue
                try:
                    b.shutdown_server(srv, ["SHUTDOWN", "NOSAVE"])
                    size = snapshot_file(name, srv.wdir)
                    if size != before:
                        raise b.WorkloadError(f"{SNAPSHOT_FILES[name]} is {size} B after "
                                              f"SHUTDOWN NOSAVE, {before} B before")
                    secs, loading = b.timed_start(srv, what="its snapshot")
                    n = b.dbsize(srv.port)
                    sl = b.server_load_secs(srv, "DB loaded from disk:")
                    b.log(f"[round {rnd}/{args.rounds}] START   {name:5} {secs:8.3f} s to "
                          f"+PONG (server log: {sl if sl is not None else 'n/a'} s; DBSIZE {n}; "
                          f"{loading} -LOADING replies)")
                    if n != nkeys:
                        raise b.WorkloadError(f"DBSIZE {n} after loading its snapshot, "
                                              f"expected {nkeys}")
                    m["start"].append(secs)
                    m["loading_replies"] += loading
                    if sl is not None:
                        m["server_secs"].append(sl)
                except Exception as e:
                    fail(name, "start", e)
                    srv.stop()
            if rnd == 1 and ok("hozon", "start") and ok("redis", "start") \
                    and out["hozon"]["start"] and out["redis"]["start"]:
                try:
                    out["content"]["restarted"] = snapshot_compare(
                        b, {n: s.port for n, s in servers.items()}, samples)
                except Exception as e:
                    out["content"]["restarted"] = f"{type(e).__name__}: {e}"
    finally:
        for srv in servers.values():
            srv.stop()
        for name in ("hozon", "redis"):
            shutil.rmtree(os.path.join(workroot, f"snapshot-{name}"), ignore_errors=True)
    return out


def record_failure(b, out, section, name, phase, e):
    """Notes that `phase` failed for server `name` (its cells become
    `n/a (errors)`, the reason is listed under the table)."""
    msg = str(e) if isinstance(e, (b.WorkloadError, b.ReplayError)) \
        else f"{type(e).__name__}: {e}"
    out[name]["failed"].add(phase)
    out["errors"].append(f"{name} {phase}: {msg}")
    b.log(f"{section} {name} {phase}: ERROR {msg}")


def print_target_row(label, hv, rv, fmt, target=None, h_bad=False, r_bad=False):
    """One row of a `measure | hozon | redis | hozon/redis | target | met`
    table. A failed side shows `n/a (errors)`; the ratio and the verdict
    are n/a unless both sides have a number."""
    hs = "n/a (errors)" if h_bad else (fmt(hv) if hv is not None else "n/a")
    rs = "n/a (errors)" if r_bad else (fmt(rv) if rv is not None else "n/a")
    ratio = hv / rv if (hv is not None and rv and not h_bad and not r_bad) else None
    tgt = met = ""
    if target is not None:
        tgt = f"≤ {target:g}×"
        met = "n/a" if ratio is None else ("yes" if ratio <= target else "**no**")
    print(f"| {label} | {hs} | {rs} | {f'{ratio:.2f}' if ratio is not None else 'n/a'} "
          f"| {tgt} | {met} |")


def print_snapshot(b, args, snap):
    h, r, st = snap["hozon"], snap["redis"], snap["stats"]
    n = snap["nkeys"]
    print(f"### Native snapshots (issue 4): {n:,} mixed keys")
    print()
    print(f"Dataset ({st['commands']:,} pipelined commands, {st['bytes'] / 1048576:,.1f} MiB "
          f"of RESP, the same bytes to both servers, seed {b.SNAPSHOT_SEED}): "
          f"{st['string']:,} strings ({st['large_string']:,} of 1-10 KB), "
          f"{st['hash']:,} hashes ({st['large_hash']:,} of 513-2000 fields), "
          f"{st['list']:,} lists ({st['large_list']:,} of 200-1000 elements), "
          f"{st['set']:,} sets ({st['intset']:,} of integers only, {st['large_set']:,} of "
          f"513-1500 members), {st['zset']:,} sorted sets ({st['large_zset']:,} of 129-1000 "
          f"members); {st['elements']:,} elements in all; {st['ttl']:,} keys expire in "
          f"2100. Both servers: `{shlex.join(b.SNAPSHOT_FLAGS)}` (the save point never fires; "
          f"hozon loads its dump at startup only with some persistence configured), "
          f"Redis's defaults otherwise (rdbcompression, rdbchecksum yes). "
          f"{args.rounds} round(s) per phase, servers alternated hozon, redis; medians. "
          f"SAVE: client-side wall time of the command. BGSAVE: one process runs a PING "
          f"loop (one PING in flight) for max(1 s, SAVE time) without a save (baseline), "
          f"then BGSAVE is sent and INFO persistence polled every 10 ms until "
          f"rdb_bgsave_in_progress:0; the pause is the longest PING round trip that "
          f"overlaps that window. Load: SHUTDOWN NOSAVE, restart on the dump, time from "
          f"spawn to the first +PONG (polled every 2 ms; Redis answers -LOADING "
          f"meanwhile, hozon listens once loaded) and the `DB loaded from disk` figure of "
          f"the server's log; DBSIZE checked after every start. Files warm in the page "
          f"cache.")
    print()
    print("| measure | hozon | redis | hozon/redis | target | met |")
    print("|---------|------:|------:|------------:|--------|-----|")

    med = b.median_or_none

    def bad(m, phase):
        return bool(m["failed"] & {"dataset", phase})

    def row(label, phase, hv, rv, fmt, target=None):
        print_target_row(label, hv, rv, fmt, target, bad(h, phase), bad(r, phase))

    sec = lambda v: f"{v:.3f} s"  # noqa: E731
    ms = lambda v: f"{v:.2f} ms"  # noqa: E731
    mib = lambda v: f"{v / 1048576:,.1f} MiB"  # noqa: E731
    row("dataset load (1 pipelined conn.)", "dataset", h["load_secs"], r["load_secs"], sec)
    row("INFO used_memory after it", "dataset", h["used_memory"], r["used_memory"], mib)
    row("**SAVE time (median)**", "save", med(h["save"]), med(r["save"]), sec,
        SNAPSHOT_TARGETS["save"])
    mm = lambda m: (f"{min(m['save']):.3f} / {max(m['save']):.3f} s"  # noqa: E731
                    if m["save"] else "n/a")
    print(f"| SAVE time (min / max) | {mm(h)} | {mm(r)} | | | |")
    row(f"**file size** ({SNAPSHOT_FILES['hozon']} / {SNAPSHOT_FILES['redis']})", "save",
        h["size"], r["size"], mib, SNAPSHOT_TARGETS["size"])
    row("file bytes per key", "save", h["size"] and h["size"] / n, r["size"] and r["size"] / n,
        lambda v: f"{v:.1f}")
    row("file size written by BGSAVE", "bgsave", h["size_bg"], r["size_bg"], mib,
        SNAPSHOT_TARGETS["size"])
    bg = lambda m, k: med([x[k] for x in m["bg"]])  # noqa: E731
    worst = lambda m, k: max((x[k] for x in m["bg"]), default=None)  # noqa: E731
    row("**longest PING during BGSAVE (median of rounds)**", "bgsave", bg(h, "max"),
        bg(r, "max"), ms, SNAPSHOT_TARGETS["pause"])
    row("longest PING during BGSAVE (worst round)", "bgsave", worst(h, "max"),
        worst(r, "max"), ms, SNAPSHOT_TARGETS["pause"])
    print_target_row("redis latest_fork_usec (median) vs hozon's longest PING",
                     bg(h, "max"), bg(r, "fork_ms"), ms, 1.0, bad(h, "bgsave"),
                     bad(r, "bgsave"))
    row("p99 PING during BGSAVE (median)", "bgsave", bg(h, "p99"), bg(r, "p99"), ms)
    row("baseline, no BGSAVE: longest PING (median)", "bgsave", bg(h, "base_max"),
        bg(r, "base_max"), ms)
    row("baseline, no BGSAVE: p99 PING (median)", "bgsave", bg(h, "base_p99"),
        bg(r, "base_p99"), ms)
    rate = lambda v: f"{v:,.0f}/s"  # noqa: E731
    row("PING round trips during BGSAVE (median)", "bgsave", bg(h, "rate"), bg(r, "rate"),
        rate)
    row("baseline, no BGSAVE: PING round trips (median)", "bgsave", bg(h, "base_rate"),
        bg(r, "base_rate"), rate)
    row("BGSAVE reply time (median)", "bgsave", bg(h, "reply_ms"), bg(r, "reply_ms"), ms)
    row("BGSAVE until rdb_bgsave_in_progress:0 (median)", "bgsave", bg(h, "wall_secs"),
        bg(r, "wall_secs"), sec)
    row("**load: startup to +PONG (median)**", "start", med(h["start"]), med(r["start"]), sec,
        SNAPSHOT_TARGETS["load"])
    mm = lambda m: (f"{min(m['start']):.3f} / {max(m['start']):.3f} s"  # noqa: E731
                    if m["start"] else "n/a")
    print(f"| load: startup to +PONG (min / max) | {mm(h)} | {mm(r)} | | | |")
    row("load time in the server's log (median)", "start", med(h["server_secs"]),
        med(r["server_secs"]), sec, SNAPSHOT_TARGETS["load"])
    print()
    content = snap["content"]
    for when, label in (("loaded", "after loading the dataset"),
                         ("restarted", "after the first restart on the dumps")):
        if when in content:
            v = content[when]
            print(f"- content check {label} ({SNAPSHOT_SAMPLE_NOTE}): "
                  + ("same on both servers" if v is None else f"**differs**: {v}"))
    b.print_errors_list(snap["errors"])


SNAPSHOT_SAMPLE_NOTE = ("~600 keys spread over the keyspace read with GET / HGETALL / "
                        "LRANGE / SMEMBERS / ZRANGE WITHSCORES and PEXPIRETIME, hash and set "
                        "replies sorted")


# ---------------------------------------------------------------- rewrite --
#
# AOF rewrite (issue 5): BGREWRITEAOF on hozon (fork-free capture in slices
# on the command thread, a rewriter thread writing the new file, the diff
# copied from the old AOF, a rename) against Redis 7.0 (a fork; a multi-part
# AOF directory whose new base replaces the old base and incr files), on the
# mixed dataset of the snapshot section. Automatic rewrites are off on both
# (both accept the parameter) so only the measured rewrites run.

REWRITE_FLAGS = ["--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                 "--auto-aof-rewrite-percentage", "0"]
# (key, label, hozon CONFIG SET, redis CONFIG SET, writer during the rewrite).
# The preamble is set before every rewrite: a restart forgets CONFIG SET.
REWRITE_VARIANTS = [
    ("native", "with a preamble: hozon `aof-preamble native` (dump.hoz image), "
               "redis `aof-use-rdb-preamble yes` (RDB image); no writes during the rewrite",
     ("aof-preamble", "native"), ("aof-use-rdb-preamble", "yes"), False),
    ("none", "without a preamble: hozon `aof-preamble none`, redis "
             "`aof-use-rdb-preamble no` (RESP commands); no writes during the rewrite",
     ("aof-preamble", "none"), ("aof-use-rdb-preamble", "no"), False),
    ("writer", "with a preamble (as `native`) and a writer process running SETs "
               "during the baseline and the rewrite",
     ("aof-preamble", "native"), ("aof-use-rdb-preamble", "yes"), True),
]
# Issue 5's targets: hozon/redis ratio at most this.
REWRITE_TARGETS = {"wall": 1.0, "pause": 1.0, "size": 1.0}
# Before each round, every 5th string key (20% of the strings) is
# overwritten, so the old AOF holds superseded values for the rewrite to drop.
REWRITE_OVERWRITE_EVERY = 5
REWRITE_SWITCH_RE = re.compile(r"Background AOF rewrite finished successfully \((\d+) bytes; "
                               r"the switch copied (\d+) bytes of diff in ([0-9.]+) ms\)")


def rewrite_aof_size(b, name, wdir):
    """The bytes a restart would load: hozon's appendonly.aof; for Redis the
    base and incr files its manifest lists (history files awaiting deletion
    and the manifest itself not counted). Raises OSError/WorkloadError."""
    if name == "hozon":
        return os.path.getsize(os.path.join(wdir, "appendonly.aof"))
    d = os.path.join(wdir, "appendonlydir")
    total, files = 0, 0
    with open(os.path.join(d, "appendonly.aof.manifest")) as f:
        for line in f:
            # `file <name> seq <n> type <b|h|i>`
            parts = line.split()
            fields = dict(zip(parts[0::2], parts[1::2]))
            if fields.get("type") in ("b", "i") and "file" in fields:
                total += os.path.getsize(os.path.join(d, fields["file"]))
                files += 1
    if not files:
        raise b.WorkloadError("the AOF manifest lists no base or incr file")
    return total


def rewrite_overwrite_chunks(b, string_ids, pass_no):
    """`SET str:N <new value> KEEPTTL` for every REWRITE_OVERWRITE_EVERY-th
    string key, values that depend on pass_no (the same bytes for both
    servers), as pipelined chunks."""
    mask = (1 << 64) - 1
    chunks, buf = [], []
    for k in range(0, len(string_ids), REWRITE_OVERWRITE_EVERY):
        i = string_ids[k]
        buf.append(b._resp([b"SET", b"str:%d" % i,
                            b"ow%d-%016x" % (pass_no, (i * 0x9E3779B97F4A7C15 + pass_no) & mask),
                            b"KEEPTTL"]))
        if len(buf) == 5000:
            chunks.append((b"".join(buf), len(buf)))
            buf = []
    if buf:
        chunks.append((b"".join(buf), len(buf)))
    return chunks


# The writer's values: long enough that at a modest rate (5,000 SET/s,
# ~1.2 MB/s of AOF) a rewrite of a few seconds leaves more diff than hozon's
# switch takes at once (SWITCH_DIFF_BYTES, 1 MiB), so its catch-up copy
# runs too.
REWRITE_WRITER_VALUE_BYTES = 200


def writer_key_value(ids, offset, stride, tag, seq):
    """The writer's seq-th SET: a string key (never a sample key, so the
    content check across servers is unaffected) and its value."""
    i = ids[(offset + seq * stride) % len(ids)]
    return (b"str:%d" % i,
            (b"writer:%d:%d:" % (tag, seq)).ljust(REWRITE_WRITER_VALUE_BYTES, b"."))


def _set_writer(b, port, ids, offset, stride, rate, tag, stop, ready_w, results):
    """The writer (own process): every 10 ms one pipelined batch of
    rate/100 `SET key value KEEPTTL`, replies read before the next batch,
    until `stop` is set; a batch that runs late does not make the next one
    bigger. Puts (SETs acknowledged, error replies, first error, seconds it
    ran, error) on `results`."""
    seq = 0
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = s.makefile("rb", buffering=1 << 16)
        per_tick = max(1, rate // 100)
        errors, first = 0, None
        os.write(ready_w, b"r")
        t0 = next_t = time.monotonic()
        while not stop.value:
            batch = []
            for k in range(seq, seq + per_tick):
                key, val = writer_key_value(ids, offset, stride, tag, k)
                batch.append(b._resp([b"SET", key, val, b"KEEPTTL"]))
            s.sendall(b"".join(batch))
            for _ in range(per_tick):
                line = f.readline()
                if not line:
                    raise ConnectionError("connection closed")
                if line != b"+OK\r\n":
                    errors += 1
                    if first is None:
                        first = line.decode(errors="replace").strip()
            seq += per_tick
            next_t += 0.01
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_t = time.monotonic()
        secs = time.monotonic() - t0
        s.close()
        results.put((seq, errors, first, secs, None))
    except Exception as e:
        results.put((seq, 0, None, None, f"writer: {type(e).__name__}: {e}"))
        try:
            os.write(ready_w, b"x")
        except OSError:
            pass


def check_written(b, port, writer_args, count):
    """None when every key the writer set holds the last value it wrote
    (`count` SETs acknowledged), else what differs."""
    ids, offset, stride, _rate, tag = writer_args
    expected = {}
    for seq in range(count):
        key, val = writer_key_value(ids, offset, stride, tag, seq)
        expected[key] = val
    items = list(expected.items())
    bad, first = 0, None
    c = b.Conn(port, timeout=120)
    try:
        for base in range(0, len(items), 5000):
            part = items[base:base + 5000]
            c.send(b"".join(b._resp([b"GET", k]) for k, _ in part))
            for k, v in part:
                got = c.read()
                if got != v:
                    bad += 1
                    if first is None:
                        first = (k, got, v)
    finally:
        c.close()
    if not bad:
        return None
    k, got, v = first
    return (f"{bad} of {len(items)} keys the writer set do not hold its last value; "
            f"first {k.decode()}: {got!r:.80} instead of {v!r}")


def hozon_switch_lines(srv):
    """The `Background AOF rewrite finished successfully (...)` lines of
    srv's current log: [(file bytes, diff bytes copied by the switch, switch
    ms)]."""
    try:
        with open(srv.logpath, "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return []
    return [(int(m.group(1)), int(m.group(2)), float(m.group(3)))
            for m in REWRITE_SWITCH_RE.finditer(text)]


def rewrite_once(b, srv, name, variant, baseline, timeout, nkeys, writer_args, quiet_too):
    """One BGREWRITEAOF under the PING loop (and the writer when given),
    then the checks: aof_rewrites went up by one, DBSIZE unchanged, the
    writer's keys hold its last values; with quiet_too, one more rewrite
    with no other client, timed (`quiet_secs`). Returns pause_under's
    metrics plus the AOF size before and after and hozon's switch figures."""
    cfg = variant[2] if name == "hozon" else variant[3]
    r = b.command(srv.port, "CONFIG", "SET", *cfg)
    if r != "OK":
        raise b.WorkloadError(f"CONFIG SET {' '.join(cfg)} answered "
                              + (f"-{r}" if isinstance(r, RuntimeError) else repr(r)))
    before = b.info_fields(srv.port, "persistence")
    size_before = rewrite_aof_size(b, name, srv.wdir)
    switches_before = len(hozon_switch_lines(srv)) if name == "hozon" else 0
    m = pause_under(b, srv, REWRITE_JOB, baseline, timeout, writer=writer_args)
    try:
        done = int(m["info"]["aof_rewrites"]) - int(before["aof_rewrites"])
    except (KeyError, ValueError):
        done = None
    if done is not None and done != 1:
        raise b.WorkloadError(f"aof_rewrites went up by {done} during one BGREWRITEAOF")
    n = b.dbsize(srv.port)
    if n != nkeys:
        raise b.WorkloadError(f"DBSIZE {n} after the rewrite, expected {nkeys}")
    m["size_before"] = size_before
    m["size"] = rewrite_aof_size(b, name, srv.wdir)
    m["diff_peak"] = m["peaks"].get("aof_rewrite_buffer_length")
    m["switch"] = None
    if name == "hozon":
        # The line is logged when the switch is done; give the log a moment.
        deadline = time.monotonic() + 2
        while True:
            lines = hozon_switch_lines(srv)
            if len(lines) > switches_before or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if len(lines) > switches_before:
            m["switch"] = lines[-1]
    m["quiet_secs"] = None
    if quiet_too:
        # The same rewrite once more with no other client: the PING loop
        # takes a core of a small machine from the rewrite (Redis's child).
        time.sleep(0.5)
        c = b.Conn(srv.port, timeout=timeout)
        try:
            before = b.info_fields(c, "persistence")
            t0, _, t1, info, _ = run_background_job(b, c, REWRITE_JOB, timeout)
        finally:
            c.close()
        if info.get("aof_rewrites", "").isdigit() and before.get("aof_rewrites", "").isdigit() \
                and int(info["aof_rewrites"]) != int(before["aof_rewrites"]) + 1:
            raise b.WorkloadError("aof_rewrites did not go up by one during the quiet rewrite")
        n = b.dbsize(srv.port)
        if n != nkeys:
            raise b.WorkloadError(f"DBSIZE {n} after the quiet rewrite, expected {nkeys}")
        m["quiet_secs"] = (t1 - t0) / 1e9
    if writer_args is not None:
        m["writer_args"] = writer_args
        err = check_written(b, srv.port, writer_args, m["written"])
        if err:
            raise b.WorkloadError(f"after the rewrite: {err}")
    return m


def rewrite_restart(b, srv, name, nkeys, last):
    """SHUTDOWN NOSAVE, then a timed restart on the rewritten AOF; checks
    DBSIZE and the writer's keys of the `last` rewrite's metrics."""
    b.shutdown_server(srv, ["SHUTDOWN", "NOSAVE"])
    size = rewrite_aof_size(b, name, srv.wdir)
    secs, loading = b.timed_start(srv, what="its rewritten AOF")
    n = b.dbsize(srv.port)
    sl = b.server_load_secs(srv)
    if n != nkeys:
        raise b.WorkloadError(f"DBSIZE {n} after a restart on the rewritten AOF, "
                              f"expected {nkeys}")
    if last is not None and last.get("writer_args") is not None:
        err = check_written(b, srv.port, last["writer_args"], last["written"])
        if err:
            raise b.WorkloadError(f"after the restart: {err}")
    return {"secs": secs, "server_secs": sl, "size": size, "loading": loading}


def rewrite_writer_stride(n):
    """A step through the writer's key list that visits every key before
    repeating one (coprime with its length)."""
    stride = 7919
    while math.gcd(stride, n) != 1:
        stride += 2
    return stride


def rewrite(b, args, binaries, workroot):
    """The AOF-rewrite section: load the mixed dataset into both servers
    (AOF on), then per variant and round overwrite 20% of the strings and
    run one BGREWRITEAOF per server under a PING loop, alternating hozon,
    redis; after each variant's first round both restart on their
    rewritten AOF. Failures are recorded per server and phase (reported
    under the table), never raised."""
    nkeys = args.rewrite_keys
    b.log(f"rewrite: generating the mixed dataset ({nkeys:,} keys)...")
    ids = array.array("i")
    chunks, stats, samples = b.snapshot_dataset(nkeys, string_ids=ids)
    b.log(f"rewrite: {stats['commands']:,} commands, {stats['bytes'] / 1048576:,.1f} MiB of RESP")
    out = {"stats": stats, "nkeys": nkeys, "errors": [], "content": {},
           "writer_rate": args.rewrite_writer_rate, "overwritten":
           len(range(0, len(ids), REWRITE_OVERWRITE_EVERY))}
    for name in ("hozon", "redis"):
        out[name] = {"load_secs": None, "size_loaded": None, "failed": set(),
                     "runs": {v[0]: [] for v in REWRITE_VARIANTS},
                     "restart": {}}
    servers = {}

    def fail(name, phase, e):
        record_failure(b, out, "rewrite", name, phase, e)

    def ok(name, *phases):
        return not (out[name]["failed"] & {"dataset", "down", *phases})

    try:
        for name in ("hozon", "redis"):
            wdir = os.path.join(workroot, f"rewrite-{name}")
            servers[name] = b.Server(name, binaries[name], REWRITE_FLAGS, workroot,
                                     wdir=wdir).start()
        for name, srv in servers.items():
            m = out[name]
            try:
                m["load_secs"] = load_dataset(b, "rewrite", name, srv.port, chunks, nkeys)
            except Exception as e:
                fail(name, "dataset", e)
        del chunks
        if ok("hozon") and ok("redis"):
            try:
                out["content"]["loaded"] = snapshot_compare(
                    b, {n: s.port for n, s in servers.items()}, samples)
            except Exception as e:
                out["content"]["loaded"] = f"{type(e).__name__}: {e}"
        time.sleep(1.5)  # the everysec fsync of the load's tail
        for name, srv in servers.items():
            try:
                out[name]["size_loaded"] = rewrite_aof_size(b, name, srv.wdir)
            except (OSError, b.WorkloadError) as e:
                b.log(f"rewrite {name}: AOF size after the load unknown: {e}")
        stride = rewrite_writer_stride(len(ids)) if len(ids) else 1
        pass_no = 0
        for variant in REWRITE_VARIANTS:
            vkey = variant[0]
            for rnd in range(1, args.rounds + 1):
                pass_no += 1
                overwrite = rewrite_overwrite_chunks(b, ids, pass_no)
                for name, srv in servers.items():
                    if not ok(name, vkey):
                        continue
                    try:
                        _secs, errors, first = b.send_chunks(srv.port, overwrite)
                        if errors:
                            raise b.WorkloadError(f"overwriting: {errors} error replies, "
                                                  f"first: {first}")
                    except Exception as e:
                        fail(name, vkey, e)
                del overwrite
                time.sleep(1.0)  # the everysec fsync of the overwrite
                for name, srv in servers.items():
                    if not ok(name, vkey):
                        continue
                    walls = [x["wall_secs"] for runs in out[name]["runs"].values()
                             for x in runs]
                    baseline = min(10.0, max(1.0, walls[-1] if walls else 2.0))
                    writer_args = None
                    if variant[4] and len(ids):
                        writer_args = (ids, (pass_no * 100003) % len(ids), stride,
                                       args.rewrite_writer_rate, pass_no)
                    try:
                        time.sleep(0.5)
                        m = rewrite_once(b, srv, name, variant, baseline, args.timeout * 5,
                                         nkeys, writer_args, writer_args is None)
                        out[name]["runs"][vkey].append(m)
                        fork = f"{m['fork_ms']:.3f} ms" if m["fork_ms"] is not None else "n/a"
                        sw = m["switch"]
                        sw = (f"; switch {sw[2]:.3f} ms, {sw[1]:,} B of diff" if sw else "")
                        wr = (f"; writer {m['written']:,} SETs ({m['write_rate'] or 0:,.0f}/s)"
                              if m["written"] is not None else "")
                        if m["quiet_secs"] is not None:
                            wr += f"; alone: {m['quiet_secs']:.3f} s"
                        if m["diff_peak"] is not None:
                            wr += f"; largest uncopied diff seen {m['diff_peak']:,} B"
                        b.log(f"[{vkey} {rnd}/{args.rounds}] BGREWRITEAOF {name:5} done in "
                              f"{m['wall_secs']:.3f} s; PING max {m['max']:.3f} ms at "
                              f"{m['max_at_secs']:.3f} s, p99 {m['p99']:.3f} ms ({m['pings']} "
                              f"pings, {m['over_10ms']} over 10 ms; baseline "
                              f"{baseline:.1f} s: max {m['base_max']:.3f} ms, p99 "
                              f"{m['base_p99']:.3f} ms); latest_fork_usec {fork}; AOF "
                              f"{m['size_before']:,} -> {m['size']:,} B{sw}{wr}")
                    except Exception as e:
                        fail(name, vkey, e)
                if rnd != 1:
                    continue
                # A restart on the rewritten file, once per variant.
                for name, srv in servers.items():
                    runs = out[name]["runs"][vkey]
                    if not ok(name, vkey) or not runs:
                        continue
                    try:
                        rs = rewrite_restart(b, srv, name, nkeys, runs[-1])
                        out[name]["restart"][vkey] = rs
                        sl = rs["server_secs"]
                        b.log(f"[{vkey} {rnd}/{args.rounds}] restart {name:5} on the rewritten "
                              f"AOF ({rs['size']:,} B): {rs['secs']:.3f} s to +PONG (server "
                              f"log: {sl if sl is not None else 'n/a'} s), DBSIZE {nkeys}")
                    except Exception as e:
                        fail(name, f"{vkey} restart", e)
                        if not srv.alive() or b.dbsize(srv.port) is None:
                            srv.stop()
                            out[name]["failed"].add("down")
                            out["errors"].append(f"{name}: not running after that; its "
                                                 f"later phases were skipped")
                if all(out[n]["restart"].get(vkey) for n in servers) \
                        and ok("hozon") and ok("redis"):
                    try:
                        out["content"][vkey] = snapshot_compare(
                            b, {n: s.port for n, s in servers.items()}, samples)
                    except Exception as e:
                        out["content"][vkey] = f"{type(e).__name__}: {e}"
    finally:
        for srv in servers.values():
            srv.stop()
        for name in ("hozon", "redis"):
            shutil.rmtree(os.path.join(workroot, f"rewrite-{name}"), ignore_errors=True)
    return out


def print_rewrite(b, args, rw):
    h, r, st = rw["hozon"], rw["redis"], rw["stats"]
    n = rw["nkeys"]
    print(f"### AOF rewrite (issue 5): {n:,} mixed keys")
    print()
    print(f"The dataset of the snapshot section ({st['commands']:,} pipelined commands, "
          f"{st['bytes'] / 1048576:,.1f} MiB of RESP, seed {b.SNAPSHOT_SEED}; {st['string']:,} "
          f"strings, {st['hash']:,} hashes, {st['list']:,} lists, {st['set']:,} sets, "
          f"{st['zset']:,} sorted sets, {st['ttl']:,} TTLs in 2100). Both servers: "
          f"`{shlex.join(REWRITE_FLAGS)}`. Before every round {rw['overwritten']:,} strings "
          f"(every {REWRITE_OVERWRITE_EVERY}th) are overwritten (`SET … KEEPTTL`, the same "
          f"bytes to both), so the old AOF holds values the rewrite drops. Per round, "
          f"hozon then redis: a separate process runs a PING loop (one PING in flight) "
          f"for max(1 s, that server's previous rewrite time) without a rewrite "
          f"(baseline), then BGREWRITEAOF is sent and INFO persistence polled every 10 ms "
          f"until aof_rewrite_in_progress:0 and aof_rewrite_scheduled:0 (time = wall time "
          f"until then; Redis notices its child's end in serverCron, up to 100 ms later); "
          f"the pause is the longest PING round trip overlapping that window. Size = "
          f"hozon's `appendonly.aof`, Redis's base + incr files listed in "
          f"`appendonlydir/appendonly.aof.manifest`, right after the rewrite. After every "
          f"rewrite: aof_last_bgrewrite_status:ok, aof_rewrites +1, DBSIZE {n:,}. After "
          f"each variant's first round: SHUTDOWN NOSAVE, restart on the rewritten AOF "
          f"(time to +PONG), DBSIZE, the content check. {args.rounds} round(s); medians.")
    print()
    print("| measure | hozon | redis | hozon/redis | target | met |")
    print("|---------|------:|------:|------------:|--------|-----|")
    sec = lambda v: f"{v:.3f} s"  # noqa: E731
    ms = lambda v: f"{v:.2f} ms"  # noqa: E731
    mib = lambda v: f"{v / 1048576:,.1f} MiB"  # noqa: E731
    rate = lambda v: f"{v:,.0f}/s"  # noqa: E731
    dbad = lambda m: bool(m["failed"] & {"dataset"})  # noqa: E731
    print_target_row("dataset load (1 pipelined conn., AOF everysec)", h["load_secs"],
                     r["load_secs"], sec, None, dbad(h), dbad(r))
    print_target_row("AOF size after the load", h["size_loaded"], r["size_loaded"], mib,
                     None, dbad(h), dbad(r))
    print()
    for vkey, label, _hc, _rc, writer in REWRITE_VARIANTS:
        hr, rr = h["runs"][vkey], r["runs"][vkey]
        hb = bool(h["failed"] & {"dataset", vkey})
        rb = bool(r["failed"] & {"dataset", vkey})
        extra = (f" at {rw['writer_rate']:,} SET/s ({REWRITE_WRITER_VALUE_BYTES}-byte values)"
                 if writer else "")
        print(f"#### `{vkey}`: {label}{extra}")
        print()
        print("| measure | hozon | redis | hozon/redis | target | met |")
        print("|---------|------:|------:|------------:|--------|-----|")
        med = lambda runs, k: b.median_or_none([x[k] for x in runs])  # noqa: E731
        worst = lambda runs, k: max((x[k] for x in runs), default=None)  # noqa: E731

        def row(lbl, k, fmt, target=None, agg=med):
            print_target_row(lbl, agg(hr, k), agg(rr, k), fmt, target, hb, rb)

        row("**BGREWRITEAOF until done (median)**", "wall_secs", sec, REWRITE_TARGETS["wall"])
        mm = lambda runs: (f"{min(x['wall_secs'] for x in runs):.3f} / "  # noqa: E731
                           f"{max(x['wall_secs'] for x in runs):.3f} s" if runs else "n/a")
        print(f"| BGREWRITEAOF until done (min / max) | {mm(hr)} | {mm(rr)} | | | |")
        if not writer:
            row("**BGREWRITEAOF until done, no other client (median)**", "quiet_secs", sec,
                REWRITE_TARGETS["wall"])
        row("**longest PING during the rewrite (median of rounds)**", "max", ms,
            REWRITE_TARGETS["pause"])
        row("longest PING during the rewrite (worst round)", "max", ms,
            REWRITE_TARGETS["pause"], worst)
        print_target_row("redis latest_fork_usec (median) vs hozon's longest PING",
                         med(hr, "max"), med(rr, "fork_ms"), ms, None, hb, rb)
        sw = [x["switch"][2] for x in hr if x["switch"]]
        swd = [x["switch"][1] for x in hr if x["switch"]]
        sw_cell = ("n/a (errors)" if hb else
                   f"{statistics.median(sw):.2f} / {max(sw):.2f} ms" if sw else "n/a")
        print(f"| hozon's switch in its log (median / max) | {sw_cell} | — | | | |")
        swd_cell = ("n/a (errors)" if hb else
                    f"{statistics.median(swd):,.0f} / {max(swd):,} B" if swd else "n/a")
        print(f"| diff copied by hozon's switch (median / max) | {swd_cell} | — | | | |")
        when = lambda runs: (", ".join(  # noqa: E731
            f"{x['max_at_secs']:.2f}/{x['wall_secs']:.2f}" for x in runs) + " s"
            if runs else "n/a")
        print(f"| longest PING started at (s into the rewrite / its length, per round) | "
              f"{'n/a (errors)' if hb else when(hr)} | {'n/a (errors)' if rb else when(rr)} "
              f"| | | |")
        row("PINGs over 10 ms during the rewrite (median)", "over_10ms", lambda v: f"{v:g}")
        row("p99 PING during the rewrite (median)", "p99", ms)
        row("baseline, no rewrite: longest PING (median)", "base_max", ms)
        row("baseline, no rewrite: p99 PING (median)", "base_p99", ms)
        row("PING round trips during the rewrite (median)", "rate", rate)
        row("baseline, no rewrite: PING round trips (median)", "base_rate", rate)
        row("BGREWRITEAOF reply time (median)", "reply_ms", ms)
        row("AOF size before the rewrite (median)", "size_before", mib)
        if writer:
            row("AOF size after the rewrite, incl. the writes (median)", "size", mib)
            row("writer SETs acknowledged per second (median)", "write_rate", rate)
            peaks = [x["diff_peak"] for x in hr if x["diff_peak"] is not None]
            pk = ("n/a (errors)" if hb else
                  f"{statistics.median(peaks):,.0f} / {max(peaks):,} B" if peaks else "n/a")
            print(f"| hozon: largest diff not yet copied, INFO aof_rewrite_buffer_length "
                  f"while polling (median / max) | {pk} | — | | | |")
        else:
            row("**rewritten AOF size** (median)", "size", mib, REWRITE_TARGETS["size"])
            row("rewritten AOF bytes per key (median)", "size",
                lambda v: f"{v / n:.1f}")
        rs_h, rs_r = h["restart"].get(vkey), r["restart"].get(vkey)
        sbad = lambda m: bool(m["failed"] & {"dataset", "down",  # noqa: E731
                                             f"{vkey} restart"})
        print_target_row("restart on the rewritten AOF: startup to +PONG (round 1)",
                         rs_h and rs_h["secs"], rs_r and rs_r["secs"], sec, None,
                         sbad(h), sbad(r))
        print_target_row("load time in the server's log (round 1)",
                         rs_h and rs_h["server_secs"], rs_r and rs_r["server_secs"], sec,
                         None, sbad(h), sbad(r))
        print()
        if vkey in rw["content"]:
            v = rw["content"][vkey]
            print(f"- content check after the restart ({SNAPSHOT_SAMPLE_NOTE}): "
                  + ("same on both servers" if v is None else f"**differs**: {v}"))
            print()
    if "loaded" in rw["content"]:
        v = rw["content"]["loaded"]
        print("- content check after loading the dataset: "
              + ("same on both servers" if v is None else f"**differs**: {v}"))
    b.print_errors_list(rw["errors"])
