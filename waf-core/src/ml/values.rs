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
    value: usize,
    start: usize,
    end: usize,
}

/// Padding entries worth one more model run: tract's fixed cost per run (~22 k
/// instructions) over its cost per entry (~70), callgrind.
const PAD_PER_RUN: usize = 300;

/// Scratch for one request's scoring.
#[derive(Default)]
struct Batch {
    indices: Vec<i64>,
    values: Vec<f32>,
    padded_indices: Vec<i64>,
    padded_values: Vec<f32>,
    scores: Vec<f32>,
}

/// Scores the request: every non-trivial value that is not cached, window by window, in
/// one model run (or more when [`DEFAULT_ML_BATCH_ENTRIES`] says so).
pub(crate) fn score(model: &Model, data: &TxData) -> MlScore {
    // (where, bytes, score so far, whether the model must run for it)
    let mut values: Vec<(ValueRef, &[u8], f32, bool)> = Vec::new();
    let mut skipped = 0usize;
    let mut cached = 0usize;
    each_value(data, |r, v| {
        if features::is_trivial(v) {
            skipped += 1;
        } else if let Some(s) = model.cached(v) {
            cached += 1;
            values.push((r, v, s, false));
        } else {
            values.push((r, v, 0.0, true));
        }
    });
    let mut rows: Vec<Row> = Vec::new();
    let mut batch = Batch::default();
    let mut scratch = model.take_scratch();
    let (mut wi, mut wv) = (Vec::new(), Vec::new());
    for (n, (_, v, _, run)) in values.iter().enumerate() {
        if !run {
            continue;
        }
        for w in features::windows(v, DEFAULT_ML_WINDOW) {
            features::extract(w, &mut scratch, &mut wi, &mut wv);
            let start = batch.indices.len();
            batch.indices.extend_from_slice(&wi);
            batch.values.extend_from_slice(&wv);
            rows.push(Row {
                value: n,
                start,
                end: batch.indices.len(),
            });
        }
    }
    let mut error = None;
    // Shortest rows first: a batch is padded to its longest row, so rows of similar length
    // go together, and a new run starts when padding the rest to the next row would cost
    // more than a run does (PAD_PER_RUN entries). A 10 KB JSON body (600 rows of ~40
    // entries, plus a few headers of ~150) is then two runs instead of one padded 4 times
    // over (callgrind, benches/src/bin/ml-profile.rs). An ordinary GET stays one run.
    rows.sort_by_key(|r| r.end - r.start);
    let mut first = 0;
    while first < rows.len() {
        // As many rows as fit DEFAULT_ML_BATCH_ENTRIES once padded to the longest.
        let mut k = 0;
        let mut sum = 0;
        let mut last = first;
        while last < rows.len() {
            let len = rows[last].end - rows[last].start;
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
        let chunk = &rows[first..last];
        batch.padded_indices.clear();
        batch.padded_values.clear();
        for r in chunk {
            batch
                .padded_indices
                .extend_from_slice(&batch.indices[r.start..r.end]);
            batch
                .padded_values
                .extend_from_slice(&batch.values[r.start..r.end]);
            let pad = k - (r.end - r.start);
            batch.padded_indices.extend(std::iter::repeat_n(0, pad));
            batch.padded_values.extend(std::iter::repeat_n(0.0, pad));
        }
        batch.scores.clear();
        if let Err(e) = model.run(
            &batch.padded_indices,
            &batch.padded_values,
            chunk.len(),
            k,
            &mut batch.scores,
        ) {
            error = Some(e);
        }
        for (r, &s) in chunk.iter().zip(&batch.scores) {
            let slot = &mut values[r.value].2;
            *slot = slot.max(s);
        }
        first = last;
    }
    model.put_scratch(scratch);
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
        rows: rows.len(),
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
