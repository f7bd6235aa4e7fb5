//! The append-only file format: batches of RESP commands, each closed by a
//! checksum annotation, and the loader that verifies them.
//!
//! See docs/persistence.md for the format and every failure case.

use crate::repl::ids::{
    encode_position_line, parse_position_line, Position, PositionLineError, POSITION_PREFIX,
};
use std::ops::Range;

/// A logged effect: one command to append to the AOF, in database `db`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// The database the command applies to.
    pub db: usize,
    /// The command and its arguments.
    pub argv: Vec<Vec<u8>>,
}

/// The flag marking an effect that goes to the replication stream only,
/// never to the AOF: PUBLISH and SPUBLISH, which Redis propagates to
/// replicas and not to its AOF (docs/replication.md §3.1). It is or-ed
/// into the effect's `db`, the database of the client that published:
/// the stream selects it first, as Redis's does.
pub const STREAM_ONLY_DB: usize = 1 << (usize::BITS - 1);

impl Effect {
    /// True for an effect that goes to the replication stream only
    /// ([`STREAM_ONLY_DB`]).
    pub fn is_stream_only(&self) -> bool {
        self.db & STREAM_ONLY_DB != 0
    }

    /// The database the replication stream selects for this effect.
    pub fn stream_db(&self) -> usize {
        self.db & !STREAM_ONLY_DB
    }
}

/// First line of every AOF hozon creates. Redis skips it like any `#` line;
/// the loader uses it to know the file's batches carry checksums.
pub const FILE_HEADER: &[u8] = b"#hozon-aof 1\r\n";
/// Prefix of a batch annotation line, with the format version.
pub const ANNOTATION_PREFIX: &[u8] = b"#hz1 ";
/// Longest annotation line we accept when reading (Redis reads 1024).
const ANNOTATION_MAX_BYTES: usize = 1024;

/// Appends the RESP encoding of one command.
pub fn encode_command(out: &mut Vec<u8>, argv: &[impl AsRef<[u8]>]) {
    out.push(b'*');
    crate::types::num::write_i64(out, argv.len() as i64);
    out.extend_from_slice(b"\r\n");
    for arg in argv {
        let arg = arg.as_ref();
        out.push(b'$');
        crate::types::num::write_i64(out, arg.len() as i64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// Builds the bytes of one batch: commands (with `SELECT` when the database
/// changes, `MULTI`/`EXEC` around multi-command units) and the closing
/// annotation.
#[derive(Debug, Default)]
pub struct BatchBuilder {
    body: Vec<u8>,
    commands: u64,
}

impl BatchBuilder {
    /// An empty batch.
    pub fn new() -> BatchBuilder {
        BatchBuilder::default()
    }

    /// True when nothing was added.
    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }

    /// Bytes of commands so far.
    pub fn len(&self) -> usize {
        self.body.len()
    }

    /// Commands so far (counting SELECT/MULTI/EXEC).
    pub fn commands(&self) -> u64 {
        self.commands
    }

    /// Ends the batch's body with its `#repl` line: the replication
    /// position after everything in it (`None`: the position ends). Call
    /// last, just before the batch is sealed.
    pub fn push_position(&mut self, position: Option<&Position>) {
        encode_position_line(position, &mut self.body);
    }

    /// Adds the effects of one command execution. `selected_db` is the
    /// database the file's reader will be in; it is updated.
    pub fn push_unit(&mut self, effects: &[Effect], selected_db: &mut Option<usize>) {
        // Stream-only effects (PUBLISH) are not the AOF's.
        let logged = effects.iter().filter(|e| !e.is_stream_only()).count();
        let Some(first) = effects.iter().find(|e| !e.is_stream_only()) else {
            return;
        };
        let wrap = logged > 1;
        if wrap {
            // SELECT before MULTI so the transaction starts in the right db.
            self.select(first.db, selected_db);
            self.push(&[&b"MULTI"[..]]);
        }
        for effect in effects.iter().filter(|e| !e.is_stream_only()) {
            self.select(effect.db, selected_db);
            self.push(&effect.argv);
        }
        if wrap {
            self.push(&[&b"EXEC"[..]]);
        }
    }

    /// Adds a single command as its own unit (no MULTI wrapping).
    pub fn push_command(&mut self, db: usize, argv: &[&[u8]], selected_db: &mut Option<usize>) {
        self.select(db, selected_db);
        self.push(argv);
    }

    /// Takes back a written batch's buffer for reuse by the next batch, so
    /// steady logging does not regrow a buffer on every turn.
    pub fn recycle(&mut self, mut buffer: Vec<u8>) {
        const KEEP_BYTES_MAX: usize = 4 << 20;
        if self.body.is_empty() && buffer.capacity() <= KEEP_BYTES_MAX {
            buffer.clear();
            self.body = buffer;
        }
    }

    fn select(&mut self, db: usize, selected_db: &mut Option<usize>) {
        if *selected_db != Some(db) {
            self.push(&[b"SELECT".to_vec(), db.to_string().into_bytes()]);
            *selected_db = Some(db);
        }
    }

    fn push(&mut self, argv: &[impl AsRef<[u8]>]) {
        encode_command(&mut self.body, argv);
        self.commands += 1;
    }

    /// The batch's bytes with its annotation; the builder is emptied.
    pub fn finish(&mut self, ts_ms: i64) -> Vec<u8> {
        self.commands = 0;
        seal(std::mem::take(&mut self.body), ts_ms)
    }

    /// The batch's body without its annotation, for another thread to
    /// [`seal`] (the annotation's CRC reads the whole body: an AOF
    /// rewrite's megabyte batches are sealed by its thread, not between
    /// clients on the command thread). The builder is emptied and starts
    /// the next body with the same capacity, so a batch never regrows.
    pub fn take_body(&mut self) -> Vec<u8> {
        self.commands = 0;
        let capacity = self.body.capacity();
        std::mem::replace(&mut self.body, Vec::with_capacity(capacity))
    }
}

/// `body` with its annotation line appended (see [`annotation_line`]).
pub fn seal(mut body: Vec<u8>, ts_ms: i64) -> Vec<u8> {
    let annotation = annotation_line(&body, ts_ms);
    body.extend_from_slice(&annotation);
    body
}

/// The annotation line closing a batch whose body is `body`:
/// `#hz1 <len> <ts_ms> <crc32>\r\n`, where the CRC covers the body and then
/// the line's own text up to the CRC (`#hz1 <len> <ts_ms> `), so a damaged
/// length or timestamp is detected like damaged data.
pub fn annotation_line(body: &[u8], ts_ms: i64) -> Vec<u8> {
    let mut line = format!("#hz1 {} {} ", body.len(), ts_ms).into_bytes();
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(body);
    hasher.update(&line);
    line.extend_from_slice(format!("{:08x}\r\n", hasher.finalize()).as_bytes());
    line
}

/// A parsed batch annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotation {
    /// Length of the batch body.
    pub len: u64,
    /// Unix ms when written.
    pub ts_ms: i64,
    /// CRC-32 of the body followed by the line up to the CRC field.
    pub crc: u32,
    /// Length of the line's text covered by the CRC.
    covered_len: usize,
}

impl Annotation {
    /// True when `body` (the bytes before the line) matches this
    /// annotation, whose line text is `line`.
    pub fn verifies(&self, body: &[u8], line: &[u8]) -> bool {
        if body.len() as u64 != self.len {
            return false;
        }
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(body);
        hasher.update(&line[..self.covered_len]);
        hasher.finalize() == self.crc
    }
}

/// The pair assertion of the AOF writer, run on a batch right before its
/// write(2): true when `batch` is a body of RESP commands (it starts with
/// `*` and ends with CRLF) closed by an annotation line that verifies it,
/// which is exactly what the loader will check when it reads it back.
/// A CRC over bytes about to be written, cheap next to the write itself.
pub fn batch_verifies(batch: &[u8]) -> bool {
    let Some(without_crlf) = batch.strip_suffix(b"\r\n") else {
        return false;
    };
    let line_start = match without_crlf.iter().rposition(|&b| b == b'\n') {
        Some(i) => i + 1,
        None => 0,
    };
    let (body, line) = (&batch[..line_start], &without_crlf[line_start..]);
    // A batch holds commands, or only a replication position (a turn
    // with stream bytes and no data).
    (body.first() == Some(&b'*') || body.starts_with(POSITION_PREFIX))
        && body.ends_with(b"\r\n")
        && parse_annotation(line).is_some_and(|a| a.verifies(body, line))
}

/// Parses an annotation line (without its CRLF).
pub fn parse_annotation(line: &[u8]) -> Option<Annotation> {
    let rest = line.strip_prefix(ANNOTATION_PREFIX)?;
    let text = std::str::from_utf8(rest).ok()?;
    let mut parts = text.split(' ');
    let len_text = parts.next()?;
    let ts_text = parts.next()?;
    let crc_text = parts.next()?;
    // Exactly 8 lower-case hex digits: a case flip is damage, not a variant.
    if parts.next().is_some()
        || crc_text.len() != 8
        || !crc_text
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let len = crate::types::num::parse_i64(len_text.as_bytes()).filter(|n| *n >= 0)? as u64;
    let ts_ms = crate::types::num::parse_i64(ts_text.as_bytes())?;
    let crc = u32::from_str_radix(crc_text, 16).ok()?;
    Some(Annotation {
        len,
        ts_ms,
        crc,
        covered_len: line.len() - crc_text.len(),
    })
}

/// Outcome of parsing one command at a position.
enum Parsed {
    /// A command (its argument ranges in the caller's buffer) and the
    /// position after it.
    Command(usize),
    /// The file ends inside the command.
    Incomplete,
    /// Not a valid command.
    Malformed(&'static str),
}

fn read_line(data: &[u8], pos: usize, max: usize) -> Option<Result<(&[u8], usize), ()>> {
    let window = &data[pos..data.len().min(pos + max)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(i) => Some(Ok((&data[pos..pos + i], pos + i + 2))),
        None if data.len() - pos >= max => Some(Err(())),
        None => None,
    }
}

/// The `*<n>\r\n` or `$<n>\r\n` line at `pos` (its first byte already
/// checked): the number and the offset after the line. The common case
/// (plain digits, no leading zero, CRLF within the loader's 32 bytes) is
/// read in one pass; anything else goes through [`read_line`] and
/// `parse_i64`, which decide exactly as before.
#[inline]
fn count_line(data: &[u8], pos: usize) -> Option<Result<(i64, usize), ()>> {
    const MAX: usize = 32;
    let mut p = pos + 1;
    let mut value: i64 = 0;
    let limit = data.len().min(pos + 19);
    while p < limit {
        let c = data[p];
        if c.is_ascii_digit() {
            value = value * 10 + i64::from(c - b'0');
            p += 1;
            continue;
        }
        let digits = p - pos - 1;
        if c == b'\r'
            && data.get(p + 1) == Some(&b'\n')
            && digits > 0
            && (data[pos + 1] != b'0' || digits == 1)
        {
            return Some(Ok((value, p + 2)));
        }
        break;
    }
    match read_line(data, pos, MAX)? {
        Err(()) => Some(Err(())),
        Ok((line, next)) => match crate::types::num::parse_i64(&line[1..]) {
            Some(n) => Some(Ok((n, next))),
            None => Some(Err(())),
        },
    }
}

/// Parses the command at `pos` (`data[pos]` exists), leaving its
/// argument ranges in `args` (cleared first; reused across calls so a
/// walk allocates nothing per command).
fn parse_command(data: &[u8], pos: usize, args: &mut Vec<Range<usize>>) -> Parsed {
    args.clear();
    if data[pos] != b'*' {
        return Parsed::Malformed("expected '*' at the start of a command");
    }
    let (argc, mut p) = match count_line(data, pos) {
        None => return Parsed::Incomplete,
        Some(Err(())) => return Parsed::Malformed("invalid multibulk count"),
        Some(Ok((n, next))) if n >= 1 => (n as usize, next),
        Some(Ok(_)) => return Parsed::Malformed("invalid multibulk count"),
    };
    // Every argument takes at least 6 bytes ("$0\r\n\r\n"): a count the
    // file cannot hold is answered without allocating for it.
    if argc > (data.len() - p) / 6 + 1 {
        return if data.len() - p < 6 * argc {
            Parsed::Incomplete
        } else {
            Parsed::Malformed("invalid multibulk count")
        };
    }
    args.reserve(argc.min(1024));
    for _ in 0..argc {
        if p >= data.len() {
            return Parsed::Incomplete;
        }
        if data[p] != b'$' {
            return Parsed::Malformed("expected '$' before an argument");
        }
        let (len, next) = match count_line(data, p) {
            None => return Parsed::Incomplete,
            Some(Err(())) => return Parsed::Malformed("invalid bulk length"),
            Some(Ok((n, next))) if n >= 0 => (n as usize, next),
            Some(Ok(_)) => return Parsed::Malformed("invalid bulk length"),
        };
        let end = match next.checked_add(len) {
            Some(e) => e,
            None => return Parsed::Malformed("invalid bulk length"),
        };
        if end + 2 > data.len() {
            return Parsed::Incomplete;
        }
        if &data[end..end + 2] != b"\r\n" {
            return Parsed::Malformed("argument not followed by CRLF");
        }
        args.push(next..end);
        p = end + 2;
    }
    Parsed::Command(p)
}

/// One command read by [`command_at`] with the loader's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandAt {
    /// A complete command: its arguments' byte ranges (the name first)
    /// and the offset after it.
    Complete {
        /// Byte ranges of the arguments in the data.
        args: Vec<Range<usize>>,
        /// Offset after the command's last CRLF.
        end: usize,
    },
    /// The data ends inside the command (or `pos` is at its end).
    Incomplete,
    /// Not a command the loader accepts there, and why.
    Malformed(&'static str),
}

/// Reads the RESP command at `pos` exactly as the loader does (same bounds
/// on counts and lengths), for tools that resynchronise after damage.
pub fn command_at(data: &[u8], pos: usize) -> CommandAt {
    if pos >= data.len() {
        return CommandAt::Incomplete;
    }
    let mut args = Vec::new();
    match parse_command(data, pos, &mut args) {
        Parsed::Command(end) => CommandAt::Complete { args, end },
        Parsed::Incomplete => CommandAt::Incomplete,
        Parsed::Malformed(why) => CommandAt::Malformed(why),
    }
}

/// [`command_at`] into a buffer the caller reuses: `Ok(end)` with the
/// arguments' byte ranges in `args`, or the same `Incomplete`/`Malformed`
/// outcomes (`Err`), without allocating per command.
pub fn command_at_into(
    data: &[u8],
    pos: usize,
    args: &mut Vec<Range<usize>>,
) -> Result<usize, CommandAt> {
    if pos >= data.len() {
        args.clear();
        return Err(CommandAt::Incomplete);
    }
    match parse_command(data, pos, args) {
        Parsed::Command(end) => Ok(end),
        Parsed::Incomplete => Err(CommandAt::Incomplete),
        Parsed::Malformed(why) => Err(CommandAt::Malformed(why)),
    }
}

/// The torn tail found (and dropped) while loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Offset where the valid data ends.
    pub valid_len: u64,
    /// Bytes dropped after it.
    pub dropped_bytes: u64,
    /// Complete commands in the dropped bytes.
    pub dropped_commands: u64,
    /// Why the tail is considered torn.
    pub reason: String,
}

/// Applies one replayed command; an `Err` text makes the file corrupt there.
pub type ApplyFn<'a> = dyn FnMut(&[&[u8]]) -> Result<(), String> + 'a;

/// What [`replay_at`] calls for each command: its end offset, its arguments.
pub type ApplyAtFn<'a> = dyn FnMut(u64, &[&[u8]]) -> Result<(), String> + 'a;

/// Damage before the tail: the file cannot be loaded without repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    /// Byte offset of the damage.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

/// What loading found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// True for files with hozon's header (checksummed batches).
    pub checksummed: bool,
    /// Commands applied (excluding SELECT/MULTI/EXEC).
    pub commands: u64,
    /// Verified batches.
    pub batches: u64,
    /// Length of the valid prefix (the file is truncated to it when torn).
    pub valid_len: u64,
    /// Timestamp of the first verified batch (hozon) or `#TS:` line (Redis), ms.
    pub first_ts_ms: Option<i64>,
    /// Timestamp of the last verified batch (hozon) or `#TS:` line (Redis), ms.
    pub last_ts_ms: Option<i64>,
    /// The torn tail, if one was found.
    pub torn: Option<TornTail>,
    /// The replication position of the data loaded (docs/replication.md,
    /// "Loading"): the `#repl` line of the last verified batch that had
    /// one; `None` when it said `none`, when a later batch had commands
    /// but no such line, or when commands outside batches followed.
    pub position: Option<Position>,
}

/// Replays the AOF in `data`, calling `apply` for each command in order.
///
/// `apply` receives a command (SELECT included) and returns an error text
/// when it cannot be applied (unknown command, error reply), which makes the
/// file corrupt at that command. MULTI … EXEC blocks are applied only once
/// their EXEC is read.
pub fn replay(data: &[u8], apply: &mut ApplyFn<'_>) -> Result<LoadReport, Corruption> {
    replay_at(data, &mut |_, argv| apply(argv))
}

/// [`replay`], also handing `apply` each command's end offset in `data`
/// (how far the replay has come).
pub fn replay_at(data: &[u8], apply: &mut ApplyAtFn<'_>) -> Result<LoadReport, Corruption> {
    // `walk` hands on exactly the commands to apply, in order: a
    // checksummed batch's once it verified, a MULTI block's once its EXEC
    // was read. MULTI and EXEC themselves are not applied.
    let mut failure: Option<Corruption> = None;
    let report = walk(data, &mut |event| {
        let WalkEvent::Command(c) = event else {
            return std::ops::ControlFlow::Continue(());
        };
        let name = c.argv[0];
        if name.eq_ignore_ascii_case(b"MULTI") || name.eq_ignore_ascii_case(b"EXEC") {
            return std::ops::ControlFlow::Continue(());
        }
        match apply(c.offset + c.len, c.argv) {
            Ok(()) => std::ops::ControlFlow::Continue(()),
            Err(reason) => {
                failure = Some(Corruption {
                    offset: c.offset,
                    reason,
                });
                std::ops::ControlFlow::Break(())
            }
        }
    })?;
    match failure {
        Some(c) => Err(c),
        None => Ok(report),
    }
}

/// A bad batch starting at `batch_start`: a torn tail when no intact batch
/// follows it, corruption otherwise.
fn tail_or_corruption(
    data: &[u8],
    batch_start: usize,
    valid_len: usize,
    why: &str,
    mut report: LoadReport,
) -> Result<LoadReport, Corruption> {
    if let Some(next_good) = next_valid_batch(data, batch_start) {
        return Err(Corruption {
            offset: batch_start as u64,
            reason: format!("{why}; intact data follows at offset {next_good}"),
        });
    }
    report.torn = Some(TornTail {
        valid_len: valid_len as u64,
        dropped_bytes: (data.len() - valid_len) as u64,
        dropped_commands: count_commands(data, valid_len),
        reason: why.to_string(),
    });
    report.valid_len = valid_len as u64;
    Ok(report)
}

/// Offset of the first annotation after `from` that verifies the bytes
/// before it (a batch that survived intact), if any.
pub fn next_valid_batch(data: &[u8], from: usize) -> Option<usize> {
    let mut search = from;
    while let Some(i) = find(&data[search..], b"\r\n#hz1 ") {
        let line_start = search + i + 2;
        if let Some(Ok((line, _))) = read_line(data, line_start, ANNOTATION_MAX_BYTES) {
            if let Some(a) = parse_annotation(line) {
                if let Some(body_start) = line_start.checked_sub(a.len as usize) {
                    if body_start > from && a.verifies(&data[body_start..line_start], line) {
                        return Some(body_start);
                    }
                }
            }
        }
        search = line_start;
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Complete commands parseable from `from` (for loss reports).
pub fn count_commands(data: &[u8], from: usize) -> u64 {
    let mut pos = from;
    let mut n = 0;
    let mut args = Vec::new();
    while pos < data.len() {
        if data[pos] == b'#' {
            match read_line(data, pos, ANNOTATION_MAX_BYTES) {
                Some(Ok((_, next))) => {
                    pos = next;
                    continue;
                }
                _ => break,
            }
        }
        match parse_command(data, pos, &mut args) {
            Parsed::Command(next) => {
                n += 1;
                pos = next;
            }
            _ => break,
        }
    }
    n
}

/// One step of [`walk`].
#[derive(Debug)]
pub enum WalkEvent<'e> {
    /// A command known to be intact, in file order: in a checksummed
    /// section once its batch verified, in a plain section as it is read
    /// (a MULTI block once its EXEC is read).
    Command(WalkCommand<'e>),
    /// A batch of a checksummed section whose annotation verified (sent
    /// after the batch's commands).
    BatchEnd(WalkBatch),
}

/// A command seen by [`walk`]. SELECT, MULTI and EXEC are sent too, so a
/// reader can follow the selected database and transactions.
#[derive(Debug)]
pub struct WalkCommand<'e> {
    /// Byte offset of the command's `*` in the walked data.
    pub offset: u64,
    /// Bytes of the command's RESP encoding.
    pub len: u64,
    /// The arguments, the command name first.
    pub argv: &'e [&'e [u8]],
    /// Unix ms of the command: its batch's annotation (checksummed
    /// sections) or the last `#TS:` line before it (plain sections);
    /// None when there is none.
    pub ts_ms: Option<i64>,
    /// True from MULTI to EXEC, both included.
    pub in_multi: bool,
    /// True for a command of a checksummed batch (sent once the batch
    /// verified, before its [`WalkEvent::BatchEnd`]); false in a plain
    /// section.
    pub batched: bool,
}

/// A verified batch seen by [`walk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkBatch {
    /// Byte offset where the batch body starts.
    pub body_offset: u64,
    /// Byte offset of the `#hz1` annotation line closing it.
    pub annotation_offset: u64,
    /// Byte offset after the annotation line.
    pub end: u64,
    /// The annotation's timestamp, Unix ms.
    pub ts_ms: i64,
    /// Commands in the batch (SELECT, MULTI and EXEC included).
    pub commands: u64,
}

/// Walks the AOF in `data` like [`replay`] (same damage rules: a torn
/// tail ends the walk and is reported in the result, damage before it is
/// `Err`), sending every intact command with its offset and timestamp to
/// `visit`. Commands are sent before the damage that ends a walk is
/// found. `visit` returning `Break` stops the walk: the result is then
/// `Ok`, with `valid_len` the position reached and no torn tail.
pub fn walk(
    data: &[u8],
    visit: &mut dyn FnMut(WalkEvent<'_>) -> std::ops::ControlFlow<()>,
) -> Result<LoadReport, Corruption> {
    use std::ops::ControlFlow;

    /// A command read but not yet sent: offset, end, its arguments (a
    /// range of `Pending::args`), time.
    type Held = (usize, usize, Range<usize>, Option<i64>);

    /// Commands read but not yet sent, their argument ranges in one
    /// buffer (no allocation per command once the buffers have grown).
    #[derive(Default)]
    struct Pending {
        held: Vec<Held>,
        args: Vec<Range<usize>>,
    }

    impl Pending {
        fn hold(&mut self, at: usize, end: usize, args: &[Range<usize>], ts: Option<i64>) -> Held {
            let from = self.args.len();
            self.args.extend_from_slice(args);
            (at, end, from..self.args.len(), ts)
        }

        fn clear(&mut self) {
            self.held.clear();
            self.args.clear();
        }
    }

    /// Where a command stands (see [`WalkCommand`]).
    #[derive(Clone, Copy)]
    struct Framing {
        /// Inside MULTI (the MULTI and EXEC included).
        in_multi: bool,
        /// In a checksummed batch.
        batched: bool,
    }

    /// Sends one command; `argv` is a scratch buffer reused across calls.
    fn send<'d>(
        data: &'d [u8],
        held: &Held,
        args: &[Range<usize>],
        argv: &mut Vec<&'d [u8]>,
        framing: Framing,
        report: &mut LoadReport,
        visit: &mut dyn FnMut(WalkEvent<'_>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let Framing { in_multi, batched } = framing;
        let (at, end, _, ts_ms) = held;
        argv.clear();
        argv.extend(args.iter().map(|r| &data[r.clone()]));
        let name = argv[0];
        if !name.eq_ignore_ascii_case(b"SELECT")
            && !name.eq_ignore_ascii_case(b"MULTI")
            && !name.eq_ignore_ascii_case(b"EXEC")
        {
            report.commands += 1;
        }
        visit(WalkEvent::Command(WalkCommand {
            offset: *at as u64,
            len: (end - at) as u64,
            argv,
            ts_ms: *ts_ms,
            in_multi,
            batched,
        }))
    }

    let mut checksummed = data.starts_with(FILE_HEADER);
    let mut report = LoadReport {
        checksummed,
        ..LoadReport::default()
    };
    let mut pos = if checksummed { FILE_HEADER.len() } else { 0 };
    let mut batch_start = pos;
    // Checksummed: the commands of the current batch. Plain: the
    // commands of an open MULTI block (the MULTI itself in `multi`).
    let mut pending = Pending::default();
    let mut multi: Option<Held> = None;
    let mut args: Vec<Range<usize>> = Vec::new();
    let mut argv: Vec<&[u8]> = Vec::new();
    let mut last_ts_line: Option<i64> = None;
    let mut valid_len = pos;
    // The current batch's `#repl` line: where it is and what it says.
    type PositionLine = (usize, Result<Option<Position>, PositionLineError>);
    let mut batch_position: Option<PositionLine> = None;
    let corrupt = |offset: usize, reason: String| Corruption {
        offset: offset as u64,
        reason,
    };
    macro_rules! sent {
        ($flow:expr, $pos:expr) => {
            if $flow.is_break() {
                report.valid_len = $pos as u64;
                return Ok(report);
            }
        };
    }

    while pos < data.len() {
        if data[pos] == b'#' {
            let (line, next) = match read_line(data, pos, ANNOTATION_MAX_BYTES) {
                Some(Ok(x)) => x,
                None => break,
                Some(Err(())) => {
                    return Err(corrupt(
                        pos,
                        "annotation line longer than 1024 bytes".into(),
                    ));
                }
            };
            if line.starts_with(b"#hz") && !line.starts_with(ANNOTATION_PREFIX) {
                return Err(corrupt(
                    pos,
                    format!(
                        "unknown annotation version '{}' (written by a newer hozon?)",
                        String::from_utf8_lossy(&line[..line.len().min(16)])
                    ),
                ));
            }
            if checksummed && line.starts_with(POSITION_PREFIX) {
                // Part of the batch body: it counts once the batch verifies.
                batch_position = Some((pos, parse_position_line(line)));
                pos = next;
                continue;
            }
            if !checksummed && line == &FILE_HEADER[..FILE_HEADER.len() - 2] {
                if multi.is_some() {
                    return Err(corrupt(
                        pos,
                        "checksummed section starts inside MULTI".into(),
                    ));
                }
                checksummed = true;
                report.checksummed = true;
                batch_position = None;
                pos = next;
                batch_start = pos;
                valid_len = pos;
                continue;
            }
            if !checksummed && line.starts_with(ANNOTATION_PREFIX) {
                return Err(corrupt(
                    pos,
                    "checksum annotation in a file whose hozon header is missing or damaged".into(),
                ));
            }
            if checksummed && line.starts_with(ANNOTATION_PREFIX) {
                let body = &data[batch_start..pos];
                let verified = match parse_annotation(line) {
                    Some(a) if a.verifies(body, line) => Some(a),
                    _ => None,
                };
                let Some(annotation) = verified else {
                    let why = format!("checksum mismatch in the batch at offset {batch_start}");
                    return tail_or_corruption(data, batch_start, valid_len, &why, report);
                };
                let mut in_multi = false;
                let commands = pending.held.len() as u64;
                for h in &pending.held {
                    let h_args = &pending.args[h.2.clone()];
                    let name = &data[h_args[0].clone()];
                    let opens = name.eq_ignore_ascii_case(b"MULTI");
                    let closes = name.eq_ignore_ascii_case(b"EXEC");
                    let flow = send(
                        data,
                        &(h.0, h.1, 0..0, Some(annotation.ts_ms)),
                        h_args,
                        &mut argv,
                        Framing {
                            in_multi: in_multi || opens,
                            batched: true,
                        },
                        &mut report,
                        visit,
                    );
                    sent!(flow, h.1);
                    if opens {
                        in_multi = true;
                    } else if closes {
                        in_multi = false;
                    }
                }
                pending.clear();
                if in_multi {
                    return Err(corrupt(
                        batch_start,
                        "a verified batch ends inside MULTI".into(),
                    ));
                }
                match batch_position.take() {
                    Some((_, Ok(position))) => report.position = position,
                    // The batch verified: the line was written so.
                    Some((at, Err(e))) => return Err(corrupt(at, e.to_string())),
                    None if commands > 0 => report.position = None,
                    None => {}
                }
                report.batches += 1;
                report.first_ts_ms.get_or_insert(annotation.ts_ms);
                report.last_ts_ms = Some(annotation.ts_ms);
                let flow = visit(WalkEvent::BatchEnd(WalkBatch {
                    body_offset: batch_start as u64,
                    annotation_offset: pos as u64,
                    end: next as u64,
                    ts_ms: annotation.ts_ms,
                    commands,
                }));
                sent!(flow, next);
                pos = next;
                batch_start = pos;
                valid_len = pos;
                continue;
            }
            if let Some(ts) = line.strip_prefix(b"#TS:") {
                if let Some(secs) = crate::types::num::parse_i64(ts) {
                    let ms = secs.saturating_mul(1000);
                    report.first_ts_ms.get_or_insert(ms);
                    report.last_ts_ms = Some(ms);
                    last_ts_line = Some(ms);
                }
            }
            pos = next;
            if !checksummed && multi.is_none() {
                valid_len = pos;
            }
            continue;
        }
        match parse_command(data, pos, &mut args) {
            Parsed::Command(next) => {
                let at = pos;
                pos = next;
                if checksummed {
                    let h = pending.hold(at, next, &args, None);
                    pending.held.push(h);
                    continue;
                }
                // A command outside the batches: no position covers it.
                report.position = None;
                let name = &data[args[0].clone()];
                if name.eq_ignore_ascii_case(b"MULTI") {
                    if multi.is_some() {
                        return Err(corrupt(at, "MULTI inside MULTI".into()));
                    }
                    multi = Some(pending.hold(at, next, &args, last_ts_line));
                    continue;
                }
                match multi.take() {
                    Some(opened) if name.eq_ignore_ascii_case(b"EXEC") => {
                        let flow = send(
                            data,
                            &opened,
                            &pending.args[opened.2.clone()],
                            &mut argv,
                            Framing {
                                in_multi: true,
                                batched: false,
                            },
                            &mut report,
                            visit,
                        );
                        sent!(flow, opened.1);
                        for h in &pending.held {
                            let h_args = &pending.args[h.2.clone()];
                            let flow = send(
                                data,
                                h,
                                h_args,
                                &mut argv,
                                Framing {
                                    in_multi: true,
                                    batched: false,
                                },
                                &mut report,
                                visit,
                            );
                            sent!(flow, h.1);
                        }
                        pending.clear();
                        let command = (at, next, 0..0, last_ts_line);
                        let flow = send(
                            data,
                            &command,
                            &args,
                            &mut argv,
                            Framing {
                                in_multi: true,
                                batched: false,
                            },
                            &mut report,
                            visit,
                        );
                        sent!(flow, next);
                    }
                    Some(opened) => {
                        multi = Some(opened);
                        let h = pending.hold(at, next, &args, last_ts_line);
                        pending.held.push(h);
                        continue;
                    }
                    None => {
                        let command = (at, next, 0..0, last_ts_line);
                        let flow = send(
                            data,
                            &command,
                            &args,
                            &mut argv,
                            Framing {
                                in_multi: false,
                                batched: false,
                            },
                            &mut report,
                            visit,
                        );
                        sent!(flow, next);
                    }
                }
                valid_len = next;
            }
            // In a checksummed section a command running past the end may
            // be a damaged length in the middle of the file: intact batches
            // after it make it corruption, not a torn tail to cut away.
            Parsed::Incomplete if checksummed => {
                let why = format!("a command at offset {pos} runs past the end of the file");
                return tail_or_corruption(data, batch_start, valid_len, &why, report);
            }
            Parsed::Incomplete => break,
            Parsed::Malformed(why) => {
                if checksummed {
                    let why = format!("malformed command at offset {pos}: {why}");
                    return tail_or_corruption(data, batch_start, valid_len, &why, report);
                }
                return Err(corrupt(pos, format!("malformed command: {why}")));
            }
        }
    }
    if valid_len < data.len() {
        let reason = if checksummed {
            "the last batch has no valid annotation (incomplete write)".to_string()
        } else if multi.is_some() {
            "unfinished MULTI at the end of the file".to_string()
        } else {
            "the last command is incomplete".to_string()
        };
        report.torn = Some(TornTail {
            valid_len: valid_len as u64,
            dropped_bytes: (data.len() - valid_len) as u64,
            dropped_commands: count_commands(data, valid_len),
            reason,
        });
    }
    report.valid_len = valid_len as u64;
    Ok(report)
}

/// Parses a Redis 7 AOF manifest (`appendonlydir/appendonly.aof.manifest`):
/// lines of `key value` pairs, `file <name> seq <n> type <b|h|i>`, names
/// quoted like Redis's `sdssplitargs` when they need it. Returns the files
/// to load in order — the base (if any) first, then the incr files in
/// manifest order — each with whether it is the base; history files are
/// left out.
pub fn parse_redis_manifest(text: &[u8]) -> Result<Vec<(String, bool)>, String> {
    let mut base: Option<String> = None;
    let mut incrs = Vec::new();
    for (n, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) || line.first() == Some(&b'#') {
            continue;
        }
        let words = split_args(line).ok_or_else(|| format!("line {}: unbalanced quotes", n + 1))?;
        if words.len() % 2 != 0 {
            return Err(format!("line {}: invalid AOF manifest file format", n + 1));
        }
        let mut name = None;
        let mut kind = None;
        let mut seq = None;
        for pair in words.chunks(2) {
            match pair[0].as_slice() {
                b"file" => name = Some(pair[1].clone()),
                b"type" => kind = Some(pair[1].clone()),
                b"seq" => seq = Some(pair[1].clone()),
                _ => {} // Redis ignores keys it does not know.
            }
        }
        let (Some(name), Some(kind), Some(_seq)) = (name, kind, seq) else {
            return Err(format!(
                "line {}: a file needs 'file', 'seq' and 'type'",
                n + 1
            ));
        };
        let name = String::from_utf8(name)
            .map_err(|_| format!("line {}: file name is not UTF-8", n + 1))?;
        if name.contains('/') || name.is_empty() || name == "." || name == ".." {
            return Err(format!("line {}: '{name}' is not a plain file name", n + 1));
        }
        match kind.as_slice() {
            b"b" => {
                if base.replace(name).is_some() {
                    return Err(format!("line {}: more than one base file", n + 1));
                }
            }
            b"i" => incrs.push(name),
            b"h" => {}
            other => {
                return Err(format!(
                    "line {}: unknown file type '{}'",
                    n + 1,
                    String::from_utf8_lossy(other)
                ))
            }
        }
    }
    if base.is_none() && incrs.is_empty() {
        return Err("the manifest lists no file to load".into());
    }
    Ok(base
        .map(|b| (b, true))
        .into_iter()
        .chain(incrs.into_iter().map(|i| (i, false)))
        .collect())
}

/// Splits a line into words like Redis's `sdssplitargs`: whitespace
/// separated, `"..."` with `\n \r \t \b \a \\ \" \xHH` escapes, `'...'`
/// with `\'`. None on unbalanced quotes.
fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            break;
        }
        let mut word = Vec::new();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    let b = *line.get(i)?;
                    match b {
                        b'"' => {
                            i += 1;
                            break;
                        }
                        b'\\'
                            if line.get(i + 1) == Some(&b'x')
                                && line.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                                && line.get(i + 3).is_some_and(u8::is_ascii_hexdigit) =>
                        {
                            let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                            word.push(u8::from_str_radix(hex, 16).ok()?);
                            i += 4;
                        }
                        b'\\' => {
                            let c = *line.get(i + 1)?;
                            word.push(match c {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 8,
                                b'a' => 7,
                                other => other,
                            });
                            i += 2;
                        }
                        other => {
                            word.push(other);
                            i += 1;
                        }
                    }
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    let b = *line.get(i)?;
                    if b == b'\'' {
                        i += 1;
                        break;
                    }
                    if b == b'\\' && line.get(i + 1) == Some(&b'\'') {
                        word.push(b'\'');
                        i += 2;
                    } else {
                        word.push(b);
                        i += 1;
                    }
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    word.push(line[i]);
                    i += 1;
                }
            }
        }
        words.push(word);
    }
    Some(words)
}

#[cfg(test)]
mod tests;
