//! Abusive clients: each case runs the abuse against a real hozon-server
//! and measures that its memory stays under a stated bound and that
//! another client's PING is answered within [`LIVENESS`] meanwhile; where
//! Redis 7.0's behaviour is observable, the same abuse goes to a real
//! redis-server and the outcomes are compared.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::{
    closed_within, flood_without_reading, peak_rss_kb, reset_peak_rss, rss_kb,
    spawn_with_open_files, Probe, LIVENESS,
};
use crate::harness::{encode_command, show, start_hozon, start_redis, Conn, Pair};

const MIB_KB: u64 = 1024;

/// Everything the server sends on `conn` until it closes (at most 5 s).
fn until_close(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut conn = Conn::connect(port);
    conn.send_raw(bytes);
    conn.read_until_close()
}

#[test]
fn a_bulk_at_proto_max_bulk_len_is_taken_and_one_byte_more_refused_like_redis() {
    const LIMIT: usize = 16 * 1024 * 1024;
    let limit_arg = LIMIT.to_string();
    let args = ["--proto-max-bulk-len", limit_arg.as_str()];
    let mut p = Pair::with_args(&args, &args);
    let mut probe = Probe::connect(p.hozon_server.port);
    let rss_before = rss_kb(p.hozon_server.pid());
    let value = vec![b'v'; LIMIT];
    let request = encode_command(&[b"SET", b"big", &value]);
    // Sent in 1 MiB pieces with a PING from another client between them:
    // a request arriving slowly does not hold the server.
    let (mut r, mut h) = p.connect_more();
    for piece in request.chunks(1024 * 1024) {
        r.send_raw(piece);
        h.send_raw(piece);
        probe.ping();
    }
    assert_eq!(show(&r.read_reply()), show(&h.read_reply()));
    p.check(&["STRLEN", "big"]);
    let grown_kb = rss_kb(p.hozon_server.pid()).saturating_sub(rss_before);
    // The value once in the keyspace, plus the query buffer it came in
    // (released once executed) and allocator slack: at most 4x.
    assert!(
        grown_kb < 4 * (LIMIT as u64 / 1024),
        "hozon grew by {grown_kb} KiB for one {LIMIT}-byte value"
    );
    // One byte over the limit: the same protocol error, then the close.
    let over = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", LIMIT + 1);
    assert_eq!(
        show(&until_close(p.redis_server.port, over.as_bytes())),
        show(&until_close(p.hozon_server.port, over.as_bytes()))
    );
    probe.ping();
}

#[test]
fn a_multibulk_of_two_million_arguments_is_executed_like_redis_without_stalling_others() {
    const ELEMENTS: usize = 2_000_000;
    let mut p = Pair::new();
    let mut probe = Probe::connect(p.hozon_server.port);
    let rss_before = rss_kb(p.hozon_server.pid());
    let mut request = format!("*{}\r\n$5\r\nRPUSH\r\n$4\r\nlist\r\n", ELEMENTS + 2).into_bytes();
    for i in 0..ELEMENTS {
        let element = format!("{:06}", i % 1_000_000);
        request.extend_from_slice(format!("$6\r\n{element}\r\n").as_bytes());
    }
    let (mut r, mut h) = p.connect_more();
    let mut max_rss_kb = 0;
    for piece in request.chunks(2 * 1024 * 1024) {
        r.send_raw(piece);
        h.send_raw(piece);
        probe.ping();
        max_rss_kb = max_rss_kb.max(rss_kb(p.hozon_server.pid()));
    }
    assert_eq!(show(&r.read_reply()), show(&h.read_reply()));
    max_rss_kb = max_rss_kb.max(rss_kb(p.hozon_server.pid()));
    p.check(&["LLEN", "list"]);
    p.check(&["LINDEX", "list", "1234567"]);
    probe.ping();
    // 25 MB of request: the buffered request, the parsed argument list
    // (24 bytes per argument) and the list itself (~2 MB per 100k
    // elements) stay well under 400 MiB.
    let grown_kb = max_rss_kb.saturating_sub(rss_before);
    assert!(
        grown_kb < 400 * MIB_KB,
        "hozon grew by {grown_kb} KiB for a {}-byte multibulk",
        request.len()
    );
}

#[test]
fn nested_and_resp3_aggregates_in_requests_are_protocol_errors_like_redis() {
    let p = Pair::new();
    let mut deep = Vec::new();
    for _ in 0..100_000 {
        deep.extend_from_slice(b"*1\r\n");
    }
    deep.extend_from_slice(b"$4\r\nPING\r\n");
    for input in [
        &b"*1\r\n*1\r\n$4\r\nPING\r\n"[..],
        &deep,
        b"*2\r\n$4\r\nECHO\r\n%1\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"*2\r\n$4\r\nECHO\r\n~1\r\n$1\r\na\r\n",
        b"*2\r\n$4\r\nECHO\r\n>1\r\n$1\r\na\r\n",
        b"*1\r\n_\r\n",
        b"*1\r\n#t\r\n",
        b"*1\r\n,1.5\r\n",
        b"*1\r\n(1\r\n",
        b"*1\r\n=5\r\ntxt:x\r\n",
        b"*1\r\n!3\r\nerr\r\n",
    ] {
        assert_eq!(
            show(&until_close(p.redis_server.port, input)),
            show(&until_close(p.hozon_server.port, input)),
            "input {}",
            show(&input[..input.len().min(60)])
        );
    }
    // A RESP3 aggregate at the start of a request is an inline command
    // named after it on both (unknown command), not a protocol error.
    let mut p = p;
    let (mut r, mut h) = p.connect_more();
    for input in [&b"%1\r\n"[..], b"~2\r\n", b">1\r\n"] {
        r.send_raw(input);
        h.send_raw(input);
        assert_eq!(show(&r.read_reply()), show(&h.read_reply()));
    }
    p.check(&["PING"]);
}

#[test]
fn many_connections_dribbling_partial_requests_do_not_stall_the_server() {
    // Slowloris: 300 connections each send a request one byte per round.
    // Between rounds a probe's PING must come back within LIVENESS, and
    // every request completes with its reply at the end.
    const CONNECTIONS: usize = 300;
    let server = start_hozon(&[]);
    let mut probe = Probe::connect(server.port);
    let rss_before = rss_kb(server.pid());
    let mut conns: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
            s.set_nodelay(true).expect("nodelay");
            s.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            s
        })
        .collect();
    let requests: Vec<Vec<u8>> = (0..CONNECTIONS)
        .map(|i| {
            let value = format!("value-{i}-{}", "x".repeat(40));
            encode_command(&[b"SET", format!("slow:{i}").as_bytes(), value.as_bytes()])
        })
        .collect();
    let longest = requests.iter().map(Vec::len).max().expect("requests");
    for round in 0..longest {
        for (conn, request) in conns.iter_mut().zip(&requests) {
            if let Some(byte) = request.get(round) {
                conn.write_all(&[*byte]).expect("dribble a byte");
            }
        }
        if round % 8 == 0 {
            probe.ping();
        }
    }
    for conn in &mut conns {
        let mut reply = [0u8; 5];
        conn.read_exact(&mut reply)
            .expect("reply to the dribbled SET");
        assert_eq!(&reply, b"+OK\r\n");
    }
    assert_eq!(
        probe.call_inline("DBSIZE"),
        format!(":{CONNECTIONS}\r\n").as_bytes()
    );
    let grown_kb = rss_kb(server.pid()).saturating_sub(rss_before);
    // A few KiB of buffers per connection.
    assert!(
        grown_kb < 64 * MIB_KB,
        "hozon grew by {grown_kb} KiB for {CONNECTIONS} dribbling connections"
    );
    eprintln!(
        "slowloris: {CONNECTIONS} connections, {longest} rounds, slowest PING {:?}, RSS +{grown_kb} KiB",
        probe.slowest
    );
}

#[test]
fn idle_partial_requests_are_closed_by_timeout_like_redis() {
    let args = ["--timeout", "1"];
    let redis = start_redis(&args);
    let hozon = start_hozon(&args);
    for port in [redis.port, hozon.port] {
        let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        conn.write_all(b"*2\r\n$3\r\nGET\r\n$3\r\nab")
            .expect("half a request");
        // Redis checks idle clients in its cron (up to a few seconds late).
        assert!(
            closed_within(&mut conn, Duration::from_secs(8)),
            "the server on port {port} did not close an idle client"
        );
    }
}

#[test]
fn more_connections_than_maxclients_are_refused_like_redis() {
    const MAX: usize = 20;
    let max = MAX.to_string();
    let args = ["--maxclients", max.as_str()];
    let redis = start_redis(&args);
    let hozon = start_hozon(&args);
    let mut outcomes = Vec::new();
    for server in [&redis, &hozon] {
        let mut probe = Probe::connect(server.port);
        let mut kept: Vec<Conn> = (1..MAX).map(|_| Conn::connect(server.port)).collect();
        for conn in &mut kept {
            assert_eq!(conn.call(&[b"PING"]), b"+PONG\r\n");
        }
        let rss_before = rss_kb(server.pid());
        // A burst of connections over the limit: each is told and closed.
        let mut refusals = Vec::new();
        for _ in 0..200 {
            let mut extra = Conn::connect(server.port);
            refusals.push(extra.read_until_close());
        }
        probe.ping();
        for conn in &mut kept {
            assert_eq!(conn.call(&[b"PING"]), b"+PONG\r\n");
        }
        let grown_kb = rss_kb(server.pid()).saturating_sub(rss_before);
        assert!(grown_kb < 16 * MIB_KB, "grew by {grown_kb} KiB");
        // One closes: a new connection is served again.
        drop(kept.pop());
        assert!(probe.wait_for_clients(MAX as u64 - 1, Duration::from_secs(5)));
        let mut again = Conn::connect(server.port);
        let served = again.call(&[b"PING"]);
        refusals.dedup();
        outcomes.push((refusals, served));
    }
    assert_eq!(
        outcomes[0].0.len(),
        1,
        "Redis refused every extra client alike"
    );
    assert_eq!(
        show(&outcomes[0].0[0]),
        "-ERR max number of clients reached\\r\\n"
    );
    assert_eq!(
        outcomes[0].0.iter().map(|r| show(r)).collect::<Vec<_>>(),
        outcomes[1].0.iter().map(|r| show(r)).collect::<Vec<_>>()
    );
    assert_eq!(outcomes[0].1, outcomes[1].1);
}

#[test]
fn a_low_open_files_limit_lowers_maxclients_and_refuses_the_excess_like_redis() {
    // Under `ulimit -n 64` both servers lower maxclients to 64 - 32: a
    // client over it is told so, rather than waiting in the listen queue
    // for an accept that fails for want of descriptors.
    let redis = spawn_with_open_files(&crate::harness::redis_server_path(), 64, &[]);
    let hozon = spawn_with_open_files(env!("CARGO_BIN_EXE_hozon-server"), 64, &[]);
    let mut outcomes = Vec::new();
    for port in [redis.port, hozon.port] {
        let mut probe = Probe::connect(port);
        let maxclients = probe.call_inline("CONFIG GET maxclients");
        let mut kept: Vec<Conn> = (1..32).map(|_| Conn::connect(port)).collect();
        for conn in &mut kept {
            assert_eq!(conn.call(&[b"PING"]), b"+PONG\r\n");
        }
        let mut refusals: Vec<Vec<u8>> = (0..40)
            .map(|_| Conn::connect(port).read_until_close())
            .collect();
        refusals.dedup();
        probe.ping();
        outcomes.push((
            show(&maxclients),
            refusals.iter().map(|r| show(r)).collect::<Vec<_>>(),
        ));
    }
    assert_eq!(
        outcomes[0].0,
        "*2\\r\\n$10\\r\\nmaxclients\\r\\n$2\\r\\n32\\r\\n"
    );
    assert_eq!(
        outcomes[0].1,
        vec!["-ERR max number of clients reached\\r\\n".to_string()]
    );
    assert_eq!(outcomes[0], outcomes[1]);
}

/// `GET v` for a 1 KiB value: 22 bytes in, 1 KiB out.
fn get_v() -> (Vec<u8>, Vec<u8>) {
    let value = vec![b'x'; 1024];
    let mut reply = b"$1024\r\n".to_vec();
    reply.extend_from_slice(&value);
    reply.extend_from_slice(b"\r\n");
    (encode_command(&[b"GET", b"v"]), reply)
}

#[test]
fn clients_that_never_read_their_replies_are_paused_and_memory_stays_bounded() {
    // With Redis's default `client-output-buffer-limit normal 0 0 0` Redis
    // buffers every reply of such a client (its memory grows without
    // bound); hozon stops executing a client's input while 1 MiB of its
    // output is unsent, and goes on when the client reads.
    const FLOODERS: usize = 8;
    let server = start_hozon(&[]);
    let mut probe = Probe::connect(server.port);
    let value = "x".repeat(1024);
    assert_eq!(probe.call_inline(&format!("SET v {value}")), b"+OK\r\n");
    let (request, reply) = get_v();
    let rss_before = rss_kb(server.pid());
    let port = server.port;
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|_| {
            let request = request.clone();
            std::thread::spawn(move || {
                flood_without_reading(
                    port,
                    &request,
                    64 * 1024 * 1024,
                    Duration::from_millis(500),
                    Duration::from_secs(10),
                )
            })
        })
        .collect();
    let mut max_rss_kb = 0;
    while !flooders.iter().all(|f| f.is_finished()) {
        probe.ping();
        max_rss_kb = max_rss_kb.max(rss_kb(server.pid()));
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut floods: Vec<_> = flooders
        .into_iter()
        .map(|f| f.join().expect("flooder thread"))
        .collect();
    max_rss_kb = max_rss_kb.max(rss_kb(server.pid()));
    probe.ping();
    let sent: usize = floods.iter().map(|f| f.bytes_sent).sum();
    let asked_kb = (sent / request.len() * reply.len() / 1024) as u64;
    let grown_kb = max_rss_kb.saturating_sub(rss_before);
    eprintln!(
        "never-reading clients: {FLOODERS} sent {sent} bytes of GETs ({asked_kb} KiB of replies asked), RSS +{grown_kb} KiB, slowest PING {:?}",
        probe.slowest
    );
    assert!(floods.iter().all(|f| !f.closed_by_server));
    // Per client: 1 MiB of paused output (2 MiB of buffer), one read's
    // worth of query buffer; the rest waits in the sockets.
    assert!(
        grown_kb < 64 * MIB_KB,
        "hozon grew by {grown_kb} KiB while {FLOODERS} clients asked for {asked_kb} KiB of replies without reading"
    );
    assert!(
        asked_kb > 4 * grown_kb,
        "the flood was too small to show anything ({asked_kb} KiB asked)"
    );
    // Nothing was lost: the first flooder reads every reply it asked for,
    // the server resuming its input as it reads.
    let flood = &mut floods[0];
    let complete = flood.bytes_sent / request.len();
    let partial = flood.bytes_sent % request.len();
    let expected_bytes = complete * reply.len();
    flood
        .stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut chunk = vec![0u8; 1024 * 1024];
    let mut got = 0usize;
    let mut carry: Vec<u8> = Vec::new();
    while got < expected_bytes {
        assert!(
            Instant::now() < deadline,
            "replies did not come within 60 s"
        );
        let n = flood.stream.read(&mut chunk).expect("read replies");
        assert!(n > 0, "server closed the flooder after {got} bytes");
        // Check the bytes against the expected stream of identical replies.
        carry.extend_from_slice(&chunk[..n]);
        let whole = carry.len() / reply.len() * reply.len();
        for one in carry[..whole].chunks(reply.len()) {
            assert_eq!(one, &reply[..], "reply bytes at offset {got}");
        }
        got += n;
        carry.drain(..whole);
    }
    assert_eq!(got, expected_bytes, "no reply beyond the complete requests");
    // The request cut in the middle completes, then a PING.
    let mut rest = request[partial..].to_vec();
    if partial == 0 {
        rest.clear();
    }
    rest.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
    flood.stream.write_all(&rest).expect("finish the flood");
    let mut tail = if partial == 0 {
        Vec::new()
    } else {
        reply.clone()
    };
    tail.extend_from_slice(b"+PONG\r\n");
    let mut received = vec![0u8; tail.len()];
    flood
        .stream
        .read_exact(&mut received)
        .expect("last replies");
    assert_eq!(show(&received), show(&tail));
}

#[test]
fn a_configured_normal_output_limit_disconnects_like_redis() {
    let (request, _) = get_v();
    let value = "x".repeat(1024);
    for limit in ["normal 1mb 0 0", "normal 0 256kb 1"] {
        let args = ["--client-output-buffer-limit", limit];
        for server in [start_redis(&args), start_hozon(&args)] {
            let mut probe = Probe::connect(server.port);
            assert_eq!(probe.call_inline(&format!("SET v {value}")), b"+OK\r\n");
            let rss_before = rss_kb(server.pid());
            let mut flood = flood_without_reading(
                server.port,
                &request,
                256 * 1024 * 1024,
                Duration::from_millis(300),
                Duration::from_secs(4),
            );
            probe.ping();
            assert!(
                probe.wait_for_clients(1, Duration::from_secs(8)),
                "with {limit} the client that does not read was not disconnected (port {})",
                server.port
            );
            assert!(closed_within(&mut flood.stream, Duration::from_secs(5)));
            let grown_kb = rss_kb(server.pid()).saturating_sub(rss_before);
            eprintln!(
                "{limit}: port {} took {} bytes of requests before closing the client, RSS +{grown_kb} KiB",
                server.port, flood.bytes_sent
            );
        }
    }
}

#[test]
fn huge_replies_to_a_slow_reader_are_not_multiplied_and_others_are_served() {
    // LRANGE 0 -1 of 200k 100-byte elements (a 21 MB reply) and KEYS * of
    // 200k keys, each asked three times in one pipeline by a client that
    // reads 512 KiB every 10 ms. Only one such reply is built at a time,
    // and the probe's PING is answered meanwhile.
    const ELEMENTS: usize = 200_000;
    let server = start_hozon(&[]);
    let mut probe = Probe::connect(server.port);
    let mut loader = Conn::connect(server.port);
    let element = |i: usize| format!("{i:0100}");
    let mut expected_lrange = format!("*{ELEMENTS}\r\n").into_bytes();
    for start in (0..ELEMENTS).step_by(1000) {
        let elements: Vec<String> = (start..start + 1000).map(element).collect();
        let mut args: Vec<&[u8]> = vec![b"RPUSH", b"list"];
        args.extend(elements.iter().map(|e| e.as_bytes()));
        loader.call(&args);
        for e in &elements {
            expected_lrange.extend_from_slice(format!("$100\r\n{e}\r\n").as_bytes());
        }
        let keys: Vec<String> = (start..start + 1000)
            .map(|i| format!("key:{i:08}"))
            .collect();
        let mut mset: Vec<&[u8]> = vec![b"MSET"];
        for k in &keys {
            mset.push(k.as_bytes());
            mset.push(b"1");
        }
        loader.call(&mset);
    }
    for (command, reply_len) in [
        (
            &[&b"LRANGE"[..], b"list", b"0", b"-1"][..],
            expected_lrange.len(),
        ),
        // KEYS: 200k 12-byte keys plus `list`: "$12\r\n" + key + "\r\n".
        (&[&b"KEYS"[..], &b"*"[..]][..], 0),
    ] {
        let rss_before = rss_kb(server.pid());
        let used_before = probe.used_memory();
        let mut used_max = used_before;
        reset_peak_rss(server.pid());
        let mut slow = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        slow.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let one = encode_command(command);
        slow.write_all(&one.repeat(3)).expect("pipeline");
        let mut received = Vec::new();
        let mut chunk = vec![0u8; 512 * 1024];
        let mut replies = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while replies < 3 {
            assert!(Instant::now() < deadline, "replies took over 60 s");
            let n = slow.read(&mut chunk).expect("slow read");
            assert!(n > 0, "server closed the slow reader");
            received.extend_from_slice(&chunk[..n]);
            while let Ok(Some(len)) = hozon::resp::reply_frame::frame_len(&received) {
                if reply_len > 0 {
                    assert_eq!(len, reply_len);
                    assert!(received[..len] == expected_lrange[..], "LRANGE reply bytes");
                } else {
                    assert!(received.starts_with(format!("*{}\r\n", ELEMENTS + 1).as_bytes()));
                }
                received.drain(..len);
                replies += 1;
            }
            probe.ping();
            used_max = used_max.max(probe.used_memory());
            // The slow reader's pace: the abuse itself, not a wait.
            std::thread::sleep(Duration::from_millis(10));
        }
        let grown_kb = peak_rss_kb(server.pid()).saturating_sub(rss_before);
        let used_grown_kb = used_max.saturating_sub(used_before) / 1024;
        let name = String::from_utf8_lossy(command[0]).into_owned();
        let reply_kb = if reply_len > 0 {
            (reply_len / 1024) as u64
        } else {
            (ELEMENTS as u64 * 19) / 1024
        };
        eprintln!(
            "{name} to a slow reader: reply {reply_kb} KiB x3, used_memory +{used_grown_kb} KiB at most, RSS +{grown_kb} KiB, slowest PING {:?}",
            probe.slowest
        );
        // What the server holds (used_memory, sampled every 10 ms while
        // the replies go out over seconds): the reply being sent, the one
        // being built (its values and its encoding), but never the three
        // at once plus their builds.
        assert!(
            used_grown_kb < 3 * reply_kb + 8 * MIB_KB,
            "{name}: hozon held {used_grown_kb} KiB more for a {reply_kb} KiB reply asked 3 times"
        );
        // RSS also counts what jemalloc keeps of freed blocks (its dirty
        // pages decay over 10 s, as in Redis): a reply buffer grown by
        // doubling leaves its smaller copies there for a while.
        assert!(
            grown_kb < 4 * reply_kb + 16 * MIB_KB,
            "{name}: hozon's RSS grew by {grown_kb} KiB for a {reply_kb} KiB reply asked 3 times"
        );
    }
    assert!(probe.slowest <= LIVENESS);
}
