"""Memory per type (issue 31), a section of scripts/bench.

For each type of the mixed dataset (`snapshot_dataset`: string, hash,
list, set, zset), only that type's keys of the dataset (the same keys and
values as in the whole dataset) go into a fresh hozon-server and a fresh
redis-server, both `--save '' --appendonly no`, one server at a time; then
the whole mixed dataset does. Per server: RSS and INFO used_memory before
and after the load (1 s after it, for the allocator to settle), their
growth per key, DBSIZE checked. The functions take the bench module as `b`
(as bench_repl does).
"""
import shlex
import time

TYPES = ("string", "hash", "list", "set", "zset")
FLAGS = ["--save", "", "--appendonly", "no"]
SERVERS = ("hozon", "redis")


def _load(b, name, binary, workroot, chunks, nkeys):
    """One fresh server loaded with chunks: its figures (raises on a
    failed check)."""
    srv = b.Server(name, binary, FLAGS, workroot).start()
    try:
        time.sleep(0.3)
        rss0, used0 = srv.rss_kb(), b.info_used_memory(srv.port)
        secs, errors, first = b.send_chunks(srv.port, chunks)
        if errors:
            raise b.WorkloadError(f"{errors} error replies, first: {first}")
        n = b.dbsize(srv.port)
        if n != nkeys:
            raise b.WorkloadError(f"DBSIZE {n} after loading {nkeys} keys")
        time.sleep(1.0)  # let the allocator settle
        rss1, used1 = srv.rss_kb(), b.info_used_memory(srv.port)
        if not srv.alive():
            raise b.WorkloadError("server exited during the load")
    finally:
        srv.stop()
    if None in (rss0, rss1, used0, used1):
        raise b.WorkloadError("no RSS or used_memory figure")
    return {"rss_before": rss0 * 1024, "rss_after": rss1 * 1024,
            "used_before": used0, "used_after": used1, "load_secs": secs,
            "rss_per_key": (rss1 - rss0) * 1024 / nkeys,
            "used_per_key": (used1 - used0) / nkeys}


def _measure(b, binaries, workroot, label, chunks, nkeys, entry):
    resp = sum(len(p) for p, _ in chunks)
    entry.update({"keys": nkeys, "resp_bytes": resp, "errors": {}})
    for name in SERVERS:
        try:
            m = _load(b, name, binaries[name], workroot, chunks, nkeys)
            entry[name] = m
            b.log(f"memory-types {label:6} {name:5}: {nkeys:,} keys in "
                  f"{m['load_secs']:.2f} s, RSS +{m['rss_per_key']:,.1f} B/key, "
                  f"used_memory +{m['used_per_key']:,.1f} B/key")
        except Exception as e:  # the cell becomes n/a (errors), the reason listed
            msg = str(e) if isinstance(e, b.WorkloadError) else f"{type(e).__name__}: {e}"
            entry[name] = None
            entry["errors"][name] = msg
            b.log(f"memory-types {label} {name}: ERROR {msg}")


def memtypes(b, args, binaries, workroot):
    """The section's figures: {"nkeys", "stats", "types": {type: entry},
    "total": entry}; entry: {"keys", "resp_bytes", "errors", hozon, redis}
    with a server's figures (_load) or None when it failed."""
    nkeys = args.memory_types_keys
    b.log(f"memory-types: generating the mixed dataset ({nkeys:,} keys) by type...")
    t0 = time.monotonic()
    by_kind, stats, _ = b.snapshot_dataset(nkeys, by_kind=True)
    b.log(f"memory-types: generated in {time.monotonic() - t0:.1f} s: "
          + ", ".join(f"{stats[t]:,} {t}" for t in TYPES))
    out = {"nkeys": nkeys, "stats": stats, "types": {}, "total": None}
    for t in TYPES:
        chunks = by_kind.pop(t, [])
        if not stats[t]:
            continue
        out["types"][t] = {}
        _measure(b, binaries, workroot, t, chunks, stats[t], out["types"][t])
        del chunks
    del by_kind
    b.log("memory-types: generating the whole mixed dataset...")
    chunks, _, _ = b.snapshot_dataset(nkeys)
    out["total"] = {}
    _measure(b, binaries, workroot, "all", chunks, nkeys, out["total"])
    return out


def print_memtypes(b, args, r):
    st = r["stats"]
    print(f"### Memory per type (issue 31): {r['nkeys']:,} mixed keys")
    print()
    print(f"The mixed dataset of the snapshot section (seed {b.SNAPSHOT_SEED}; "
          f"{st['large_string']:,} strings of 1-10 KB, {st['large_hash']:,} hashes of 513-2000 "
          f"fields, {st['large_list']:,} lists of 200-1000 elements, {st['intset']:,} sets "
          f"of integers only and {st['large_set']:,} of 513-1500 members, "
          f"{st['large_zset']:,} sorted sets of 129-1000 members; {st['ttl']:,} keys with "
          f"an expiry). Each type's keys alone, then the whole dataset, loaded through one "
          f"pipelined connection into a fresh server (`{shlex.join(FLAGS)}`), "
          f"one server at a time; growth of RSS and of INFO used_memory from the empty "
          f"server to 1 s after the load, per key. RESP: bytes of the commands sent, "
          f"per key.")
    print()
    print("| type | keys | RESP B/key | hozon RSS B/key | redis RSS B/key | RSS hozon/redis "
          "| hozon used_memory B/key | redis used_memory B/key | used_memory hozon/redis |")
    print("|------|-----:|-----------:|----------------:|----------------:|----------------:"
          "|------------------------:|------------------------:|------------------------:|")
    errors = []
    entries = list(r["types"].items()) + ([("**all (mixed)**", r["total"])]
                                          if r["total"] else [])
    for t, e in entries:
        cells = []
        for key in ("rss_per_key", "used_per_key"):
            vals = {}
            for name in SERVERS:
                m = e.get(name)
                vals[name] = m[key] if m else None
                cells.append(f"{vals[name]:,.1f}" if m else "n/a (errors)")
            h, x = vals["hozon"], vals["redis"]
            cells.append(f"{h / x:.2f}" if h is not None and x else "n/a")
        print(f"| {t} | {e['keys']:,} | {e['resp_bytes'] / e['keys']:,.1f} | "
              + " | ".join(cells) + " |")
        errors += [f"{t} {name}: {msg}" for name, msg in e["errors"].items()]
    b.print_errors_list(errors)
