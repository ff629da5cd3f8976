//! The ML detector (`ml` feature): a model scores every inspected value of a request, in
//! detect mode.
//!
//! Without the `ml` feature only [`features`] (plain Rust, for tools and the fuzz target)
//! and the [`MlScore`] type are here; the model, tract-onnx and the scoring need it.
//!
//! # Overview
//!
//! Rules catch what someone wrote down; a model trained on attacks and benign traffic
//! scores near-misses and everything else. The score is one more signal: it is logged in
//! the [`Report`](crate::Report) ([`MlScore`]), hosts export it (`waf-proxy` as a histogram),
//! and rules read it, so a user can block on it or add it to the anomaly score:
//!
//! - SecLang: `TX:ML_SCORE`, the request's score in **per mille** (an integer `0..=1000`,
//!   since ModSecurity's numeric operators compare integers), and `TX:ML_VAR`, the name of
//!   the value that scored highest (`ARGS:q`, `REQUEST_HEADERS:User-Agent`, ...).
//! - Policy expressions: `ml.score`, the same per-mille integer.
//!
//! The engine never blocks on the score by itself.
//!
//! # When it runs
//!
//! Once per request, at the start of **phase 2**: after the request body has been
//! processed (so the values are decoded: arguments of the query and of urlencoded, JSON and
//! multipart bodies, XML text), before the phase-2 rules run. So `TX:ML_SCORE` is readable
//! by phase-2 rules (CRS's blocking evaluation, 949110, is a phase-2 rule: a rule that adds
//! to `tx.inbound_anomaly_score_pl1` must come before it, e.g. in `REQUEST-900`) and in
//! phases 3-5, and `ml.score` by the policy's late rules (the ones reading `waf.score`). A
//! request blocked in phase 1 is not scored. With the rule engine `Off`, nothing is
//! extracted and nothing is scored.
//!
//! # What is scored
//!
//! [`values`]: the path (`REQUEST_FILENAME`, `%`-decoded), the names and values of `ARGS`
//! (query and body), cookie names and values, request header values (but `Cookie`, which is
//! scored as cookies), XML text and attribute values, and the raw body when it is XML or no
//! processor parsed it. Each value is cut into windows of
//! [`DEFAULT_ML_WINDOW`](crate::limits::DEFAULT_ML_WINDOW) bytes; each window becomes a row
//! of [`features::DIM`] floats ([`features`]); all rows of the request go to the model in one
//! run (or one per [`DEFAULT_ML_BATCH_ROWS`](crate::limits::DEFAULT_ML_BATCH_ROWS) rows, which
//! bounds the tensor's memory). A value's score is its highest window's, the request's is its
//! highest value's.
//!
//! Values that are trivially benign ([`features::is_trivial`]: only letters, digits and
//! `_-.@`, or empty) are not sent to the model and score 0. Typical ids, numbers, tokens,
//! host names and e-mail addresses are such, and so a simple GET costs a few rows, not one
//! per value.
//!
//! # Performance
//!
//! A model run costs tract ~20 k instructions fixed plus ~68 per feature entry (padding
//! included); feature extraction ~100 instructions per byte of value; a value is ~1 entry
//! per byte (framed 3-grams, [`features`]). Measured (callgrind, engine with no rules,
//! `benches/src/bin/ml-profile.rs`), the detector adds to a simple GET 6.9 k instructions
//! when its values are cached and 72.6 k when none is (cold); to a 10 KB JSON body 180 k /
//! 513 k. Tables and the criterion figures: `waf-core/models/REPORT-SPEED.md`.

pub mod features;
#[cfg(feature = "ml")]
mod model;
#[cfg(feature = "ml")]
pub(crate) mod values;

#[cfg(feature = "ml")]
pub use model::{MlError, Model, DEFAULT_MODEL};

pub use crate::report::MlScore;

#[cfg(all(test, feature = "ml"))]
mod tests;
