//! The event loop's polling before it sleeps (`busy-poll-us`): it must
//! never turn into CPU burnt while no client sends anything, and requests
//! must be served the same with it on or off.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use crate::harness::{encode_command, start_hozon};

/// User + system CPU time of process `pid`, in clock ticks (1/100 s).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("comm field") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after comm.
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// `clients` connections each send `requests` unpipelined INCRs of their
/// own counter (one in flight at a time) and check every reply; each
/// counter starts at `done`.
fn unpipelined_burst(port: u16, clients: usize, requests: usize, done: usize) {
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            thread::spawn(move || {
                let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
                conn.set_nodelay(true).expect("nodelay");
                conn.set_read_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                let key = format!("busy:{c}");
                let request = encode_command(&[b"INCR", key.as_bytes()]);
                let mut reply = Vec::new();
                for i in done + 1..=done + requests {
                    conn.write_all(&request).expect("send INCR");
                    let expected = format!(":{i}\r\n");
                    reply.resize(expected.len(), 0);
                    conn.read_exact(&mut reply).expect("INCR reply");
                    assert_eq!(reply, expected.as_bytes(), "client {c}, request {i}");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("client thread");
    }
}

fn call(port: u16, args: &[&[u8]]) -> Vec<u8> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    conn.write_all(&encode_command(args)).expect("send");
    let mut buf = vec![0u8; 4096];
    let n = conn.read(&mut buf).expect("reply");
    buf.truncate(n);
    buf
}

#[test]
fn the_server_takes_no_cpu_once_clients_stop_after_a_busy_spell() {
    // A busy spell of many unpipelined clients is what turns spinning on;
    // once they stop, the loop must sleep (a loop that keeps re-handling
    // old events or spinning would use a core: 100 ticks a second).
    let server = start_hozon(&["--busy-poll-us", "20"]);
    assert_eq!(
        call(server.port, &[b"CONFIG", b"GET", b"busy-poll-us"]),
        b"*2\r\n$12\r\nbusy-poll-us\r\n$2\r\n20\r\n"
    );
    unpipelined_burst(server.port, 8, 3000, 0);
    // Connections stay open but silent, as a pool's would.
    let idle_conns: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).expect("connect"))
        .collect();
    thread::sleep(Duration::from_millis(200));
    let before = cpu_ticks(server.pid());
    thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(server.pid()) - before;
    assert!(
        used <= 20,
        "hozon used {used} ticks of CPU in 2 s with no request (at most 20 expected: hz 10 cron)"
    );
    drop(idle_conns);

    // A client with a request every 2 ms: the gaps are long, so the loop
    // sleeps between them; it must not spin or re-handle old events in
    // between (either would take most of a core).
    let mut conn = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let before = cpu_ticks(server.pid());
    let mut reply = [0u8; 7];
    for _ in 0..500 {
        conn.write_all(b"PING\r\n").expect("send PING");
        conn.read_exact(&mut reply).expect("PONG");
        assert_eq!(&reply, b"+PONG\r\n");
        thread::sleep(Duration::from_millis(2));
    }
    let used = cpu_ticks(server.pid()) - before;
    assert!(
        used <= 40,
        "hozon used {used} ticks of CPU for 500 PINGs 2 ms apart (at most 40 expected)"
    );
}

#[test]
fn requests_are_served_alike_with_busy_polling_off_and_on() {
    let server = start_hozon(&["--busy-poll-us", "0"]);
    unpipelined_burst(server.port, 4, 500, 0);
    assert_eq!(
        call(server.port, &[b"CONFIG", b"SET", b"busy-poll-us", b"200"]),
        b"+OK\r\n"
    );
    unpipelined_burst(server.port, 4, 500, 500);
    for c in 0..4 {
        let key = format!("busy:{c}");
        assert_eq!(
            call(server.port, &[b"GET", key.as_bytes()]),
            b"$4\r\n1000\r\n"
        );
    }
    assert_eq!(
        call(server.port, &[b"CONFIG", b"SET", b"busy-poll-us", b"10001"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'busy-poll-us') - argument must be between 0 and 10000 inclusive\r\n"
    );
}
