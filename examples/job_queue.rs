//! A job queue on a stream with a consumer group, and what happens when a
//! worker crashes mid-job.
//!
//! - a producer adds eight jobs to the stream `jobs` (`XADD`), read by the
//!   consumer group `workers`;
//! - a worker process (this program run again as a child, with
//!   `--crashing-worker <dir>`) takes jobs one at a time
//!   (`XREADGROUP … >`), does them and acknowledges them (`XACK`); after three it takes
//!   two more without acknowledging them and is killed with SIGKILL;
//! - the parent reopens the same data directory: the two unacknowledged
//!   jobs are still pending for the dead worker (`XPENDING`), and a second
//!   worker claims them once they have been idle long enough
//!   (`XAUTOCLAIM` with a min-idle-time), does them, acknowledges them,
//!   then takes the jobs nobody had taken yet.
//!
//! Every job is done at least once and none is lost; the one the first
//! worker did but never acknowledged is done twice (at-least-once: make
//! jobs idempotent). The engine runs with `appendfsync always`: a process
//! crash loses nothing even with the default `everysec` (each call has
//! written its effects before it returns), but a power cut could take
//! back the last second of `XADD`s, jobs the producer already reported as
//! queued; with `always` an acknowledged `XADD` or `XACK` is on disk.
//!
//! Run: `cargo run --example job_queue` (it asserts what it shows and exits
//! non-zero otherwise).

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hozon::config::AppendFsync;
use hozon::embed::{Conn, Db, DbError};
use hozon::Reply;

const JOBS: usize = 8;

fn open(dir: &Path) -> Result<Db, DbError> {
    Db::builder(dir).fsync(AppendFsync::Always).open()
}

/// A stream entry: its ID and the image it asks to resize.
#[derive(Debug)]
struct Job {
    id: Vec<u8>,
    image: String,
}

/// The jobs of an array of stream entries (`[id, [field, value, …]]`).
fn jobs(entries: &Reply) -> Vec<Job> {
    let Reply::Array(entries) = entries else {
        panic!("entries: {entries:?}");
    };
    let job = |entry: &Reply| match entry {
        Reply::Array(parts) => match &parts[..] {
            [Reply::Bulk(id), Reply::Array(fields)] => match &fields[..] {
                [Reply::Bulk(f), Reply::Bulk(image)] if f == b"image" => Job {
                    id: id.clone(),
                    image: String::from_utf8_lossy(image).into_owned(),
                },
                other => panic!("fields: {other:?}"),
            },
            other => panic!("entry: {other:?}"),
        },
        other => panic!("entry: {other:?}"),
    };
    entries.iter().map(job).collect()
}

/// The next job nobody has taken yet, now pending for `consumer`.
fn take(conn: &mut Conn, consumer: &str) -> Result<Option<Job>, DbError> {
    let reply = conn.execute(&[
        b"XREADGROUP",
        b"GROUP",
        b"workers",
        consumer.as_bytes(),
        b"COUNT",
        b"1",
        b"STREAMS",
        b"jobs",
        b">",
    ])?;
    match reply {
        Reply::NullArray => Ok(None),
        // [[stream, entries]] in RESP2.
        Reply::Array(streams) => match &streams[0] {
            Reply::Array(stream) => Ok(jobs(&stream[1]).pop()),
            other => panic!("XREADGROUP: {other:?}"),
        },
        other => panic!("XREADGROUP: {other:?}"),
    }
}

/// The work: here, counting how often each image was resized.
fn process(conn: &mut Conn, job: &Job) -> Result<(), DbError> {
    conn.execute(&[b"HINCRBY", b"resized", job.image.as_bytes(), b"1"])?;
    Ok(())
}

fn ack(conn: &mut Conn, job: &Job) -> Result<(), DbError> {
    let reply = conn.execute(&[b"XACK", b"jobs", b"workers", &job.id])?;
    assert_eq!(reply, Reply::Int(1), "the job was pending");
    Ok(())
}

/// The child: three jobs done and acknowledged, a fourth done but not
/// acknowledged, a fifth only taken; then it waits to be killed.
fn crashing_worker(dir: &Path) -> Result<(), DbError> {
    let db = open(dir)?;
    let mut conn = db.connect();
    for n in 0..5 {
        let job = take(&mut conn, "worker-1")?.expect("jobs are waiting");
        match n {
            0..=2 => {
                process(&mut conn, &job)?;
                ack(&mut conn, &job)?;
                println!("worker-1: {} done and acknowledged", job.image);
            }
            3 => {
                process(&mut conn, &job)?;
                println!("worker-1: {} done, not yet acknowledged", job.image);
            }
            _ => println!("worker-1: {} taken, not yet done", job.image),
        }
    }
    println!("ready");
    std::thread::sleep(Duration::from_secs(60)); // killed long before
    std::process::exit(1);
}

fn main() -> Result<(), DbError> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--crashing-worker") {
        return crashing_worker(Path::new(&args[2]));
    }
    let dir = tempfile::tempdir().expect("a temporary directory");

    // The producer.
    let db = open(dir.path())?;
    db.execute(&[b"XGROUP", b"CREATE", b"jobs", b"workers", b"$", b"MKSTREAM"])?;
    for i in 1..=JOBS {
        let image = format!("img-{i}.png");
        db.execute(&[b"XADD", b"jobs", b"*", b"image", image.as_bytes()])?;
    }
    println!("producer: {JOBS} jobs queued");
    db.close()?; // the worker process opens the directory next

    // The first worker, in a child process, killed mid-work.
    let exe = std::env::current_exe().expect("this program's path");
    let mut child = Command::new(exe)
        .arg("--crashing-worker")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the worker process starts");
    let output = BufReader::new(child.stdout.take().unwrap());
    for line in output.lines() {
        let line = line.expect("the worker's output");
        if line == "ready" {
            break;
        }
        println!("  {line}");
    }
    child.kill().expect("SIGKILL"); // fails if it already exited
    let status = child.wait().expect("the worker's status");
    assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status}");
    println!("worker-1 killed with SIGKILL");

    // Recovery: reopen, find the dead worker's pending jobs, claim them.
    let db = open(dir.path())?;
    let mut conn = db.connect();
    let pending = conn.execute(&[b"XPENDING", b"jobs", b"workers"])?;
    let Reply::Array(summary) = &pending else {
        panic!("XPENDING: {pending:?}");
    };
    assert_eq!(
        summary[0],
        Reply::Int(2),
        "two jobs pending after the crash"
    );
    println!("after reopening: 2 jobs pending for worker-1");
    let started = Instant::now();
    let mut claimed = Vec::new();
    while claimed.len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "claimed only {claimed:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
        // Jobs pending for over 500 ms are presumed abandoned (minutes in
        // a real deployment).
        let reply = conn.execute(&[
            b"XAUTOCLAIM",
            b"jobs",
            b"workers",
            b"worker-2",
            b"500",
            b"0-0",
        ])?;
        let Reply::Array(parts) = reply else {
            panic!("XAUTOCLAIM: {reply:?}");
        };
        claimed.extend(jobs(&parts[1]));
    }
    for job in &claimed {
        process(&mut conn, job)?;
        ack(&mut conn, job)?;
        println!("worker-2: {} claimed, done and acknowledged", job.image);
    }
    let mut rest = 0;
    while let Some(job) = take(&mut conn, "worker-2")? {
        process(&mut conn, &job)?;
        ack(&mut conn, &job)?;
        rest += 1;
    }
    println!("worker-2: the {rest} jobs nobody had taken, done and acknowledged");

    // Every job done at least once; the one done before the crash twice.
    let pending = conn.execute(&[b"XPENDING", b"jobs", b"workers"])?;
    assert!(
        matches!(&pending, Reply::Array(s) if s[0] == Reply::Int(0)),
        "{pending:?}"
    );
    let Reply::Map(resized) = conn.execute(&[b"HGETALL", b"resized"])? else {
        panic!("HGETALL");
    };
    assert_eq!(resized.len(), JOBS, "every job was done: {resized:?}");
    for i in 1..=JOBS {
        let image = format!("img-{i}.png");
        let times = resized
            .iter()
            .find(|(f, _)| *f == Reply::bulk(image.as_bytes()))
            .unwrap();
        let expected: &[u8] = if i == 4 { b"2" } else { b"1" };
        assert_eq!(times.1, Reply::bulk(expected), "{image}");
    }
    println!("all {JOBS} jobs done; img-4.png twice (done by worker-1, never acknowledged)");
    db.close()?;
    println!("ok");
    Ok(())
}
