//! Finishing a transaction exactly once, when its host is done with the response.

use std::fmt;
use std::sync::Arc;

use crate::{Intervention, Report, Transaction};

/// Where a host sends every transaction's [`Report`].
pub type ReportSink = Arc<dyn Fn(&Report) + Send + Sync>;

/// Owns a [`Transaction`] until the response is done: when dropped (the response body
/// ended, or the client went away), it runs the last phase, adds what the host itself did
/// (an intervention such as a body over the host's limit, or a would-be one in
/// detection-only mode) when the engine did not record one, and sends the report to the
/// sink. Middleware keeps one per request, inside the response body.
pub struct Finisher {
    tx: Option<Transaction>,
    sink: ReportSink,
    /// An intervention the host carried out itself (a body over its limit).
    intervention: Option<Intervention>,
    /// One it would have carried out, in detection-only mode.
    would_intervene: Option<Intervention>,
}

impl Finisher {
    /// Holds `tx` until drop; the report then goes to `sink`.
    pub fn new(tx: Transaction, sink: ReportSink) -> Finisher {
        Finisher {
            tx: Some(tx),
            sink,
            intervention: None,
            would_intervene: None,
        }
    }

    /// The transaction, for the phases still to run.
    pub fn tx(&mut self) -> &mut Transaction {
        // `tx` is only taken in `drop`.
        self.tx.as_mut().expect("transaction present until drop")
    }

    /// Records an intervention the host carried out (the first one counts).
    pub fn set_intervention(&mut self, i: Intervention) {
        self.intervention.get_or_insert(i);
    }

    /// Records an intervention the host would have carried out, in detection-only mode (the
    /// first one counts).
    pub fn set_would_intervene(&mut self, i: Intervention) {
        self.would_intervene.get_or_insert(i);
    }
}

impl fmt::Debug for Finisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Finisher")
            .field("intervention", &self.intervention)
            .field("would_intervene", &self.would_intervene)
            .finish_non_exhaustive()
    }
}

impl Drop for Finisher {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let mut report = tx.finish();
            if report.intervention.is_none() {
                report.intervention = self.intervention.take();
            }
            if report.would_intervene.is_none() {
                report.would_intervene = self.would_intervene.take();
            }
            (self.sink)(&report);
        }
    }
}
