"""RDB reading (issue 6), hozon-inspect (issue 7) and hozon-repair
(issue 8), sections of scripts/bench.

`rdb_parse` (`--only-rdb`; `--skip-rdb` leaves it out): redis-server writes
an RDB of the mixed dataset, then hozon's reader (examples/rdb_bench)
against redis-check-rdb on that file. `inspect_bench` (`--only-inspect`,
`--with-inspect`) and `repair_bench` (`--only-repair`, `--with-repair`)
need no server: they time hozon-inspect and hozon-repair on files their
examples write; `only_inspect` and `only_repair` are the whole runs of
those --only-* options. The docstring of scripts/bench describes them.
The functions take the bench module as `b` (as bench_repl and
bench_memtypes do).
"""

import datetime
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time


# ---------------------------------------------------------------------------
# RDB parsing (issue 6): the reader on a large RDB written by Redis 7.0.

def build_rdb_bench(b):
    b.log("building the RDB reader benchmark (cargo build --release --example rdb_bench)...")
    p = subprocess.run(["cargo", "build", "--release", "--example", "rdb_bench"],
                       cwd=b.REPO, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        b.die("cargo build --release --example rdb_bench failed")
    exe = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(b.REPO, "target")),
                       "release", "examples", "rdb_bench")
    if not os.access(exe, os.X_OK):
        b.die(f"rdb_bench not found at {exe}")
    return exe


def rdb_parse(b, args, binaries, workroot):
    """Has redis-server write an RDB of the mixed dataset (--rdb-keys keys),
    then, alternating per round, times hozon's skip pass and full validating
    load (examples/rdb_bench) and `redis-check-rdb` on that file."""
    exe = build_rdb_bench(b)
    check = shutil.which("redis-check-rdb")
    if check is None:
        b.die("redis-check-rdb not found (apt-get install redis-tools)")
    nkeys = args.rdb_keys
    b.log(f"rdb: generating the mixed dataset ({nkeys:,} keys)...")
    chunks, stats, _samples = b.snapshot_dataset(nkeys)
    wdir = os.path.join(workroot, "rdb-redis")
    srv = b.Server("redis", binaries["redis"], b.SNAPSHOT_FLAGS, workroot, wdir=wdir).start()
    out = {"nkeys": nkeys, "errors": [], "hozon_scan": [], "hozon_check": [], "hozon_load": [],
           "check": []}
    try:
        secs, errors, first = b.send_chunks(srv.port, chunks)
        del chunks
        if errors:
            b.die(f"rdb: {errors} error replies loading the dataset into redis, first: {first}")
        b.log(f"rdb: dataset loaded into redis in {secs:.1f} s; SAVE...")
        if b.command(srv.port, "SAVE", timeout=1200) != "OK":
            b.die("rdb: redis SAVE failed")
    finally:
        srv.stop()
    path = os.path.join(wdir, "dump.rdb")
    size = os.path.getsize(path)
    out["bytes"] = size
    b.log(f"rdb: {path} is {size / 1048576:,.1f} MiB")
    for rnd in range(1, args.rounds + 1):
        p = subprocess.run([exe, path, "1"], capture_output=True, text=True)
        if p.returncode != 0:
            out["errors"].append(f"hozon: {p.stderr.strip()}")
            break
        m = json.loads(p.stdout)
        out["keys"] = m["keys"]
        out["hozon_scan"].append(m["scan_secs"])
        out["hozon_check"].append(m["check_secs"])
        out["hozon_load"].append(m["load_secs"])
        t = time.monotonic()
        c = subprocess.run([check, path], capture_output=True, text=True)
        csecs = time.monotonic() - t
        if c.returncode != 0:
            out["errors"].append(f"redis-check-rdb exit {c.returncode}: {c.stdout[-300:]}")
            break
        out["check"].append(csecs)
        b.log(f"[round {rnd}/{args.rounds}] rdb: hozon scan {m['scan_secs']:.3f} s, "
              f"hozon validating load {m['check_secs']:.3f} s, load into a keyspace "
              f"{m['load_secs']:.3f} s, redis-check-rdb {csecs:.3f} s")
    return out


def print_rdb(b, args, r):
    size = r["bytes"]
    mib = size / 1048576
    print(f"### RDB reading (issue 6): {r['nkeys']:,} mixed keys, an RDB of {mib:,.1f} MiB "
          f"written by Redis")
    print()
    print(f"Median of {len(r['check'])} round(s). The skip pass checks every length and "
          "the CRC without building values. The validating load builds every value and "
          "frees it, as `redis-check-rdb` (7.0) does with every object; hozon parses on one "
          "thread while another frees (or inserts) and a third computes the CRC. The load "
          "into a keyspace also inserts every key (what a server start does; "
          "redis-check-rdb does not). Throughput is file bytes per second; "
          "redis-check-rdb's time includes its process start.")
    print()
    print("| measure | hozon | redis-check-rdb | hozon/redis time | target |")
    print("|---------|------:|----------------:|-----------------:|--------|")
    scan = b.median_or_none(r["hozon_scan"])
    check = b.median_or_none(r["hozon_check"])
    load = b.median_or_none(r["hozon_load"])
    chk = b.median_or_none(r["check"])
    rate = lambda secs: f"{size / secs / 1e9:.2f} GB/s ({secs:.3f} s)" if secs else "n/a"  # noqa: E731
    print(f"| skip pass (no values) | {rate(scan)} | - | - | ≥ 1 GB/s: "
          f"{'yes' if scan and size / scan >= 1e9 else 'no'} |")
    ratio = f"{check / chk:.2f}" if check and chk else "n/a"
    print(f"| full validating load | {rate(check)} | {rate(chk)} | {ratio} | < 1: "
          f"{'yes' if check and chk and check < chk else 'no'} |")
    ratio = f"{load / chk:.2f}" if load and chk else "n/a"
    print(f"| load into a keyspace | {rate(load)} | - | {ratio} | - |")
    print()
    if r["errors"]:
        b.print_errors_list(r["errors"])


# ---------------------------------------------------------------------------
# hozon-inspect (issue 7): the inspector on a ~1 GB RDB and dump.hoz written
# by examples/inspect_bench, and `export --json` against rdbtools.

# The best published full-decode figure of an RDB tool that issue 7 cites
# (HDT3213/rdb), bytes per second.
PUBLISHED_RDB_TOOL_BPS = 220e6


def build_tool(b, binary, key, example):
    """Builds `binary` and `examples/<example>` (its data generator) in
    release mode; returns {key: the tool's path, "gen": the generator's}."""
    b.log(f"building {binary} and examples/{example} (cargo build --release)...")
    p = subprocess.run(["cargo", "build", "--release", "--bin", binary,
                        "--example", example], cwd=b.REPO, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        b.die(f"cargo build --release --bin {binary} --example {example} failed")
    release = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(b.REPO, "target")),
                           "release")
    out = {}
    for name, path in ((key, os.path.join(release, binary)),
                       ("gen", os.path.join(release, "examples", example))):
        if not os.access(path, os.X_OK):
            b.die(f"{path} not found after the build")
        out[name] = path
    return out


def build_inspect(b):
    """Builds hozon-inspect and the data generator; returns their paths."""
    return build_tool(b, "hozon-inspect", "inspect", "inspect_bench")


def _sample_rss(pid, stop, peak):
    """Polls /proc/PID/status every 5 ms for the peak VmRSS and RssAnon (kB):
    ru_maxrss counts the pages of a mapped file that were touched, RssAnon
    only the process's own memory."""
    path = f"/proc/{pid}/status"
    while not stop.is_set():
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(("VmRSS:", "RssAnon:")):
                        k, v = line.split(":", 1)
                        peak[k] = max(peak.get(k, 0), int(v.split()[0]))
        except (OSError, ValueError):
            pass
        stop.wait(0.005)


def run_measured(cmd, capture=False, stdout_path=None):
    """Runs cmd to completion; returns wall seconds (process start included),
    exit code, ru_maxrss (kB, from wait4), sampled peak RssAnon (kB), stdout
    (when captured) and stderr."""
    out_f = open(stdout_path, "wb") if stdout_path else None
    try:
        started = time.monotonic()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE if capture else (out_f or subprocess.DEVNULL),
                             stderr=subprocess.PIPE)
        stop, peak = threading.Event(), {}
        sampler = threading.Thread(target=_sample_rss, args=(p.pid, stop, peak), daemon=True)
        sampler.start()
        out = p.stdout.read() if capture else b""
        err = p.stderr.read()
        _, status, usage = os.wait4(p.pid, 0)
        secs = time.monotonic() - started
        p.returncode = os.waitstatus_to_exitcode(status)
        stop.set()
        sampler.join()
        if p.stdout:
            p.stdout.close()
        p.stderr.close()
    finally:
        if out_f:
            out_f.close()
    return {"secs": secs, "rc": p.returncode, "maxrss_kb": usage.ru_maxrss,
            "anon_kb": peak.get("RssAnon"), "out": out,
            "err": err.decode(errors="replace").strip()}


def count_output(cmd):
    """Runs cmd and counts the lines of its stdout (streamed); returns
    (lines, exit code, stderr)."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    n = 0
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        n += chunk.count(b"\n")
    err = p.stderr.read().decode(errors="replace").strip()
    return n, p.wait(), err


def count_in_file(path, sep):
    n, tail = 0, b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            block = tail + chunk
            n += block.count(sep)
            tail = block[-(len(sep) - 1):] if len(sep) > 1 else b""
    return n


def find_rdbtools(args):
    if args.rdbtools:
        return args.rdbtools if os.access(args.rdbtools, os.X_OK) else None
    return shutil.which("rdb") or (
        "/tmp/rdbvenv/bin/rdb" if os.access("/tmp/rdbvenv/bin/rdb", os.X_OK) else None)


def inspect_bench(b, args, workroot):
    """Generates the files, checks the inspector's outputs against the
    generator's key counts, then times info / memory / export / keys round
    by round, and rdbtools against `export --json` on a version-9 RDB."""
    built = build_inspect(b)
    # Copies: other builds may replace target/release meanwhile.
    exe = os.path.join(workroot, "hozon-inspect")
    gen = os.path.join(workroot, "inspect_bench")
    shutil.copy2(built["inspect"], exe)
    shutil.copy2(built["gen"], gen)
    wdir = os.path.join(workroot, "inspect")
    os.makedirs(wdir)
    rdb, hoz, rdb9 = (os.path.join(wdir, n) for n in ("dump.rdb", "dump.hoz", "v9.rdb"))
    out = {"errors": [], "failed": set(), "info": [], "info_full": [], "memory": [],
           "memory_rss": [],
           "memory_anon": [], "export": [], "export_rss": [], "keys": [], "export9": [],
           "rdbtools": []}

    def fail(what, msg):
        out["failed"].add(what)
        out["errors"].append(f"{what}: {msg}")
        b.log(f"inspect: {what}: ERROR {msg}")

    b.log(f"inspect: generating a {args.inspect_bytes / 1e6:,.0f} MB RDB and a dump.hoz "
          "of the same keys...")
    t = time.monotonic()
    p = subprocess.run([gen, "rdb", rdb, hoz, str(args.inspect_bytes)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        b.die(f"inspect_bench rdb failed: {p.stderr.strip()}")
    g = json.loads(p.stdout)
    out["gen"], out["gen_secs"] = g, time.monotonic() - t
    out["rdb_bytes"], out["hoz_bytes"] = os.path.getsize(rdb), os.path.getsize(hoz)
    b.log(f"inspect: {g['keys']:,} keys; RDB {out['rdb_bytes'] / 1e6:,.1f} MB, dump.hoz "
          f"{out['hoz_bytes'] / 1e6:,.1f} MB ({out['gen_secs']:.0f} s)")
    p = subprocess.run([gen, "rdb9", rdb9, str(args.inspect_rdbtools_bytes)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        b.die(f"inspect_bench rdb9 failed: {p.stderr.strip()}")
    g9 = json.loads(p.stdout)
    out["gen9"], out["rdb9_bytes"] = g9, os.path.getsize(rdb9)
    keys = g["keys"]

    # Sanity runs (they also bring the files into the page cache).
    b.log("inspect: checking outputs against the generator's key counts...")
    for what, cmd, path, want in (("keys", "keys", rdb, keys), ("export", "export", rdb, keys),
                                  ("export9", "export", rdb9, g9["keys"])):
        n, rc, err = count_output([exe, cmd, "--json", path])
        if rc != 0 or n != want:
            fail(what, f"`{cmd} --json` exit {rc}, {n:,} lines, expected {want:,} "
                       f"({err[-200:]})")
    rdbtools = find_rdbtools(args)
    out["rdbtools_path"] = rdbtools
    if rdbtools is None:
        fail("rdbtools", "rdbtools' `rdb` not found (python3 -m venv /tmp/rdbvenv && "
                         "/tmp/rdbvenv/bin/pip install rdbtools python-lzf; or --rdbtools PATH)")

    def check_json(what, r, want, field="keys"):
        if r["rc"] != 0:
            fail(what, f"exit {r['rc']}: {r['err'][-200:]}")
            return False
        try:
            doc = json.loads(r["out"])
        except ValueError as e:
            fail(what, f"not JSON: {e}")
            return False
        if doc.get(field) != want or doc.get("status") != "ok":
            fail(what, f"{field} {doc.get(field)!r}, status {doc.get('status')!r}; "
                       f"expected {want:,}, ok")
            return False
        return True

    mb = lambda n: f"{n / 1e6:,.0f} MB"  # noqa: E731
    for rnd in range(1, args.rounds + 1):
        # `info --quick` answers from the header, footer and trailer (the
        # issue's "footer" case); plain `info` also verifies every block
        # payload's checksum, so it reads the whole file.
        for what, quick in (("info", ["--quick"]), ("info_full", [])):
            for _ in range(5 if quick else 1):
                if what in out["failed"]:
                    break
                r = run_measured([exe, "info", *quick, "--json", hoz], capture=True)
                if check_json(what, r, keys):
                    out[what].append(r["secs"])
        if "memory" not in out["failed"]:
            r = run_measured([exe, "memory", "--json", "--top", "20", rdb], capture=True)
            if check_json("memory", r, keys):
                out["memory"].append(r["secs"])
                out["memory_rss"].append(r["maxrss_kb"])
                out["memory_anon"].append(r["anon_kb"])
        for what, cmd, path, rss in (("export", "export", rdb, "export_rss"),
                                     ("keys", "keys", rdb, None),
                                     ("export9", "export", rdb9, None)):
            if what in out["failed"]:
                continue
            r = run_measured([exe, cmd, "--json", path])
            if r["rc"] != 0:
                fail(what, f"exit {r['rc']}: {r['err'][-200:]}")
                continue
            out[what].append(r["secs"])
            if rss:
                out[rss].append(r["maxrss_kb"])
        if rdbtools and "rdbtools" not in out["failed"]:
            # Into a file, to count its keys: rdbtools starts every key's
            # entry on a new `\r\n` line (JSON escapes any CR/LF in data).
            # Writing ~1 byte/byte to the page cache is noise next to its
            # parse; hozon writes to /dev/null, so this favours rdbtools.
            dest = os.path.join(wdir, "rdbtools.json")
            r = run_measured([rdbtools, "--command", "json", rdb9], stdout_path=dest)
            n = count_in_file(dest, b"\r\n") if r["rc"] == 0 else None
            os.remove(dest)
            if r["rc"] != 0 or n != g9["keys"]:
                fail("rdbtools", f"exit {r['rc']}, {n} keys, expected {g9['keys']:,} "
                                 f"({r['err'][-200:]})")
            else:
                out["rdbtools"].append(r["secs"])
        last = lambda k: f"{out[k][-1]:.3f} s" if out[k] else "n/a"  # noqa: E731
        b.log(f"[round {rnd}/{args.rounds}] inspect: info --quick {last('info')}, info "
              f"{last('info_full')}, memory "
              f"{last('memory')}, export {last('export')}, keys {last('keys')}, v9 export "
              f"{last('export9')}, rdbtools {last('rdbtools')} ({mb(out['rdb9_bytes'])})")
    return out


def print_inspect(b, args, r):
    g, g9 = r["gen"], r["gen9"]
    size, hsize, size9 = r["rdb_bytes"], r["hoz_bytes"], r["rdb9_bytes"]
    bad = lambda k: k in r["failed"]  # noqa: E731
    med = lambda k: b.median_or_none(r[k])  # noqa: E731
    rate = lambda n, s: n / s if s else None  # noqa: E731
    types = ", ".join(f"{n:,} {t}" for t, n in g["types"].items())
    print(f"### hozon-inspect (issue 7): a {size / 1e6:,.1f} MB RDB (version 10) and a "
          f"{hsize / 1e6:,.1f} MB dump.hoz of the same {g['keys']:,} keys")
    print()
    print(f"Written by `examples/inspect_bench` ({types}; {g['expiring']:,} with a TTL). "
          f"Median of {args.rounds} round(s) (`info --quick`: of 5 runs per round), "
          "wall time of the "
          "whole process, files in the page cache; MB = 10^6 bytes. Peak RSS is wait4's "
          "ru_maxrss (it counts the touched pages of the mapped file); anon is the peak "
          "RssAnon sampled every 5 ms (the process's own memory).")
    print()
    print("| measure | hozon-inspect | target | met |")
    print("|---------|--------------:|--------|-----|")

    def row(label, value, target, ok):
        v = "n/a (errors)" if value is None else value
        met = "-" if ok is None else ("n/a" if value is None else ("yes" if ok else "**no**"))
        print(f"| {label} | {v} | {target} | {met} |")

    info = None if bad("info") else med("info")
    row("`info --quick` on the dump.hoz (header, footer, trailer)", info and f"{info:.3f} s",
        "< 0.1 s", info is not None and info < 0.1)
    info_full = None if bad("info_full") else med("info_full")
    row("`info` on the dump.hoz (also every block's checksum: reads the file)",
        info_full and f"{info_full:.3f} s", "-", None)
    m = None if bad("memory") else med("memory")
    mrate = rate(size, m)
    row("`memory --top 20` on the RDB", mrate and f"{mrate / 1e9:.2f} GB/s ({m:.2f} s)",
        "≥ 1 GB/s", mrate is not None and mrate >= 1e9)
    row("… against the best published RDB tool (220 MB/s)",
        mrate and f"{mrate / PUBLISHED_RDB_TOOL_BPS:.1f}×", "≥ 4×",
        mrate is not None and mrate >= 4 * PUBLISHED_RDB_TOOL_BPS)
    rss = None if bad("memory") or not r["memory_rss"] else max(r["memory_rss"])
    anon = [a for a in r["memory_anon"] if a is not None]
    row("`memory` peak RSS (max of the rounds)",
        rss and f"{rss / 1024:,.0f} MiB (anon {max(anon) / 1024:,.0f} MiB)" if anon else
        (rss and f"{rss / 1024:,.0f} MiB"), "< 100 MB",
        rss is not None and rss * 1024 < 100e6)
    e = None if bad("export") else med("export")
    erate = rate(size, e)
    row("`export --json` on the RDB (to /dev/null)",
        erate and f"{erate / 1e6:,.0f} MB/s ({e:.2f} s)", "≥ 300 MB/s",
        erate is not None and erate >= 300e6)
    k = None if bad("keys") else med("keys")
    krate = rate(size, k)
    row("`keys --json` on the RDB (context)", krate and f"{krate / 1e6:,.0f} MB/s ({k:.2f} s)",
        "-", None)
    print()
    print(f"`export --json` against rdbtools (`rdb --command json`) on a "
          f"{size9 / 1e6:,.1f} MB version-9 RDB of "
          f"{g9['keys']:,} keys (strings, plain lists, hash tables, sets, intsets, "
          "sorted sets; uncompressed), both key counts checked against the generator's:")
    print()
    print("| measure | hozon-inspect | rdbtools | hozon/rdbtools speed |")
    print("|---------|--------------:|---------:|---------------------:|")
    e9 = None if bad("export9") else med("export9")
    rt = None if bad("rdbtools") else med("rdbtools")
    cell = lambda s, failed: "n/a (errors)" if failed else (  # noqa: E731
        f"{size9 / s / 1e6:,.1f} MB/s ({s:.2f} s)" if s else "n/a")
    ratio = f"{rt / e9:,.1f}×" if e9 and rt else "n/a"
    print(f"| `export --json` / `rdb --command json` | {cell(e9, bad('export9'))} | "
          f"{cell(rt, bad('rdbtools'))} | {ratio} |")
    print()
    spread = []
    for label, key, n in (("memory", "memory", size), ("export", "export", size),
                          ("keys", "keys", size), ("v9 export", "export9", size9)):
        if r[key] and not bad(key):
            spread.append(f"{label} {min(r[key]):.2f}–{max(r[key]):.2f} s")
    if r["info"] and not bad("info"):
        spread.append(f"info --quick {min(r['info']):.3f}–{max(r['info']):.3f} s")
    if r["info_full"] and not bad("info_full"):
        spread.append(f"info {min(r['info_full']):.3f}–{max(r['info_full']):.3f} s")
    if r["rdbtools"] and not bad("rdbtools"):
        spread.append(f"rdbtools {min(r['rdbtools']):.1f}–{max(r['rdbtools']):.1f} s")
    if spread:
        print(f"Rounds: {'; '.join(spread)}.")
        print()
    if r["errors"]:
        b.print_errors_list(r["errors"])


# ---------------------------------------------------------------------------
# hozon-repair (issue 8): `check` on a ~1 GB Redis-format AOF and a ~1 GB
# hozon AOF written by examples/repair_bench, against redis-check-aof on the
# Redis-format file, and on damaged copies of both.

REPAIR_TARGET_BPS = 500e6


def build_repair(b):
    """Builds hozon-repair and the AOF generator; returns their paths."""
    return build_tool(b, "hozon-repair", "repair", "repair_bench")


def damage_copy(b, src, dst, sep):
    """Copies src to dst and overwrites 3 bytes at the first command start
    (`\r\n*...`: sep, the damage lands on its `*`) after the middle of the
    file; returns the offset of the damage."""
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as f:
        mid = os.path.getsize(dst) // 2
        f.seek(mid)
        chunk = f.read(1 << 20)
        i = chunk.find(sep)
        if i < 0:
            b.die(f"no {sep!r} after the middle of {src}")
        at = mid + i + 2
        f.seek(at)
        f.write(b"!\xd5\xf2")
    return at


def repair_bench(b, args, workroot):
    """Generates the AOFs and their damaged copies, checks the tools'
    verdicts, then times `hozon-repair check` and redis-check-aof round by
    round (files in the page cache)."""
    built = build_repair(b)
    exe = os.path.join(workroot, "hozon-repair")
    gen = os.path.join(workroot, "repair_bench")
    shutil.copy2(built["repair"], exe)
    shutil.copy2(built["gen"], gen)
    rca = shutil.which(args.redis_check_aof)
    wdir = os.path.join(workroot, "repair")
    os.makedirs(wdir)
    files = {n: os.path.join(wdir, f"{n}.aof")
             for n in ("redis", "hozon", "redis_damaged", "hozon_damaged")}
    keys = ("hz_redis", "hz_hozon", "rca_redis", "hz_redis_damaged", "rca_redis_damaged",
            "hz_hozon_damaged")
    out = {"errors": [], "failed": set(), "rca_path": rca, **{k: [] for k in keys}}

    def fail(what, msg):
        if what not in out["failed"]:
            out["errors"].append(f"{what}: {msg}")
            b.log(f"repair: {what}: ERROR {msg}")
        out["failed"].add(what)

    for fmt in ("redis", "hozon"):
        b.log(f"repair: generating a {args.repair_bytes / 1e6:,.0f} MB {fmt} AOF...")
        t = time.monotonic()
        p = subprocess.run([gen, fmt, files[fmt], str(args.repair_bytes)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            b.die(f"repair_bench {fmt} failed: {p.stderr.strip()}")
        out[f"gen_{fmt}"] = json.loads(p.stdout)
        out[f"{fmt}_bytes"] = os.path.getsize(files[fmt])
        b.log(f"repair: {fmt}: {out[f'{fmt}_bytes'] / 1e6:,.1f} MB, "
              f"{out[f'gen_{fmt}']['commands']:,} commands ({time.monotonic() - t:.1f} s)")
    out["redis_damage_at"] = damage_copy(b, files["redis"], files["redis_damaged"], b"\r\n*")
    # A command's `*` is inside a batch body (never an annotation).
    out["hozon_damage_at"] = damage_copy(b, files["hozon"], files["hozon_damaged"], b"\r\n*")

    def hz_check(what, path, damaged_at):
        """One `hozon-repair check --json` run, its verdict checked: clean
        files exit 0 with 0 problems; a damaged copy exits 1 with a problem
        whose range holds the damaged bytes."""
        r = run_measured([exe, "check", "--json", path], capture=True)
        try:
            doc = json.loads(r["out"])
        except ValueError as e:
            fail(what, f"exit {r['rc']}, not JSON ({e}): {r['err'][-200:]}")
            return
        problems = doc.get("problems") or []
        if damaged_at is None:
            if r["rc"] != 0 or doc.get("summary", {}).get("problems") != 0:
                fail(what, f"exit {r['rc']}, {len(problems)} problem(s) on a clean file: "
                           f"{problems[:1]}")
                return
        else:
            hit = [p for p in problems if p.get("start", -1) <= damaged_at < p.get("end", -1)]
            if r["rc"] != 1 or not hit:
                fail(what, f"exit {r['rc']}, {len(problems)} problem(s), none covering the "
                           f"damage at byte {damaged_at:,}")
                return
            out[f"{what}_found"] = (len(problems), hit[0].get("kind"))
        out[what].append(r["secs"])

    ok_re = re.compile(rb"ok_up_to=(\d+)")

    def rca_check(what, path, damaged_at):
        """One redis-check-aof run: a clean file must be `valid` (exit 0); on
        the damaged copy it must stop at the damaged command (exit 1)."""
        r = run_measured([rca, path], capture=True)
        m = ok_re.search(r["out"])
        ok_up_to = int(m.group(1)) if m else None
        if damaged_at is None:
            if r["rc"] != 0 or b"is valid" not in r["out"]:
                fail(what, f"exit {r['rc']}: {r['out'][-200:]!r}")
                return
        else:
            out["rca_stopped_at"] = ok_up_to
            if r["rc"] == 0 or b"is not valid" not in r["out"]:
                fail(what, f"exit {r['rc']} on the damaged copy: {r['out'][-200:]!r}")
                return
        out[what].append(r["secs"])

    for rnd in range(1, args.rounds + 1):
        # A warm-up round first: it reads every file into the page cache
        # (they were just written, so they mostly are) and checks verdicts.
        for warm in range(2 if rnd == 1 else 1):
            hz_check("hz_redis", files["redis"], None)
            hz_check("hz_hozon", files["hozon"], None)
            hz_check("hz_redis_damaged", files["redis_damaged"], out["redis_damage_at"])
            hz_check("hz_hozon_damaged", files["hozon_damaged"], out["hozon_damage_at"])
            if rca is None:
                fail("rca_redis", f"redis-check-aof not found ('{args.redis_check_aof}'; "
                                  "apt-get install redis-tools)")
                fail("rca_redis_damaged", "redis-check-aof not found")
            else:
                rca_check("rca_redis", files["redis"], None)
                rca_check("rca_redis_damaged", files["redis_damaged"], out["redis_damage_at"])
            if rnd == 1 and warm == 0:
                for k in keys:
                    out[k].clear()
        last = lambda k: f"{out[k][-1]:.2f} s" if out[k] else "n/a"  # noqa: E731
        b.log(f"[round {rnd}/{args.rounds}] repair: check redis {last('hz_redis')}, hozon "
              f"{last('hz_hozon')}, redis damaged {last('hz_redis_damaged')}, hozon damaged "
              f"{last('hz_hozon_damaged')}; redis-check-aof {last('rca_redis')}, damaged "
              f"{last('rca_redis_damaged')}")
    for path in files.values():
        os.remove(path)
    return out


def print_repair(b, args, r):
    g, gh = r["gen_redis"], r["gen_hozon"]
    size, hsize = r["redis_bytes"], r["hozon_bytes"]
    bad = lambda k: k in r["failed"]  # noqa: E731
    med = lambda k: None if bad(k) else b.median_or_none(r[k])  # noqa: E731
    mbs = lambda n, s: f"{n / s / 1e6:,.0f} MB/s ({s:.2f} s)"  # noqa: E731
    cell = lambda n, k: "n/a (errors)" if med(k) is None else mbs(n, med(k))  # noqa: E731
    print(f"### hozon-repair (issue 8): `check` on a {size / 1e6:,.1f} MB Redis-format AOF "
          f"and a {hsize / 1e6:,.1f} MB hozon AOF")
    print()
    print(f"Written by `examples/repair_bench`: the Redis file is plain RESP, Redis 7 style "
          f"(`SELECT 0`, a `#TS:` line every 1000 commands: {g['ts_lines']:,}), "
          f"{g['commands']:,} commands ({g['transactions']:,} MULTI/EXEC blocks); the hozon "
          f"file holds the same mix in {gh['batches']:,} checksummed batches of 1-128 "
          f"commands ({gh['commands']:,} commands). Mix: SET with 10-200 byte values (some "
          "with PXAT), HSET, RPUSH, SADD, ZADD, PEXPIREAT, INCR, DEL. Median of "
          f"{args.rounds} round(s) after a warm-up run, wall time of the whole process, files "
          "in the page cache; MB = 10^6 bytes. The damaged copies have 3 bytes overwritten "
          f"after the middle (Redis file: a command's `*` at byte "
          f"{r['redis_damage_at']:,}; hozon file: inside a batch body at byte "
          f"{r['hozon_damage_at']:,}).")
    print()
    print("| measure | hozon-repair `check` | redis-check-aof | hozon/redis-check-aof speed "
          "| target ≥ 500 MB/s |")
    print("|---------|---------------------:|----------------:|----------------------------:"
          "|-------------------|")
    hz, rc = med("hz_redis"), med("rca_redis")
    ratio = f"{rc / hz:,.1f}×" if hz and rc else "n/a"
    met = lambda s, n: "n/a" if s is None else (  # noqa: E731
        "yes" if n / s >= REPAIR_TARGET_BPS else "**no**")
    print(f"| Redis-format AOF, valid | {cell(size, 'hz_redis')} | {cell(size, 'rca_redis')} "
          f"| {ratio} | {met(hz, size)} |")
    print(f"| hozon AOF, valid (CRC-32 of every batch) | {cell(hsize, 'hz_hozon')} | - | - "
          f"| {met(med('hz_hozon'), hsize)} |")
    hd, rd = med("hz_redis_damaged"), med("rca_redis_damaged")
    found = r.get("hz_redis_damaged_found")
    hz_cell = "n/a (errors)" if hd is None else (
        f"{mbs(size, hd)}: exit 1, {found[0]} problem(s), `{found[1]}`")
    stop = r.get("rca_stopped_at")
    rc_cell = "n/a (errors)" if rd is None else (
        f"{rd:.2f} s: exit 1, stops at the first problem (ok_up_to={stop:,})")
    print(f"| Redis-format AOF, damaged | {hz_cell} | {rc_cell} | - (redis-check-aof reads "
          f"only up to the damage) | {met(hd, size)} |")
    hh = med("hz_hozon_damaged")
    found = r.get("hz_hozon_damaged_found")
    hz_cell = "n/a (errors)" if hh is None else (
        f"{mbs(hsize, hh)}: exit 1, {found[0]} problem(s), `{found[1]}`")
    print(f"| hozon AOF, damaged | {hz_cell} | - | - | {met(hh, hsize)} |")
    print()
    spread = [f"{label} {min(r[k]):.2f}–{max(r[k]):.2f} s"
              for label, k in (("check redis", "hz_redis"), ("check hozon", "hz_hozon"),
                               ("check redis damaged", "hz_redis_damaged"),
                               ("check hozon damaged", "hz_hozon_damaged"),
                               ("redis-check-aof", "rca_redis"),
                               ("redis-check-aof damaged", "rca_redis_damaged"))
              if r[k] and not bad(k)]
    if spread:
        print(f"Rounds: {'; '.join(spread)}.")
        print()
    if r["errors"]:
        b.print_errors_list(r["errors"])


def run_alone(b, args, bench):
    """Runs a section that needs no server, `bench(b, args, workroot)`, in
    a fresh work directory: (the build's label, the start time, its
    results), or None when interrupted."""
    rev = args.hozon_label or b.git_rev()
    workroot = tempfile.mkdtemp(prefix="hozon-bench-")
    b._tmpdirs.append(workroot)
    started = datetime.datetime.now().astimezone()
    try:
        return rev, started, bench(b, args, workroot)
    except KeyboardInterrupt:
        b.log("bench: interrupted")
        return None
    finally:
        b._cleanup()


def only_repair(b, args):
    """--only-repair: the hozon-repair section alone (no server needed)."""
    ran = run_alone(b, args, repair_bench)
    if ran is None:
        return 130
    rev, started, r = ran
    rca = r["rca_path"]
    # redis-check-aof has no --version: name its package's.
    try:
        rca_version = subprocess.run(["dpkg-query", "-W", "-f=redis-tools ${Version}",
                                      "redis-tools"], capture_output=True, text=True,
                                     stdin=subprocess.DEVNULL).stdout.strip() or None
    except OSError:
        rca_version = None
    print(f"## hozon-repair benchmark, {started.strftime('%Y-%m-%d %H:%M %Z')}")
    print()
    print(f"- machine: {b.machine_line()}")
    print(f"- hozon: {rev} (release build)")
    print(f"- redis-check-aof: {rca or 'not found'}{f' ({rca_version})' if rca_version else ''}")
    print(f"- mode: {'quick, ' if args.quick else ''}{args.rounds} round(s)")
    print()
    print_repair(b, args, r)
    return 0


def only_inspect(b, args):
    """--only-inspect: the hozon-inspect section alone (no server needed)."""
    ran = run_alone(b, args, inspect_bench)
    if ran is None:
        return 130
    rev, started, r = ran
    print(f"## hozon-inspect benchmark, {started.strftime('%Y-%m-%d %H:%M %Z')}")
    print()
    print(f"- machine: {b.machine_line()}")
    print(f"- hozon: {rev} (release build)")
    print(f"- mode: {'quick, ' if args.quick else ''}{args.rounds} round(s)")
    print()
    print_inspect(b, args, r)
    return 0
