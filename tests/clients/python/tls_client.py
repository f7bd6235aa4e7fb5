"""redis-py over TLS against a server's TLS port on 127.0.0.1.

Run by tests/robustness/tls/clients.rs:

    tls_client.py PORT CA_CERT CLIENT_CERT CLIENT_KEY

Connects with a client certificate, runs commands, a pipeline, a large
value and Pub/Sub over TLS, then checks that a connection without a
client certificate is refused. Exits 0 when every check holds; the last
line of stdout is a JSON summary (the same for every server that passes).
"""

import json
import ssl
import sys

import redis


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    port, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    r = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=ca,
                    ssl_certfile=cert, ssl_keyfile=key, socket_timeout=20)
    check(r.ping() is True, "PING")
    r.set("tls:str", "value")
    check(r.get("tls:str") == b"value", "GET after SET")

    pipe = r.pipeline(transaction=False)
    for i in range(2000):
        pipe.set(f"tls:k{i}", f"v{i}")
    results = pipe.execute()
    check(all(x is True for x in results), "pipelined SETs")
    values = r.mget([f"tls:k{i}" for i in range(2000)])
    check(values == [f"v{i}".encode() for i in range(2000)], "MGET of the pipelined keys")

    big = bytes(range(256)) * (4 * 1024 * 8)  # 8 MiB
    r.set("tls:big", big)
    check(r.get("tls:big") == big, "an 8 MiB value round trip")

    pipe = r.pipeline(transaction=True)
    pipe.incr("tls:counter").incr("tls:counter").get("tls:counter")
    check(pipe.execute() == [1, 2, b"2"], "MULTI/EXEC")

    sub = r.pubsub()
    sub.subscribe("tls:channel")
    first = sub.get_message(timeout=10)
    check(first is not None and first["type"] == "subscribe", f"subscribe: {first}")
    receivers = r.publish("tls:channel", "hello")
    message = sub.get_message(timeout=10)
    check(message is not None and message["data"] == b"hello", f"message: {message}")
    sub.close()

    refused = False
    try:
        anon = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=ca,
                           socket_timeout=10)
        anon.ping()
    except (redis.exceptions.ConnectionError, ssl.SSLError, OSError):
        refused = True
    check(refused, "a client without a certificate was served")

    summary = {"dbsize": r.dbsize(), "receivers": receivers, "big": len(big),
               "anonymous_refused": refused}
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}")
        sys.exit(1)
