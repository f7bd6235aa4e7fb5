//! The upkeep thread: what the server's event loop does when no client
//! talks to it (docs/embedding.md, "The upkeep thread").

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::clock::now_ms;

use super::commit::Durability;
use super::Shared;

/// One slice of a running BGSAVE or rewrite capture (the server's
/// `BACKGROUND_SLICE`).
const BACKGROUND_SLICE: Duration = Duration::from_micros(500);

/// The pause between two slices while a capture runs: callers get the
/// lock between them.
const BETWEEN_SLICES: Duration = Duration::from_micros(200);

/// Starts the upkeep thread of `shared`, waking every `interval` (default
/// `1000 / hz` ms).
pub(crate) fn start(
    shared: Arc<Shared>,
    interval: Option<Duration>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("hozon-upkeep".into())
        .spawn(move || run(&shared, interval))
}

fn run(shared: &Shared, interval: Option<Duration>) {
    loop {
        let (busy, period, target) = {
            let mut state = shared.lock_state();
            let Some(engine) = state.engine.as_mut() else {
                return;
            };
            let before = engine.log_appended();
            // Active expiry and rehashing, the AOF's periodic work (the
            // everysec fsync, retrying a failed write), the figures.
            engine.cron();
            // Save points, the automatic rewrite, a running BGSAVE or
            // BGREWRITEAOF advanced by a slice. Its log line has no log to
            // go to in a library.
            let _ = engine.background_step(BACKGROUND_SLICE, now_ms());
            let busy = engine.background_busy();
            let hz = engine.config().hz.max(1);
            let logged = engine.log_appended() != before;
            shared.after_command(&mut state);
            let target = match shared.settle_turn(&mut state, logged) {
                Ok(Durability::Batch(target)) => Some(target),
                // A failed write is kept and retried by the next cron.
                Ok(Durability::Done) | Err(_) => None,
            };
            let period = Duration::from_millis(u64::from(1000 / hz).max(1));
            (busy, interval.unwrap_or(period), target)
        };
        if let Some(target) = target {
            // Active expiry's DELs under `always`: committed like a
            // command's effects.
            let _ = shared.wait_durable(target, false);
        }
        let stop = shared.stop.lock().unwrap_or_else(|p| p.into_inner());
        if *stop {
            return;
        }
        let pause = if busy { BETWEEN_SLICES } else { period };
        let (stop, _) = shared
            .stop_signal
            .wait_timeout(stop, pause)
            .unwrap_or_else(|p| p.into_inner());
        if *stop {
            return;
        }
    }
}
