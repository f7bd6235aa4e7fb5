//! The latency monitor (Redis's latency.c): per event, the latest 160
//! one-per-second samples (milliseconds) at or above
//! `latency-monitor-threshold`, the all-time maximum, LATENCY GRAPH's
//! sparkline and LATENCY DOCTOR's report.

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub const TS_LEN: usize = 160;

/// One sample: Unix seconds and milliseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Unix time in seconds (0: an empty slot).
    pub time: i64,
    /// Latency in milliseconds.
    pub latency: u64,
}

/// One event's time series.
#[derive(Debug, Clone)]
pub struct Series {
    samples: [Sample; TS_LEN],
    idx: usize,
    /// The highest latency since the event's last reset.
    pub max: u64,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            samples: [Sample::default(); TS_LEN],
            idx: 0,
            max: 0,
        }
    }
}

impl Series {
    /// The samples, oldest first, empty slots left out.
    pub fn samples(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..TS_LEN)
            .map(move |j| self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.time != 0)
    }

    /// The latest sample.
    pub fn last(&self) -> Sample {
        self.samples[(self.idx + TS_LEN - 1) % TS_LEN]
    }
}

/// The monitored events, in the order they first occurred.
#[derive(Debug, Default)]
pub struct LatencyMonitor {
    events: Vec<(String, Series)>,
}

impl LatencyMonitor {
    /// Records `latency_ms` for `event` when it reaches `threshold_ms`
    /// (0: the monitor is off): Redis's `latencyAddSampleIfNeeded`.
    pub fn add_if_needed(&mut self, threshold_ms: u64, event: &str, latency_ms: u64, now_s: i64) {
        if threshold_ms == 0 || latency_ms < threshold_ms {
            return;
        }
        self.add(event, latency_ms, now_s);
    }

    /// Records a sample: one per second, the highest of that second.
    pub fn add(&mut self, event: &str, latency_ms: u64, now_s: i64) {
        let series = match self.events.iter().position(|(name, _)| name == event) {
            Some(i) => &mut self.events[i].1,
            None => {
                self.events.push((event.to_string(), Series::default()));
                &mut self.events.last_mut().expect("just pushed").1
            }
        };
        series.max = series.max.max(latency_ms);
        let prev = (series.idx + TS_LEN - 1) % TS_LEN;
        if series.samples[prev].time == now_s {
            let sample = &mut series.samples[prev];
            sample.latency = sample.latency.max(latency_ms);
            return;
        }
        series.samples[series.idx] = Sample {
            time: now_s,
            latency: latency_ms,
        };
        series.idx = (series.idx + 1) % TS_LEN;
    }

    /// Every event with its series.
    pub fn events(&self) -> &[(String, Series)] {
        &self.events
    }

    /// The series of `event` (exact name, as Redis's dict lookup).
    pub fn series(&self, event: &[u8]) -> Option<(&str, &Series)> {
        self.events
            .iter()
            .find(|(name, _)| name.as_bytes() == event)
            .map(|(name, series)| (name.as_str(), series))
    }

    /// LATENCY RESET: the events named (case-insensitively), or all with
    /// None. Returns how many were reset.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.events.len();
        self.events
            .retain(|(name, _)| event.is_some_and(|e| !name.as_bytes().eq_ignore_ascii_case(e)));
        before - self.events.len()
    }
}

/// Redis's sparkline rendering (sparkline.c, filled, 4 rows) of
/// `(value, label)` samples, `columns` per band.
fn sparkline(out: &mut String, samples: &[(f64, String)], columns: usize, rows: usize) {
    const FILL: &[u8] = b"_o#";
    const LABEL_MARGIN_TOP: usize = 1;
    if samples.is_empty() {
        return;
    }
    let min = samples.iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    let max = samples
        .iter()
        .map(|s| s.0)
        .fold(f64::NEG_INFINITY, f64::max);
    let has_labels = samples.iter().any(|s| !s.1.is_empty());
    let mut relmax = max - min;
    if relmax == 0.0 {
        relmax = 1.0;
    }
    let steps = (FILL.len() * rows) as i64;
    for (band, chunk) in samples.chunks(columns).enumerate() {
        if band != 0 {
            out.push('\n');
        }
        let mut row = 0usize;
        loop {
            let mut chars = vec![b' '; chunk.len()];
            let mut more = false;
            for (j, (value, label)) in chunk.iter().enumerate() {
                let relval = value - min;
                let mut step = (((relval * steps as f64) as i64) as f64 / relmax) as i64;
                step = step.clamp(0, steps - 1);
                if row < rows {
                    let charidx = step - ((rows - row - 1) * FILL.len()) as i64;
                    more = true;
                    if charidx >= 0 && (charidx as usize) < FILL.len() {
                        chars[j] = FILL[charidx as usize];
                    } else if charidx >= FILL.len() as i64 {
                        chars[j] = b'|';
                    }
                } else {
                    if has_labels && row - rows < LABEL_MARGIN_TOP {
                        more = true;
                        break;
                    }
                    let label_char = row - rows - LABEL_MARGIN_TOP;
                    if let Some(&c) = label.as_bytes().get(label_char) {
                        more = true;
                        chars[j] = c;
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&chars));
            out.push('\n');
        }
    }
}

/// LATENCY GRAPH's text for `event` (Redis's `latencyCommandGenSparkeline`).
pub fn graph(event: &str, series: &Series, now_s: i64) -> String {
    let mut samples = Vec::new();
    let (mut min, mut max) = (0u64, 0u64);
    for sample in series.samples() {
        if samples.is_empty() {
            min = sample.latency;
            max = sample.latency;
        } else {
            min = min.min(sample.latency);
            max = max.max(sample.latency);
        }
        let elapsed = now_s - sample.time;
        let label = if elapsed < 60 {
            format!("{elapsed}s")
        } else if elapsed < 3600 {
            format!("{}m", elapsed / 60)
        } else if elapsed < 3600 * 24 {
            format!("{}h", elapsed / 3600)
        } else {
            format!("{}d", elapsed / (3600 * 24))
        };
        samples.push((sample.latency as f64, label));
    }
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        series.max
    );
    out.push_str(&"-".repeat(80));
    out.push('\n');
    sparkline(&mut out, &samples, 80, 4);
    out
}

/// Per-event figures of LATENCY DOCTOR (Redis's `analyzeLatencyForEvent`).
fn analyze(series: &Series, now_s: i64) -> (u64, u64, u64, i64) {
    let samples: Vec<Sample> = series.samples().collect();
    if samples.is_empty() {
        return (0, 0, 0, 0);
    }
    let n = samples.len() as u64;
    let avg = samples.iter().map(|s| s.latency).sum::<u64>() / n;
    let oldest = samples.iter().map(|s| s.time).min().unwrap_or(now_s);
    let period = (now_s - oldest).max(1);
    let mad = samples.iter().map(|s| s.latency.abs_diff(avg)).sum::<u64>() / n;
    (n, avg, mad, period)
}

/// What LATENCY DOCTOR needs besides the events.
#[derive(Debug, Clone, Copy)]
pub struct DoctorContext {
    /// `latency-monitor-threshold`.
    pub threshold_ms: u64,
    /// `slowlog-log-slower-than`.
    pub slowlog_slower_than: i64,
    /// `appendfsync always` in force.
    pub fsync_always: bool,
    /// `hz`.
    pub hz: u64,
}

/// LATENCY DOCTOR's report: Redis's wording for the events both servers
/// have, hozon's own advice for its persistence events.
pub fn doctor(monitor: &LatencyMonitor, ctx: DoctorContext, now_s: i64) -> String {
    if monitor.events.is_empty() && ctx.threshold_ms == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".to_string();
    }
    let mut report = String::new();
    let mut advice: Vec<String> = Vec::new();
    let mut add = |line: String| {
        if !advice.contains(&line) {
            advice.push(line);
        }
    };
    for (i, (event, series)) in monitor.events.iter().enumerate() {
        if i == 0 {
            report.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let (n, avg, mad, period) = analyze(series, now_s);
        report.push_str(&format!(
            "{}. {event}: {n} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
            i + 1,
            period as f64 / n.max(1) as f64,
            series.max
        ));
        match event.as_str() {
            "command" => {
                if ctx.slowlog_slower_than < 0 {
                    add(format!("- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n", ctx.threshold_ms * 1000));
                } else if (ctx.slowlog_slower_than / 1000) as u64 > ctx.threshold_ms {
                    add(format!("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.\n", ctx.threshold_ms * 1000));
                }
                add("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n".into());
                add(LARGE_OBJECTS.into());
            }
            "fast-command" => add(SCHEDULER.into()),
            "aof-fsync-always" | "hozon-aof-fsync-wait" if ctx.fsync_always => {
                add("- Your fsync policy is set to 'always'. It is very hard to get good performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n".into());
            }
            "aof-write" | "hozon-aof-fsync" | "hozon-aof-fsync-lag" => {
                add(LOCAL_DISK.into());
                add(SSD.into());
                add(CONTENTION.into());
            }
            "expire-cycle" => {
                if ctx.hz < 100 {
                    add("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n".into());
                }
                add(LARGE_OBJECTS.into());
            }
            "eviction-del" => add(LARGE_OBJECTS.into()),
            _ => {}
        }
        report.push('\n');
    }
    if monitor.events.is_empty() && advice.is_empty() {
        report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
    } else if advice.is_empty() {
        report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
    } else {
        report.push_str("\nI have a few advices for you:\n\n");
        for line in advice {
            report.push_str(&line);
        }
    }
    report
}

const LARGE_OBJECTS: &str = "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n";
const SCHEDULER: &str = "- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n";
const LOCAL_DISK: &str = "- It is strongly advised to use local disks for persistence, especially if you are using AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n";
const SSD: &str = "- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and AOF log rewriting (resulting in smaller memory usage). With extremely high write load SSD disks can be a good option. However Redis should perform reasonably with high load using normal disks. Use this advice as a last resort.\n";
const CONTENTION: &str = "- Try to lower the disk contention. This is often caused by other disk intensive processes running in the same computer (including other Redis instances).\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_the_highest() {
        let mut m = LatencyMonitor::default();
        m.add_if_needed(0, "command", 500, 100);
        assert!(m.events().is_empty());
        m.add_if_needed(10, "command", 5, 100);
        assert!(m.events().is_empty());
        m.add_if_needed(10, "command", 20, 100);
        m.add_if_needed(10, "command", 30, 100);
        m.add_if_needed(10, "command", 15, 101);
        let (_, s) = m.series(b"command").unwrap();
        let all: Vec<(i64, u64)> = s.samples().map(|s| (s.time, s.latency)).collect();
        assert_eq!(all, vec![(100, 30), (101, 15)]);
        assert_eq!(s.max, 30);
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert_eq!(m.reset(None), 0);
    }

    #[test]
    fn graph_has_redis_header_and_rows() {
        let mut m = LatencyMonitor::default();
        m.add("command", 10, 100);
        m.add("command", 40, 101);
        let (name, s) = m.series(b"command").unwrap();
        let text = graph(name, s, 102);
        assert!(text.starts_with("command - high 40 ms, low 10 ms (all time high 40 ms)\n"));
        assert_eq!(text.lines().nth(1).unwrap().len(), 80);
        assert_eq!(text.lines().nth(2).unwrap(), " #");
        assert_eq!(text.lines().nth(5).unwrap(), "_|");
    }
}
