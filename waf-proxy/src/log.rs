//! Access and audit logs: JSON lines written in batches by a background thread.
//!
//! A request never waits for a log write: it formats its line and hands it to a bounded
//! queue with `try_send`. When the queue is full (the disk or the reader of stdout is
//! slower than the traffic) the line is dropped and counted; the writer reports drops on
//! stderr and in `/metrics` (`waf_proxy_log_dropped_total`). Memory is bounded by the
//! queue length times the line size.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::LogTarget;

/// Lines written per batch before a flush.
const BATCH: usize = 512;

/// A log destination with its background writer.
#[derive(Debug)]
pub struct LogSink {
    tx: Option<SyncSender<Vec<u8>>>,
    dropped: Arc<AtomicU64>,
}

impl LogSink {
    /// A sink that drops nothing and writes nothing.
    pub fn off() -> LogSink {
        LogSink {
            tx: None,
            dropped: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Starts the writer thread for `target` with a queue of `queue` lines.
    pub fn start(name: &str, target: &LogTarget, queue: usize) -> io::Result<LogSink> {
        let out: Box<dyn Write + Send> = match target {
            LogTarget::Off => return Ok(LogSink::off()),
            LogTarget::Stdout => Box::new(io::stdout()),
            LogTarget::File(p) => Box::new(OpenOptions::new().create(true).append(true).open(p)?),
        };
        let (tx, rx) = sync_channel(queue);
        let dropped = Arc::new(AtomicU64::new(0));
        let d = dropped.clone();
        let label = name.to_string();
        std::thread::Builder::new()
            .name(format!("log-{name}"))
            .spawn(move || write_loop(&label, rx, out, &d))?;
        Ok(LogSink {
            tx: Some(tx),
            dropped,
        })
    }

    /// Whether lines go anywhere (callers skip formatting when not).
    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues one line (without its newline); never blocks.
    pub fn send(&self, line: Vec<u8>) {
        if let Some(tx) = &self.tx {
            match tx.try_send(line) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Lines dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

fn write_loop(name: &str, rx: Receiver<Vec<u8>>, out: Box<dyn Write + Send>, dropped: &AtomicU64) {
    let mut out = io::BufWriter::with_capacity(64 * 1024, out);
    let mut reported = 0;
    while let Ok(first) = rx.recv() {
        let mut write = |line: Vec<u8>| {
            let _ = out.write_all(&line);
            let _ = out.write_all(b"\n");
        };
        write(first);
        for _ in 1..BATCH {
            match rx.try_recv() {
                Ok(line) => write(line),
                Err(_) => break,
            }
        }
        if let Err(e) = out.flush() {
            tracing::error!(log = name, error = %e, "log write failed");
            std::thread::sleep(Duration::from_millis(100));
        }
        let d = dropped.load(Ordering::Relaxed);
        if d != reported {
            tracing::warn!(
                log = name,
                dropped = d - reported,
                total = d,
                "log lines dropped: queue full"
            );
            reported = d;
        }
    }
}

/// The (year, month 1-12, day 1-31) of `days` since 1970-01-01 (H. Hinnant's
/// civil-from-days algorithm).
pub(crate) fn civil_from_days(days: u64) -> (i64, i64, i64) {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Formats `t` as RFC 3339 UTC with milliseconds (`2026-11-30T11:05:19.123Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(1_796_036_719_123);
        assert_eq!(rfc3339(t), "2026-11-30T11:05:19.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn full_queue_drops_and_counts() {
        let (tx, _rx) = sync_channel(1);
        let sink = LogSink {
            tx: Some(tx),
            dropped: Arc::new(AtomicU64::new(0)),
        };
        sink.send(b"a".to_vec());
        sink.send(b"b".to_vec());
        sink.send(b"c".to_vec());
        assert_eq!(sink.dropped(), 2);
    }
}
