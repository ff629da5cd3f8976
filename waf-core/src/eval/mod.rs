//! Per-transaction evaluation: placeholder.

use std::time::SystemTime;

use crate::report::Report;
use crate::transaction::{ConnectionInfo, RequestHead, ResponseHead};
use crate::verdict::Verdict;
use crate::waf::Waf;

#[derive(Debug)]
pub(crate) struct TxState {
    #[allow(dead_code)]
    waf: Waf,
}

impl TxState {
    pub(crate) fn new(waf: Waf, _conn: &ConnectionInfo, _now: SystemTime) -> TxState {
        TxState { waf }
    }
    pub(crate) fn request_headers(&mut self, _head: &RequestHead<'_>) -> Verdict {
        Verdict::Continue
    }
    pub(crate) fn wants_request_body(&self) -> bool {
        true
    }
    pub(crate) fn request_body(&mut self, _chunk: &[u8]) -> Verdict {
        Verdict::Continue
    }
    pub(crate) fn request_end(&mut self) -> Verdict {
        Verdict::Continue
    }
    pub(crate) fn response_headers(&mut self, _head: &ResponseHead<'_>) -> Verdict {
        Verdict::Continue
    }
    pub(crate) fn wants_response_body(&self) -> bool {
        true
    }
    pub(crate) fn response_body(&mut self, _chunk: &[u8]) -> Verdict {
        Verdict::Continue
    }
    pub(crate) fn response_end(&mut self) -> Verdict {
        Verdict::Continue
    }
    pub(crate) fn finish(self) -> Report {
        Report::default()
    }
}
