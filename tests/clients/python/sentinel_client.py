"""redis-py's Sentinel discovery across a failover.

Run by tests/ha/sentinel.rs:

    sentinel_client.py SENTINEL_PORT[,SENTINEL_PORT...] SECONDS

Writes `py:<n>` keys one after the other through
`Sentinel.master_for('mymaster')` for up to SECONDS, retrying a failed
write on the master Sentinel names next. Stops once it has written 20 keys
on a second master. Exits 0 when it did; otherwise prints why and exits 1.
The last line of stdout is a JSON summary.
"""

import json
import sys
import time

from redis.exceptions import ConnectionError, ReadOnlyError, TimeoutError
from redis.sentinel import MasterNotFoundError, Sentinel


def main():
    ports = [int(p) for p in sys.argv[1].split(",")]
    seconds = float(sys.argv[2])
    sentinel = Sentinel([("127.0.0.1", p) for p in ports], socket_timeout=0.5)
    master = sentinel.master_for("mymaster", socket_timeout=0.5)
    masters = []
    written = {}
    errors = 0
    n = 0
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            address = sentinel.discover_master("mymaster")
            if not masters or masters[-1] != list(address):
                masters.append(list(address))
            master.set(f"py:{n}", n)
            written[str(address)] = written.get(str(address), 0) + 1
            n += 1
            if len(masters) >= 2 and written.get(str(tuple(masters[-1])), 0) >= 20:
                break
        except (ConnectionError, TimeoutError, ReadOnlyError, MasterNotFoundError):
            errors += 1
            time.sleep(0.05)
    summary = {"masters": masters, "written": written, "errors": errors, "keys": n}
    ok = len(masters) >= 2 and written.get(str(tuple(masters[-1])), 0) >= 20
    if not ok:
        print("the client did not keep writing on a new master")
    print(json.dumps(summary))
    sys.exit(0 if ok else 1)


main()
