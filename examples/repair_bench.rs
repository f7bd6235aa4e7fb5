//! Writes the AOFs of `scripts/bench --only-repair` (issue 8's
//! `hozon-repair check` target), deterministically (a fixed seed: the same
//! size gives the same bytes).
//!
//! - `repair_bench redis <out.aof> <bytes>`: a Redis 7 style AOF (plain
//!   RESP, a `SELECT 0` first, a `#TS:<unix s>` line every 1000 commands)
//!   of at least `bytes` bytes.
//! - `repair_bench hozon <out.aof> <bytes>`: a hozon AOF (`FILE_HEADER`,
//!   then checksummed batches of 1-128 commands) of the same command mix.
//!
//! The mix: SET with 10-200 byte values (some with `PXAT`), HSET, RPUSH,
//! SADD, ZADD, PEXPIREAT (what Redis 7 logs for EXPIRE), INCR, DEL, and
//! every ~200 commands a MULTI/EXEC block of 2-5 commands (never split
//! across a hozon batch or a `#TS:` line). Prints one JSON object: the
//! file's size and its command counts.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::process::ExitCode;

use hozon::persist::aof::{encode_command, BatchBuilder, FILE_HEADER};

/// Keys per type: large enough that collections stay small-to-medium.
const KEY_SPACE: u64 = 1_000_000;
/// Commands between two `#TS:` lines of the Redis file.
const TS_EVERY_COMMANDS: u64 = 1000;
/// Start of the files' clock (2026-11-30T00:00:00Z), milliseconds.
const START_MS: i64 = 1_796_083_200_000;
/// Pool the values are cut from (random bytes: a value is a slice).
const POOL_BYTES: usize = 1 << 16;

/// splitmix64: deterministic and fast.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// Produces the command stream: one unit (a command, or a MULTI/EXEC
/// block) at a time.
struct Mix {
    rng: Rng,
    pool: Vec<u8>,
    now_ms: i64,
}

impl Mix {
    fn new() -> Mix {
        let mut rng = Rng(0x5eed_0008);
        let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let pool = (0..POOL_BYTES)
            .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
            .collect();
        Mix {
            rng,
            pool,
            now_ms: START_MS,
        }
    }

    fn value(&mut self, lo: u64, hi: u64) -> Vec<u8> {
        let len = self.rng.range(lo, hi) as usize;
        let at = (self.rng.next() % (POOL_BYTES - len) as u64) as usize;
        self.pool[at..at + len].to_vec()
    }

    fn key(&mut self, prefix: &str) -> Vec<u8> {
        format!("{prefix}:{}", self.rng.next() % KEY_SPACE).into_bytes()
    }

    /// One command of the mix.
    fn command(&mut self) -> Vec<Vec<u8>> {
        // About 1 ms of simulated time every 50 commands.
        if self.rng.next().is_multiple_of(50) {
            self.now_ms += 1;
        }
        let pick = self.rng.next() % 100;
        match pick {
            0..=37 => vec![b"SET".to_vec(), self.key("user"), self.value(10, 200)],
            38..=41 => {
                let at = self.now_ms + self.rng.range(1_000, 86_400_000) as i64;
                vec![
                    b"SET".to_vec(),
                    self.key("session"),
                    self.value(10, 200),
                    b"PXAT".to_vec(),
                    at.to_string().into_bytes(),
                ]
            }
            42..=53 => {
                let field = format!("f{}", self.rng.next() % 32).into_bytes();
                vec![b"HSET".to_vec(), self.key("h"), field, self.value(10, 60)]
            }
            54..=65 => vec![b"RPUSH".to_vec(), self.key("l"), self.value(10, 80)],
            66..=75 => {
                let member = format!("m{}", self.rng.next() % 10_000).into_bytes();
                vec![b"SADD".to_vec(), self.key("s"), member]
            }
            76..=85 => {
                let score = format!("{}", self.rng.next() % 1_000_000).into_bytes();
                let member = format!("player{}", self.rng.next() % 100_000).into_bytes();
                vec![b"ZADD".to_vec(), self.key("z"), score, member]
            }
            86..=91 => {
                let at = self.now_ms + self.rng.range(1_000, 86_400_000) as i64;
                vec![
                    b"PEXPIREAT".to_vec(),
                    self.key("user"),
                    at.to_string().into_bytes(),
                ]
            }
            92..=96 => vec![b"INCR".to_vec(), self.key("counter")],
            _ => vec![b"DEL".to_vec(), self.key("user")],
        }
    }

    /// One unit: a single command, or (1 in 200) a MULTI/EXEC block.
    fn unit(&mut self) -> Vec<Vec<Vec<u8>>> {
        if !self.rng.next().is_multiple_of(200) {
            return vec![self.command()];
        }
        let n = self.rng.range(2, 5);
        let mut unit = vec![vec![b"MULTI".to_vec()]];
        for _ in 0..n {
            unit.push(self.command());
        }
        unit.push(vec![b"EXEC".to_vec()]);
        unit
    }
}

/// What was written.
#[derive(Default)]
struct Written {
    bytes: u64,
    commands: u64,
    transactions: u64,
    marks: u64,
}

fn write_redis(out: &mut impl Write, target_bytes: u64) -> std::io::Result<Written> {
    let mut mix = Mix::new();
    let mut w = Written::default();
    let mut buf = Vec::with_capacity(8 << 20);
    encode_command(&mut buf, &[&b"SELECT"[..], b"0"]);
    w.commands += 1;
    let mut since_ts = TS_EVERY_COMMANDS;
    while w.bytes + (buf.len() as u64) < target_bytes {
        if since_ts >= TS_EVERY_COMMANDS {
            buf.extend_from_slice(format!("#TS:{}\r\n", mix.now_ms / 1000).as_bytes());
            w.marks += 1;
            since_ts = 0;
        }
        let unit = mix.unit();
        if unit.len() > 1 {
            w.transactions += 1;
        }
        for argv in &unit {
            encode_command(&mut buf, argv);
            w.commands += 1;
            since_ts += 1;
        }
        if buf.len() >= 4 << 20 {
            out.write_all(&buf)?;
            w.bytes += buf.len() as u64;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    w.bytes += buf.len() as u64;
    Ok(w)
}

fn write_hozon(out: &mut impl Write, target_bytes: u64) -> std::io::Result<Written> {
    let mut mix = Mix::new();
    let mut w = Written::default();
    out.write_all(FILE_HEADER)?;
    w.bytes += FILE_HEADER.len() as u64;
    let mut batch = BatchBuilder::new();
    let mut selected_db = None;
    let mut rng = Rng(0x0ba7_c4e5);
    while w.bytes < target_bytes {
        let size = rng.range(1, 128);
        while batch.commands() < size {
            let unit = mix.unit();
            if unit.len() > 1 {
                w.transactions += 1;
            }
            for argv in &unit {
                let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                batch.push_command(0, &argv, &mut selected_db);
            }
        }
        w.commands += batch.commands();
        let bytes = batch.finish(mix.now_ms);
        out.write_all(&bytes)?;
        w.bytes += bytes.len() as u64;
        w.marks += 1;
        batch.recycle(bytes);
    }
    Ok(w)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: repair_bench redis|hozon <out.aof> <bytes>";
    let (format, path, target_bytes) = match args.as_slice() {
        [_, format, path, bytes] => match bytes.parse::<u64>() {
            Ok(n) => (format.as_str(), path, n),
            Err(_) => {
                eprintln!("{usage}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let file = match File::create(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("repair_bench: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut out = BufWriter::with_capacity(8 << 20, file);
    let written = match format {
        "redis" => write_redis(&mut out, target_bytes),
        "hozon" => write_hozon(&mut out, target_bytes),
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let w = match written.and_then(|w| out.flush().map(|()| w)) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("repair_bench: writing {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let marks = if format == "redis" {
        "ts_lines"
    } else {
        "batches"
    };
    println!(
        "{{\"format\": \"{format}\", \"bytes\": {}, \"commands\": {}, \"transactions\": {}, \"{marks}\": {}}}",
        w.bytes, w.commands, w.transactions, w.marks
    );
    ExitCode::SUCCESS
}
