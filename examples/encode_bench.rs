//! Times the master's RDB payload encoding (the replication capture and
//! BGSAVE path) over a deterministic mixed dataset built in a
//! [`Keyspace`]: the keyspace capture (`begin_capture`/`capture_step`,
//! 16 records a step as `repl::capture` asks) feeding a
//! [`RecordEncoder`] (compression on, the default [`Encoder`]), full
//! chunks CRC-64'd and dropped as a sink would after writing them.
//! Prints one JSON object: the payload's size, the median encoding time
//! and, where the kernel lets a process count its own instructions
//! (`perf_event_open`, user space only), the median instruction count of
//! the encoding alone (the dataset's construction left out).
//!
//! The dataset (by default 1,000,000 keys in db 0, about 190 MB of
//! payload): 40% strings of 10-200 bytes (some integers, some
//! repetitive text LZF compresses, some random letters it cannot), 15%
//! each small hashes (5-20 fields), lists (5-40 elements), sets (integers
//! only, which are intsets, or words) and sorted sets (integer or
//! fractional scores), a few large hashes, sorted sets, sets and lists of
//! 1000-5000 elements, and a TTL on 10% of the keys. Hash tables are
//! seeded per process, so the payload bytes (and its CRC) differ between
//! runs for table-encoded values; the size does not.
//!
//! Usage: cargo run --release --example encode_bench -- [keys] [rounds]
//!
//! `perf stat -e instructions,cycles` over the whole run counts the
//! dataset's construction too. Where there are no hardware counters (a
//! VM without a PMU), callgrind counts the encoding's instructions alone:
//! `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect='encode_bench::capture' target/release/examples/encode_bench 1000000 1`
//! (about 30 s).

use std::time::Instant;

use hozon::keyspace::Keyspace;
use hozon::rdb::writer::{put_trailer, Encoder, RecordEncoder};
use hozon::rdb::Crc64;
use hozon::types::list::End;
use hozon::types::zset::AddFlags;
use hozon::types::{Blob, EncodingLimits, Hash, List, Set, Value, ZSet};

/// The capture's records per `capture_step` (repl::capture's
/// RECORDS_PER_CHECK).
const RECORDS_PER_STEP: usize = 16;
/// Every timestamp: the capture instant and the TTLs after it.
const NOW_MS: i64 = 1_700_000_000_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let keys: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);

    let started = Instant::now();
    let mut keyspace = Keyspace::new(16);
    build(&mut keyspace, keys);
    let build_secs = started.elapsed().as_secs_f64();

    let mut counter = InstructionCounter::open();
    let mut secs = Vec::new();
    let mut instructions = Vec::new();
    let mut bytes = 0;
    let mut encoded_keys = 0;
    for _ in 0..rounds {
        if let Some(c) = counter.as_mut() {
            c.start();
        }
        let started = Instant::now();
        let (n, k) = capture(&mut keyspace);
        secs.push(started.elapsed().as_secs_f64());
        if let Some(c) = counter.as_mut() {
            instructions.push(c.stop() as f64);
        }
        bytes = n;
        encoded_keys = k;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let instructions = if instructions.is_empty() {
        "null".to_string()
    } else {
        format!("{:.0}", median(&mut instructions))
    };
    println!(
        "{{\"keys\": {encoded_keys}, \"bytes\": {bytes}, \"build_secs\": {build_secs:.3}, \
         \"encode_secs\": {:.4}, \"encode_instructions\": {instructions}}}",
        median(&mut secs)
    );
}

/// One capture of the whole keyspace, as the full sync payload is made:
/// returns (payload bytes, keys). Not inlined, so that a tool can count
/// it alone (`valgrind --tool=callgrind --collect-atstart=no
/// --toggle-collect='encode_bench::capture'`, rounds 1).
#[inline(never)]
fn capture(keyspace: &mut Keyspace) -> (u64, u64) {
    let sizes: Vec<(u64, u64)> = keyspace
        .iter()
        .map(|db| (db.len() as u64, db.expires_len() as u64))
        .collect();
    let mut records = RecordEncoder::with_header(Encoder::default(), NOW_MS, 0, false);
    let mut crc = Crc64::default();
    let mut bytes = 0u64;
    keyspace.begin_capture();
    loop {
        let mut full = Vec::new();
        let finished = keyspace.capture_step(RECORDS_PER_STEP, &mut |db, key, value, expire| {
            if matches!(expire, Some(at) if at < NOW_MS) {
                return;
            }
            records.push(db, key, value, expire, |db| {
                sizes.get(db).copied().unwrap_or((0, 0))
            });
            if let Some(chunk) = records.take_full() {
                full.push(chunk);
            }
        });
        for chunk in full {
            crc.update(&chunk);
            bytes += chunk.len() as u64;
        }
        if finished {
            break;
        }
    }
    let mut last = records.take();
    put_trailer(&mut last, &mut crc, true);
    bytes += last.len() as u64;
    (bytes, records.keys)
}

/// splitmix64: the dataset is the same on every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// `len` bytes of repetitive text (LZF compresses it).
    fn text(&mut self, len: usize) -> Vec<u8> {
        const WORDS: [&[u8]; 8] = [
            b"user", b"session", b"active", b"id", b"name", b"value", b"true", b"null",
        ];
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(WORDS[(self.next() % 8) as usize]);
            out.push(if self.chance(50) { b':' } else { b' ' });
        }
        out.truncate(len);
        out
    }

    /// `len` random letters and digits (LZF finds little to reuse).
    fn noise(&mut self, len: usize) -> Vec<u8> {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        (0..len)
            .map(|_| ALPHABET[(self.next() % ALPHABET.len() as u64) as usize])
            .collect()
    }

    /// A short field, member or element: a word, an integer or noise.
    fn element(&mut self) -> Vec<u8> {
        match self.next() % 3 {
            0 => {
                let len = self.range(4, 16) as usize;
                self.text(len)
            }
            1 => (self.next() % 100_000).to_string().into_bytes(),
            _ => {
                let len = self.range(6, 24) as usize;
                self.noise(len)
            }
        }
    }

    fn string(&mut self) -> Value {
        let kind = self.next() % 10;
        let len = self.range(10, 200) as usize;
        let bytes = match kind {
            0 => (self.next() % 10_000_000_000).to_string().into_bytes(),
            1..=5 => self.text(len),
            _ => self.noise(len),
        };
        Value::Str(Blob::from_vec(bytes))
    }

    fn hash(&mut self, fields: u64, limits: &EncodingLimits) -> Value {
        let mut h = Hash::new();
        for i in 0..fields {
            let field = format!("field:{i}");
            let kind = self.next() % 3;
            let len = self.range(5, 40) as usize;
            let value = match kind {
                0 => self.text(len),
                1 => (self.next() % 10u64.pow(len as u32 % 8 + 1))
                    .to_string()
                    .into_bytes(),
                _ => self.noise(len),
            };
            h.set(field.as_bytes(), Blob::from_vec(value), limits);
        }
        Value::Hash(Box::new(h))
    }

    fn list(&mut self, elements: u64) -> Value {
        let mut l = List::new();
        for _ in 0..elements {
            l.push(End::Tail, &self.element());
        }
        Value::List(Box::new(l))
    }

    fn set(&mut self, members: u64, ints: bool, limits: &EncodingLimits) -> Value {
        let mut s = Set::default();
        for _ in 0..members {
            let member = if ints {
                (self.next() % 1_000_000).to_string().into_bytes()
            } else {
                self.element()
            };
            s.insert(&member, limits.set_max_intset_entries);
        }
        Value::Set(Box::new(s))
    }

    fn zset(&mut self, members: u64, limits: &EncodingLimits) -> Value {
        let mut z = ZSet::default();
        let fractional = self.chance(50);
        for i in 0..members {
            let score = if fractional {
                (self.next() % 1_000_000) as f64 / 7.0
            } else {
                (self.next() % 1_000_000) as f64
            };
            let member = format!("member:{i}:{}", self.next() % 1000);
            z.add(member.as_bytes(), score, AddFlags::default(), limits)
                .expect("scores are not NaN");
        }
        Value::ZSet(Box::new(z))
    }
}

/// Fills db 0 with `keys` keys (see the module comment).
fn build(keyspace: &mut Keyspace, keys: u64) {
    let limits = EncodingLimits::default();
    let mut gen = Gen(42);
    let db = keyspace.db_mut(0);
    // One large value of each kind per 50,000 keys.
    let large_every = 50_000;
    for i in 0..keys {
        let value = if i % large_every == large_every - 1 {
            let n = gen.range(1000, 3000);
            match (i / large_every) % 4 {
                0 => gen.hash(n, &limits),
                1 => gen.zset(n, &limits),
                2 => gen.set(n, false, &limits),
                _ => gen.list(2 * n),
            }
        } else {
            let kind = gen.next() % 100;
            match kind {
                0..=39 => gen.string(),
                40..=54 => {
                    let n = gen.range(5, 20);
                    gen.hash(n, &limits)
                }
                55..=69 => {
                    let n = gen.range(5, 40);
                    gen.list(n)
                }
                70..=84 => {
                    let ints = gen.chance(50);
                    let n = gen.range(5, 20);
                    gen.set(n, ints, &limits)
                }
                _ => {
                    let n = gen.range(5, 30);
                    gen.zset(n, &limits)
                }
            }
        };
        let key = format!("key:{i:08}");
        db.set(key.as_bytes(), value, false);
        if gen.chance(10) {
            db.set_expire(key.as_bytes(), NOW_MS + 86_400_000);
        }
    }
}

/// Counts this thread's user-space instructions (`perf_event_open`), or
/// nothing where the kernel does not allow it.
struct InstructionCounter {
    fd: i32,
}

/// The first 64 bytes of the kernel's `perf_event_attr` (its version 0).
#[repr(C)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const FLAG_DISABLED: u64 = 1 << 0;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_RESET: libc::c_ulong = 0x2403;

impl InstructionCounter {
    fn open() -> Option<InstructionCounter> {
        let attr = PerfEventAttr {
            kind: PERF_TYPE_HARDWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_HW_INSTRUCTIONS,
            sample_period: 0,
            sample_type: 0,
            read_format: 0,
            flags: FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV,
            wakeup_events: 0,
            bp_type: 0,
            config1: 0,
        };
        // SAFETY: `attr` is a valid version-0 perf_event_attr for the
        // call's duration; pid 0 and cpu -1 count the calling thread.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                0,
                -1,
                -1,
                0,
            )
        };
        (fd >= 0).then_some(InstructionCounter { fd: fd as i32 })
    }

    fn start(&mut self) {
        // SAFETY: ioctls on the counter's own descriptor.
        unsafe {
            libc::ioctl(self.fd, IOC_RESET, 0);
            libc::ioctl(self.fd, IOC_ENABLE, 0);
        }
    }

    fn stop(&mut self) -> u64 {
        let mut count = 0u64;
        // SAFETY: ioctl on the counter's own descriptor, then an 8-byte
        // read into `count`.
        unsafe {
            libc::ioctl(self.fd, IOC_DISABLE, 0);
            libc::read(self.fd, (&mut count as *mut u64).cast(), 8);
        }
        count
    }
}

impl Drop for InstructionCounter {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and closed once.
        unsafe {
            libc::close(self.fd);
        }
    }
}
