//! Which values of a request the model scores, and scoring them all in one batch.

use super::features::{self, Scratch};
use super::model::Model;
use crate::actions::ctl::BodyProcessor;
use crate::eval::data::TxData;
use crate::limits::{DEFAULT_ML_BATCH_ENTRIES, DEFAULT_ML_WINDOW};
use crate::report::MlScore;

/// Where a scored value comes from; its name is made only for the one reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueRef {
    Filename,
    ArgGet(usize),
    ArgGetName(usize),
    ArgPost(usize),
    ArgPostName(usize),
    Cookie(usize),
    CookieName(usize),
    Header(usize),
    XmlText(usize),
    XmlAttr(usize),
    Body,
}

impl ValueRef {
    /// The ModSecurity-style name (`ARGS:q`, `REQUEST_HEADERS:User-Agent`).
    pub(crate) fn name(self, data: &TxData) -> String {
        let key = |pairs: &[crate::eval::data::Pair], i: usize| {
            pairs
                .get(i)
                .map(|p| String::from_utf8_lossy(&p.key).into_owned())
                .unwrap_or_default()
        };
        match self {
            ValueRef::Filename => "REQUEST_FILENAME".into(),
            ValueRef::ArgGet(i) => format!("ARGS:{}", key(&data.args_get, i)),
            ValueRef::ArgGetName(i) => format!("ARGS_NAMES:{}", key(&data.args_get, i)),
            ValueRef::ArgPost(i) => format!("ARGS:{}", key(&data.args_post, i)),
            ValueRef::ArgPostName(i) => format!("ARGS_NAMES:{}", key(&data.args_post, i)),
            ValueRef::Cookie(i) => format!("REQUEST_COOKIES:{}", key(&data.cookies, i)),
            ValueRef::CookieName(i) => {
                format!("REQUEST_COOKIES_NAMES:{}", key(&data.cookies, i))
            }
            ValueRef::Header(i) => format!("REQUEST_HEADERS:{}", key(&data.request_headers, i)),
            ValueRef::XmlText(_) | ValueRef::XmlAttr(_) => "XML:/*".into(),
            ValueRef::Body => "REQUEST_BODY".into(),
        }
    }
}

/// Calls `f` with every value the model is asked about (trivial ones included; the caller
/// skips those), in a fixed order.
pub(crate) fn each_value<'a>(data: &'a TxData, mut f: impl FnMut(ValueRef, &'a [u8])) {
    f(ValueRef::Filename, &data.filename);
    for (i, p) in data.args_get.iter().enumerate() {
        f(ValueRef::ArgGetName(i), &p.key);
        f(ValueRef::ArgGet(i), &p.value);
    }
    for (i, p) in data.args_post.iter().enumerate() {
        f(ValueRef::ArgPostName(i), &p.key);
        f(ValueRef::ArgPost(i), &p.value);
    }
    for (i, p) in data.cookies.iter().enumerate() {
        f(ValueRef::CookieName(i), &p.key);
        f(ValueRef::Cookie(i), &p.value);
    }
    for (i, p) in data.request_headers.iter().enumerate() {
        if !p.key.eq_ignore_ascii_case(b"cookie") {
            f(ValueRef::Header(i), &p.value);
        }
    }
    for (i, v) in data.xml_text.iter().enumerate() {
        f(ValueRef::XmlText(i), v);
    }
    for (i, v) in data.xml_attrs.iter().enumerate() {
        f(ValueRef::XmlAttr(i), v);
    }
    if matches!(data.body_processor, None | Some(BodyProcessor::Xml)) {
        f(ValueRef::Body, &data.request_body);
    }
}

/// A window waiting for the model: which value it belongs to, and where its sparse
/// features are in [`Batch::indices`] / [`Batch::values`].
struct Row {
    value: u32,
    start: u32,
    len: u32,
}

/// Padding entries worth one more model run. Measured (callgrind, `ml-profile`, this
/// model): a run costs ~20 k instructions fixed plus ~68 per entry, padding included, so
/// the break-even is ~300 entries; 160 was best on the bench's 10 KB JSON (1,751 k
/// instructions a transaction against 1,771 k at 300 and 2,493 k as one run) and costs a
/// simple GET 1.5 % against one run (137 k against 135 k).
const PAD_PER_RUN: usize = 160;

/// Entries a pooled [`Batch`] keeps room for (a request with more gives the rest back):
/// 8,192 entries are 96 KiB, so the pool holds at most ~6 MiB with its count tables.
const KEEP_ENTRIES: usize = 8192;

/// One request's scoring buffers, pooled by the [`Model`] (no allocation per request
/// once warm).
#[derive(Default)]
pub(crate) struct Batch {
    scratch: Scratch,
    indices: Vec<i64>,
    values: Vec<f32>,
    rows: Vec<Row>,
    padded_indices: Vec<i64>,
    padded_values: Vec<f32>,
    scores: Vec<f32>,
}

impl Batch {
    /// Empties the buffers for the next request, keeping at most [`KEEP_ENTRIES`] of room.
    pub(crate) fn recycle(&mut self) {
        self.indices.clear();
        self.values.clear();
        self.rows.clear();
        self.padded_indices.clear();
        self.padded_values.clear();
        self.scores.clear();
        self.indices.shrink_to(KEEP_ENTRIES);
        self.values.shrink_to(KEEP_ENTRIES);
        self.padded_indices.shrink_to(KEEP_ENTRIES);
        self.padded_values.shrink_to(KEEP_ENTRIES);
        self.rows.shrink_to(KEEP_ENTRIES / 8);
    }
}

/// Scores the request: every non-trivial value that is not cached, window by window, in
/// one model run (or more when [`DEFAULT_ML_BATCH_ENTRIES`] or padding says so).
pub(crate) fn score(model: &Model, data: &TxData) -> MlScore {
    // (where, bytes, score so far, whether the model must run for it)
    let mut values: Vec<(ValueRef, &[u8], f32, bool)> = Vec::new();
    let mut skipped = 0usize;
    let mut cached = 0usize;
    let mut to_run = 0usize;
    each_value(data, |r, v| {
        if features::is_trivial(v) {
            skipped += 1;
        } else if let Some(s) = model.cached(v) {
            cached += 1;
            values.push((r, v, s, false));
        } else {
            to_run += 1;
            values.push((r, v, 0.0, true));
        }
    });
    let mut error = None;
    let mut nrows = 0;
    if to_run > 0 {
        let mut batch = model.take_batch();
        let b = &mut batch;
        for (n, (_, v, _, run)) in values.iter().enumerate() {
            if !run {
                continue;
            }
            for w in features::windows(v, DEFAULT_ML_WINDOW) {
                let start = b.indices.len();
                features::extract_append(w, &mut b.scratch, &mut b.indices, &mut b.values);
                // Bounded by the request's limits (values, body size), far below u32::MAX.
                b.rows.push(Row {
                    value: n as u32,
                    start: start as u32,
                    len: (b.indices.len() - start) as u32,
                });
            }
        }
        nrows = b.rows.len();
        // Shortest rows first: a batch is padded to its longest row, so rows of similar
        // length go together, and a new run starts when padding the rest to the next row
        // would cost more than a run does (PAD_PER_RUN entries). A 10 KB JSON body (~85
        // rows of ~40 entries, plus a few headers of ~150) is then two runs instead of one
        // padded 4 times over (callgrind, benches/src/bin/ml-profile.rs).
        b.rows.sort_unstable_by_key(|r| r.len);
        let mut first = 0;
        while first < b.rows.len() {
            // As many rows as fit DEFAULT_ML_BATCH_ENTRIES once padded to the longest.
            let mut k = 0;
            let mut sum = 0;
            let mut last = first;
            while last < b.rows.len() {
                let len = b.rows[last].len as usize;
                let n = last - first;
                // Sorted: len >= k.
                if n > 0
                    && ((n + 1) * len > DEFAULT_ML_BATCH_ENTRIES
                        || (n + 1) * len - (sum + len) > PAD_PER_RUN + n * k - sum)
                {
                    break;
                }
                k = len;
                sum += len;
                last += 1;
            }
            let chunk = &b.rows[first..last];
            // Padding is (0, 0.0): a memset, then each row copied once.
            b.padded_indices.clear();
            b.padded_indices.resize(chunk.len() * k, 0);
            b.padded_values.clear();
            b.padded_values.resize(chunk.len() * k, 0.0);
            for (n, r) in chunk.iter().enumerate() {
                let (s, l) = (r.start as usize, r.len as usize);
                b.padded_indices[n * k..n * k + l].copy_from_slice(&b.indices[s..s + l]);
                b.padded_values[n * k..n * k + l].copy_from_slice(&b.values[s..s + l]);
            }
            b.scores.clear();
            if let Err(e) = model.run(
                &b.padded_indices,
                &b.padded_values,
                chunk.len(),
                k,
                &mut b.scores,
            ) {
                error = Some(e);
            }
            for (r, &s) in chunk.iter().zip(&b.scores) {
                let slot = &mut values[r.value as usize].2;
                *slot = slot.max(s);
            }
            first = last;
        }
        batch.recycle();
        model.put_batch(batch);
    }
    let mut best: Option<(f32, ValueRef)> = None;
    for &(r, v, s, run) in &values {
        if run && error.is_none() {
            model.remember(v, s);
        }
        if best.is_none_or(|(b, _)| s > b) {
            best = Some((s, r));
        }
    }
    let (score, var) = match best {
        Some((s, r)) => (s, r.name(data)),
        None => (0.0, String::new()),
    };
    MlScore {
        score,
        var,
        values: values.len(),
        skipped,
        cached,
        rows: nrows,
        error,
    }
}

/// Every value with its name and score (trivial ones with score 0), for the training
/// data dump and tests. Slow (one run and one name per value); not on the request path.
pub(crate) fn scored_values(model: Option<&Model>, data: &TxData) -> Vec<(String, Vec<u8>, f32)> {
    let mut out = Vec::new();
    let mut scratch = Scratch::default();
    let (mut wi, mut wv) = (Vec::new(), Vec::new());
    each_value(data, |r, v| {
        let mut score = 0.0f32;
        if let (Some(model), false) = (model, features::is_trivial(v)) {
            for w in features::windows(v, DEFAULT_ML_WINDOW) {
                features::extract(w, &mut scratch, &mut wi, &mut wv);
                let mut s = Vec::new();
                let _ = model.run(&wi, &wv, 1, wi.len(), &mut s);
                score = score.max(s.first().copied().unwrap_or(0.0));
            }
        }
        out.push((r.name(data), v.to_vec(), score));
    });
    out
}
