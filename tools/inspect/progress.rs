//! Progress on stderr for long work. indicatif draws nothing when stderr
//! is not a terminal, so pipes, redirections and tests see no output from
//! here; small inputs get no bar at all (they finish before it would be
//! useful).

use std::cell::Cell;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Set when the output streams to the same terminal as stderr (`keys`
/// without a pipe): a bar would be drawn over the lines.
static DISABLED: AtomicBool = AtomicBool::new(false);

/// No bars from now on.
pub fn disable() {
    DISABLED.store(true, Ordering::Relaxed);
}

/// Inputs smaller than this finish too fast for a bar to help.
const MIN_BYTES: u64 = 64 << 20;

/// A bar (or a spinner when the total is unknown), or nothing.
pub struct Progress(Option<ProgressBar>, Cell<u64>);

/// Positions closer than this to the last one drawn are not passed on:
/// callers report every key, and reading the clock per key costs.
const STEP: u64 = 1 << 20;

/// True when a bar may be drawn at all: stderr is a terminal, and no
/// output streams to it.
fn wanted() -> bool {
    !DISABLED.load(Ordering::Relaxed) && std::io::stderr().is_terminal()
}

impl Progress {
    /// A bar over `total` bytes of input, when there are enough of them.
    pub fn bytes(total: u64, what: &str) -> Progress {
        if total < MIN_BYTES || !wanted() {
            return Progress(None, Cell::new(0));
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        Progress(Some(bar), Cell::new(0))
    }

    /// A bar over `total` keys of an input of `input_bytes` (when that is
    /// large enough to be worth one).
    pub fn keys(total: u64, input_bytes: u64, what: &str) -> Progress {
        if input_bytes < MIN_BYTES || !wanted() {
            return Progress(None, Cell::new(0));
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} keys eta {eta}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        Progress(Some(bar), Cell::new(0))
    }

    /// A spinner with elapsed time, for work whose end is not known (an
    /// AOF replay, a walk with no offsets), on an input of `input_bytes`.
    pub fn spinner(input_bytes: u64, what: &str) -> Progress {
        if input_bytes < MIN_BYTES || !wanted() {
            return Progress(None, Cell::new(0));
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("a valid template"),
        );
        bar.set_message(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress(Some(bar), Cell::new(0))
    }

    /// Moves the bar to `pos`.
    pub fn set(&self, pos: u64) {
        if let Some(bar) = &self.0 {
            if pos.abs_diff(self.1.get()) >= STEP {
                self.1.set(pos);
                bar.set_position(pos);
            }
        }
    }

    /// Moves the bar on by `n`.
    pub fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }
}

impl Drop for Progress {
    /// The bar goes away when the work ends, so it never mixes with the
    /// report printed after it.
    fn drop(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
