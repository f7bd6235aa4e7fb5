//! The redis crate's API on the embedded engine (feature `redis`):
//! [`redis::ConnectionLike`](::redis::ConnectionLike) for [`Conn`], and
//! [`AsyncConn`], a [`redis::aio::ConnectionLike`](::redis::aio::ConnectionLike)
//! served by a thread of its own.
//!
//! The packed commands the crate sends are parsed with hozon's RESP parser
//! and run through [`Conn::execute`]. Each reply is encoded as the server
//! would send it (RESP2, or RESP3 after HELLO 3) and parsed by the crate's
//! own parser ([`redis::Parser`](::redis::Parser)), so that values and
//! errors are exactly what the crate gives from a server's bytes.
//!
//! Persistence failures and a closed engine (docs/embedding.md, "The redis
//! crate's API"):
//!
//! | [`DbError`] | what the crate sees |
//! |---|---|
//! | `Command` | the error reply, as from a server |
//! | `Refused` | the error reply `MISCONF …` (`code() == Some("MISCONF")`, kind `Extension`), as a server refusing writes sends it |
//! | `NotDurable` | the error reply `NOTDURABLE …` (`code() == Some("NOTDURABLE")`, kind `Extension`), as hozon's server sends it |
//! | `Closed` | an I/O error of kind `NotConnected` (`kind() == ErrorKind::Io`, `is_connection_dropped()`) |

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use ::redis::{ErrorKind, RedisError, RedisResult, Value};

use super::{Conn, Db, DbError};
use crate::reply::Reply;
use crate::resp::reply_frame::frame_len;
use crate::resp::{Limits, Parser};

/// The error a closed engine gives: an I/O error, as a dropped
/// connection's.
fn closed_error() -> RedisError {
    RedisError::from(io::Error::new(
        io::ErrorKind::NotConnected,
        "the embedded hozon database is closed",
    ))
}

/// Parses the packed commands in `packed` into argument vectors.
fn parse_commands(packed: &[u8]) -> RedisResult<Vec<Vec<&[u8]>>> {
    let mut parser = Parser::new(Limits::default());
    let mut commands = Vec::new();
    loop {
        match parser.next(packed, true) {
            Ok(Some(request)) => commands.push(request),
            Ok(None) => break,
            Err(e) => {
                return Err(RedisError::from((
                    ErrorKind::Client,
                    "invalid packed command",
                    e.reply_text(),
                )))
            }
        }
    }
    if parser.in_request() {
        return Err(RedisError::from((
            ErrorKind::Client,
            "invalid packed command",
            "an incomplete command".to_string(),
        )));
    }
    commands
        .into_iter()
        .map(|request| {
            request
                .args
                .iter()
                .map(|arg| match arg {
                    crate::resp::Arg::Range(r) => Ok(&packed[r.clone()]),
                    // Only inline requests own their arguments; the crate
                    // never sends those.
                    crate::resp::Arg::Owned(_) => Err(RedisError::from((
                        ErrorKind::Client,
                        "invalid packed command",
                        "an inline command".to_string(),
                    ))),
                })
                .collect::<RedisResult<Vec<&[u8]>>>()
        })
        .collect()
}

/// Parses one RESP frame with the crate's parser.
fn parse_frame(bytes: &[u8]) -> RedisResult<Value> {
    ::redis::parse_redis_value(bytes)
}

/// An error reply's frame: `-text\r\n` (line breaks in the text, which a
/// server never sends, become spaces).
fn error_frame(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 3);
    out.push(b'-');
    out.extend(text.bytes().map(|b| match b {
        b'\r' | b'\n' => b' ',
        b => b,
    }));
    out.extend_from_slice(b"\r\n");
    out
}

/// The values the crate reads for one command's outcome: one per frame
/// the server would send (several for SUBSCRIBE's confirmations, none
/// when nothing is sent).
fn values_of(outcome: Result<Reply, DbError>, resp: u8, out: &mut Vec<RedisResult<Value>>) {
    match outcome {
        // Several frames (SUBSCRIBE's confirmations, a push before a
        // reply) or bytes encoded already (an attribute before a reply):
        // split where the crate's reader would.
        Ok(reply @ (Reply::Frames(_) | Reply::Raw(_))) => split_frames(&reply.to_resp(resp), out),
        // The commonest replies, built as the crate's parser builds them
        // from their frames (`+OK` is `Okay`, a null bulk or array `Nil`;
        // the differential tests compare both ways); the rest go through
        // the parser.
        Ok(Reply::Bulk(bytes)) => out.push(Ok(Value::BulkString(bytes))),
        Ok(Reply::Int(n)) => out.push(Ok(Value::Int(n))),
        Ok(Reply::Null | Reply::NullArray) => out.push(Ok(Value::Nil)),
        Ok(Reply::Simple(line)) => out.push(Ok(if line == "OK" {
            Value::Okay
        } else {
            Value::SimpleString(line.into_owned())
        })),
        Ok(reply) => out.push(parse_frame(&reply.to_resp(resp))),
        Err(DbError::Command(e)) => out.push(parse_frame(&error_frame(e.message()))),
        Err(DbError::Refused(text)) => out.push(parse_frame(&error_frame(&text))),
        Err(DbError::NotDurable { message, .. }) => {
            let code = crate::engine::NOT_DURABLE;
            let text = if message.starts_with(code) {
                message
            } else {
                format!("{code} {message}")
            };
            out.push(parse_frame(&error_frame(&text)));
        }
        Err(DbError::Closed | DbError::Open(_)) => out.push(Err(closed_error())),
    }
}

/// The values of consecutive frames, each parsed as the crate reads one
/// value from a stream: an attribute (`|`) goes with the frame after it.
fn split_frames(bytes: &[u8], out: &mut Vec<RedisResult<Value>>) {
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        loop {
            match frame_len(&bytes[at..]) {
                Ok(Some(len)) => {
                    let attribute = bytes[at] == b'|';
                    at += len;
                    if !attribute || at >= bytes.len() {
                        break;
                    }
                }
                // Not reached for the engine's own replies.
                _ => {
                    out.push(parse_frame(&bytes[start..]));
                    return;
                }
            }
        }
        out.push(parse_frame(&bytes[start..at]));
    }
}

/// Runs every command of `packed` on `conn`, in order, and gives the
/// values the crate would read from a server, in order.
fn run_packed(conn: &mut Conn, packed: &[u8]) -> RedisResult<Vec<RedisResult<Value>>> {
    let commands = parse_commands(packed)?;
    if commands.is_empty() {
        // What the crate's connections answer for nothing to send.
        return Err(RedisError::from((ErrorKind::Client, "empty command")));
    }
    let mut values = Vec::with_capacity(commands.len());
    for argv in commands {
        let outcome = conn.execute(&argv);
        let (resp, _) = conn.protocol_and_db();
        values_of(outcome, resp, &mut values);
    }
    Ok(values)
}

/// One command's value, as the crate's connections read it: push messages
/// are skipped.
fn single_value(values: Vec<RedisResult<Value>>) -> RedisResult<Value> {
    values
        .into_iter()
        .find(|v| !matches!(v, Ok(Value::Push { .. })))
        // Nothing sent back (CLIENT REPLY OFF): a server would leave the
        // client waiting; Nil is what the crate gives a no-response command.
        .unwrap_or(Ok(Value::Nil))
}

/// A pipeline's values, as the crate's connections collect them: the
/// values after the first `offset` (the MULTI and QUEUED replies of an
/// atomic pipeline), `count` of them, push messages skipped; error replies
/// among the skipped ones abort the transaction (the sync connection
/// collects them always, the async one in transactions only:
/// `skipped_errors`); the first non-reply error (a closed engine) is
/// returned after all were read.
fn pipeline_values(
    values: Vec<RedisResult<Value>>,
    offset: usize,
    count: usize,
    skipped_errors: bool,
) -> RedisResult<Vec<Value>> {
    let mut rv = Vec::new();
    let mut first_err = None;
    let mut server_errors = Vec::new();
    let mut count = count;
    let mut idx = 0;
    let mut values = values.into_iter();
    while idx < offset + count {
        let Some(value) = values.next() else {
            // Fewer replies than the crate expected: a server would leave
            // it waiting.
            first_err.get_or_insert_with(|| {
                RedisError::from((
                    ErrorKind::Client,
                    "fewer replies than commands",
                    format!("expected {} replies, got {idx}", offset + count),
                ))
            });
            break;
        };
        match value {
            Ok(Value::ServerError(err)) => {
                if idx < offset {
                    if skipped_errors {
                        // -1: the MULTI before the queued commands.
                        server_errors.push((idx.saturating_sub(1), err));
                    }
                } else {
                    rv.push(Value::ServerError(err));
                }
            }
            Ok(Value::Push { .. }) => count += 1,
            Ok(item) => {
                if idx >= offset {
                    rv.push(item);
                }
            }
            Err(err) => {
                first_err.get_or_insert(err);
            }
        }
        idx += 1;
    }
    if !server_errors.is_empty() {
        return Err(aborted_transaction(&server_errors));
    }
    first_err.map_or(Ok(rv), Err)
}

/// The error of a transaction whose queueing failed. The crate's own
/// (`ErrorRepr::TransactionAborted`) cannot be built outside it: this one
/// has the same kind (`Server(ExecAbort)`) and code (`EXECABORT`), and
/// lists the queued errors, in the crate's words, in its detail.
fn aborted_transaction(errors: &[(usize, ::redis::ServerError)]) -> RedisError {
    let mut text = String::from("EXECABORT Transaction aborted: [");
    for (n, (index, error)) in errors.iter().enumerate() {
        if n > 0 {
            text.push_str(", ");
        }
        text.push_str(&format!("(Index {index}, error: {error})"));
    }
    text.push(']');
    match parse_frame(&error_frame(&text)) {
        Ok(Value::ServerError(error)) => RedisError::from(error),
        _ => RedisError::from((
            ErrorKind::Server(::redis::ServerErrorKind::ExecAbort),
            "Transaction aborted",
        )),
    }
}

/// The embedded connection as the redis crate's synchronous connection:
/// [`redis::Commands`](::redis::Commands), `cmd(..).query(&mut conn)`,
/// pipelines, `redis::transaction` and `redis::Script` run in this thread,
/// without a socket. A blocking command blocks this thread, as
/// [`Conn::execute`] does.
impl ::redis::ConnectionLike for Conn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        single_value(run_packed(self, cmd)?)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        pipeline_values(run_packed(self, cmd)?, offset, count, true)
    }

    /// The database the connection's session has selected (SELECT
    /// included).
    fn get_db(&self) -> i64 {
        self.protocol_and_db().1 as i64
    }

    /// PING, as the crate's connection checks.
    fn check_connection(&mut self) -> bool {
        ::redis::cmd("PING").query::<String>(self).is_ok()
    }

    /// False once the [`Db`] is closed.
    fn is_open(&self) -> bool {
        self.db().with_engine(|_| ()).is_ok()
    }
}

/// What the connection thread is asked to run.
struct Job {
    packed: Vec<u8>,
    /// `Some((offset, count, is_transaction))` for a pipeline.
    pipeline: Option<(usize, usize, bool)>,
    reply: OneshotSender<RedisResult<Vec<Value>>>,
}

/// An asynchronous connection to the embedded engine, for the redis
/// crate's async API ([`redis::AsyncCommands`](::redis::AsyncCommands),
/// `query_async`, pipelines, `Script::invoke_async`): from
/// [`Db::connect_async`]. Runtime-agnostic: its commands run on a thread
/// of its own (one [`Conn`], one session), and each call's future is
/// woken when its reply is ready, so a blocking command (BLPOP 5) blocks
/// that thread, never the runtime's. `Send + Sync`.
///
/// Dropping it ends the thread once the command it runs (if any) returns;
/// a blocking command without timeout ends at the latest when the [`Db`]
/// closes (its thread keeps the `Db` open until then).
///
/// ```
/// use redis::{AsyncCommands, Commands};
///
/// let db = hozon::Db::in_memory().open().unwrap();
/// // The synchronous API on a `Conn`.
/// let mut conn = db.connect();
/// let _: () = conn.set("visits", 1).unwrap();
/// let (n, none): (i64, Option<String>) = redis::pipe()
///     .atomic()
///     .incr("visits", 1)
///     .get("nothing")
///     .query(&mut conn)
///     .unwrap();
/// assert_eq!((n, none), (2, None));
/// // The asynchronous API, here on tokio's current-thread runtime.
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// rt.block_on(async {
///     let mut aconn = db.connect_async();
///     let _: () = aconn.rpush("q", "job").await.unwrap();
///     let job: Option<(String, String)> = aconn.blpop("q", 1.0).await.unwrap();
///     assert_eq!(job, Some(("q".into(), "job".into())));
/// });
/// ```
pub struct AsyncConn {
    jobs: mpsc::Sender<Job>,
    /// The session's selected database, as of the last command.
    db: Arc<AtomicI64>,
    /// True once a command found the engine closed.
    closed: Arc<AtomicBool>,
}

impl AsyncConn {
    /// A connection on `db` with its thread started.
    ///
    /// Panics when the thread cannot be started, as `std::thread::spawn`.
    pub(crate) fn new(db: &Db) -> AsyncConn {
        let (jobs, receiver) = mpsc::channel::<Job>();
        let selected = Arc::new(AtomicI64::new(0));
        let closed = Arc::new(AtomicBool::new(false));
        let mut conn = db.connect();
        let (thread_selected, thread_closed) = (Arc::clone(&selected), Arc::clone(&closed));
        std::thread::Builder::new()
            .name("hozon-async-conn".into())
            .spawn(move || {
                for job in receiver {
                    let result = run_packed(&mut conn, &job.packed).and_then(|values| {
                        if values
                            .iter()
                            .any(|v| v.as_ref().is_err_and(|e| e.is_connection_dropped()))
                        {
                            thread_closed.store(true, Ordering::Relaxed);
                        }
                        match job.pipeline {
                            None => single_value(values).map(|v| vec![v]),
                            Some((offset, count, transaction)) => {
                                pipeline_values(values, offset, count, transaction)
                            }
                        }
                    });
                    thread_selected.store(conn.protocol_and_db().1 as i64, Ordering::Relaxed);
                    job.reply.send(result);
                }
            })
            .expect("starting an AsyncConn's thread");
        AsyncConn {
            jobs,
            db: selected,
            closed,
        }
    }

    /// Sends a job to the thread and waits (asynchronously) for its reply.
    fn submit(
        &self,
        packed: Vec<u8>,
        pipeline: Option<(usize, usize, bool)>,
    ) -> impl Future<Output = RedisResult<Vec<Value>>> + Send + 'static {
        let (reply, receiver) = oneshot();
        let sent = self.jobs.send(Job {
            packed,
            pipeline,
            reply,
        });
        let closed = Arc::clone(&self.closed);
        async move {
            if sent.is_err() {
                closed.store(true, Ordering::Relaxed);
                return Err(closed_error());
            }
            receiver.await.unwrap_or_else(|| Err(closed_error()))
        }
    }

    /// False once a command found the [`Db`] closed.
    pub fn is_open(&self) -> bool {
        !self.closed.load(Ordering::Relaxed)
    }
}

impl ::redis::aio::ConnectionLike for AsyncConn {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a ::redis::Cmd,
    ) -> ::redis::RedisFuture<'a, Value> {
        let reply = self.submit(cmd.get_packed_command(), None);
        Box::pin(async move {
            let mut values = reply.await?;
            Ok(values.pop().unwrap_or(Value::Nil))
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a ::redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> ::redis::RedisFuture<'a, Vec<Value>> {
        let reply = self.submit(
            pipeline.get_packed_pipeline(),
            Some((offset, count, pipeline.is_transaction())),
        );
        Box::pin(reply)
    }

    /// The database the connection's session had selected after its last
    /// command (SELECT included).
    fn get_db(&self) -> i64 {
        self.db.load(Ordering::Relaxed)
    }
}

/// The state a oneshot's two ends share.
struct OneshotState<T> {
    value: Option<T>,
    /// The sender was dropped without sending.
    dropped: bool,
    waker: Option<Waker>,
}

/// The sending end of a oneshot channel (the connection thread's).
struct OneshotSender<T> {
    state: Arc<Mutex<OneshotState<T>>>,
}

/// The receiving end: a future of `Some(value)`, or `None` when the sender
/// was dropped without sending.
struct OneshotReceiver<T> {
    state: Arc<Mutex<OneshotState<T>>>,
}

fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let state = Arc::new(Mutex::new(OneshotState {
        value: None,
        dropped: false,
        waker: None,
    }));
    (
        OneshotSender {
            state: Arc::clone(&state),
        },
        OneshotReceiver { state },
    )
}

impl<T> OneshotSender<T> {
    fn send(self, value: T) {
        let waker = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            state.value = Some(value);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        // Drop sees the value sent and does nothing more.
    }
}

impl<T> Drop for OneshotSender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.value.is_some() {
                return;
            }
            state.dropped = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Future for OneshotReceiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(value) = state.value.take() {
            return Poll::Ready(Some(value));
        }
        if state.dropped {
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

// Compile-time check: an async connection moves between a runtime's
// threads and is shared by reference (AsyncCommands needs Send + Sync).
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<AsyncConn>();
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A oneshot's value reaches its future; a dropped sender gives None.
    #[test]
    fn oneshot_delivers_or_reports_the_drop() {
        let (tx, rx) = oneshot::<u32>();
        tx.send(7);
        assert_eq!(block_on(rx), Some(7));
        let (tx, rx) = oneshot::<u32>();
        drop(tx);
        assert_eq!(block_on(rx), None);
        let (tx, rx) = oneshot::<u32>();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send(9);
        });
        assert_eq!(block_on(rx), Some(9));
        sender.join().unwrap();
    }

    /// A minimal executor for one future (parks the thread until woken).
    fn block_on<F: Future>(future: F) -> F::Output {
        struct ThreadWaker(std::thread::Thread);
        impl std::task::Wake for ThreadWaker {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
                return v;
            }
            std::thread::park();
        }
    }

    /// The pipeline collection follows the crate's connection: skipped
    /// error replies abort, later ones stay values, pushes are skipped.
    #[test]
    fn pipeline_values_follow_the_crate() {
        let ok = || Ok(Value::Okay);
        let err = || parse_frame(b"-ERR bad\r\n");
        let got = pipeline_values(vec![ok(), err(), ok()], 0, 3, true).unwrap();
        assert!(matches!(got[1], Value::ServerError(_)));
        let e = pipeline_values(vec![ok(), err(), ok()], 2, 1, true).unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::Server(::redis::ServerErrorKind::ExecAbort)
        );
        let push = Ok(Value::Push {
            kind: ::redis::PushKind::Message,
            data: vec![],
        });
        let got = pipeline_values(vec![push, ok()], 0, 1, true).unwrap();
        assert_eq!(got, vec![Value::Okay]);
    }
}
