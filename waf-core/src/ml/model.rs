//! [`Model`]: an ONNX model loaded and optimised once with tract, run once per request over
//! a batch of feature rows.
//!
//! As in tract's `onnx-mobilenet-v2` example: load, fix the input facts (`N` rows of `K`
//! entries, both symbolic), `into_optimized()`, `into_runnable()`, once; per request only the
//! input tensors are built and the plan run.
//!
//! # The model's interface
//!
//! The features are sparse (a short value hits a few dozen of the [`DIM`] buckets), so the
//! model takes them sparse, as two inputs of the same shape `[N, K]`:
//!
//! - `indices`, `int64`: feature indices, each below [`DIM`];
//! - `values`, `float`: their values; padding entries are `(0, 0.0)`;
//!
//! and gives one output, `[N]` floats in `[0, 1]`, the attack probability of each row. The
//! default model is a logistic regression written as `Gather(weights, indices) * values`,
//! `ReduceSum`, `+ bias`, `Sigmoid` (`train.py`, `export_onnx`).
//!
//! Why not a dense `[N, DIM]` input and skl2onnx's `LinearClassifier`: tract evaluates that
//! op at about 38 instructions per multiply-add (callgrind, 5 rows × 2048: 413 k
//! instructions a run), so a GET with five scored values cost ~400 k instructions, and a
//! 10 KB JSON body several million. Sparse, the cost is ~68 instructions per entry
//! (padding included; `Gather` ~45 of them, `Mul` ~15, `ReduceSum` ~8) plus a fixed ~20 k
//! per run (callgrind, tract 0.23.9). Measured and dropped (`ml-profile` with a model file):
//! `Reshape` + `GatherElements` + `Reshape` (+1 %: the two reshapes of symbolic shapes cost
//! what `GatherElements` saves), `Einsum("nk,nk->n")` (2.5 times the instructions), a
//! batched `MatMul` of `[N,1,K]` by `[N,K,1]` (2.6 times).
//!
//! Per run the plan's state (tract's `SimpleState`) comes from a pool instead of being
//! built and dropped, and the inputs are one allocation and a `memcpy` each.
//!
//! # Checks at load
//!
//! A model is refused with an [`MlError`] that says why when: it does not parse as ONNX;
//! its metadata `waf.features` (written by `train.py`) names another feature version or
//! width than this engine's ([`super::features::FEATURE_VERSION`], [`DIM`]); it does not have
//! exactly the two inputs above (rank 2, `int64` then `float`); it does not run on a probe
//! batch that uses the last feature index; or its output is not `[N]` floats.
//!
//! # The score cache
//!
//! tract's fixed cost per run (~20 k instructions, a few µs) is a large part of the
//! budget of a simple GET, and most values that are not trivial repeat from request to
//! request: `User-Agent`, `Accept`, `Accept-Language`, common paths. A `Model` keeps the
//! scores of short values ([`DEFAULT_ML_CACHE_VALUE_LEN`] bytes at most) in a bounded,
//! sharded cache ([`DEFAULT_ML_CACHE_ENTRIES`]); a request whose values are all cached or
//! trivial runs no model at all. A score depends only on the value's bytes, so the cache
//! cannot be poisoned; an attacker who sends many distinct short values only evicts
//! entries (a full shard is emptied), which costs later requests a model run, nothing else.
//! Clones of a `Model` share the cache; [`Model::without_cache`] turns it off.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tract_onnx::prelude::*;
use tract_onnx::tract_hir::infer::GenericFactoid;

use super::features::{DIM, FEATURE_VERSION};
use crate::limits::{DEFAULT_ML_CACHE_ENTRIES, DEFAULT_ML_CACHE_VALUE_LEN};

/// The model shipped with the crate (`waf-core/models/default.onnx`, trained by
/// `waf-core/models/train.py`; its report is `waf-core/models/REPORT.md`).
pub const DEFAULT_MODEL: &[u8] = include_bytes!("../../models/default.onnx");

/// The metadata key a model states its features in, and the value this engine needs.
const FEATURES_KEY: &str = "onnx.metadata_props.waf.features";

/// A model could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ml model {source_name}: {message}")]
pub struct MlError {
    source_name: String,
    message: String,
}

impl MlError {
    fn new(source_name: &str, message: impl Into<String>) -> MlError {
        MlError {
            source_name: source_name.to_string(),
            message: message.into(),
        }
    }
}

/// A loaded, optimised model. Cheap to clone (an `Arc`), `Send + Sync`.
#[derive(Clone)]
pub struct Model {
    plan: Arc<TypedRunnableModel>,
    cache: Option<Arc<ScoreCache>>,
    /// A request's scoring buffers (the feature scratch with its 32 KiB count table, the
    /// batch of entries, rows, scores) handed from request to request, so a request
    /// neither allocates nor grows them; at most [`SCRATCH_POOL`] kept.
    scratch: Arc<Mutex<Vec<super::values::Batch>>>,
    /// tract run states handed from run to run (at most [`SCRATCH_POOL`] kept): a state
    /// holds a slot per node and the ops' states, which `plan.run` would build and drop
    /// every time.
    states: Arc<Mutex<Vec<TypedSimpleState>>>,
    name: Arc<str>,
}

/// Most feature scratches a [`Model`] keeps for reuse (one per concurrent request).
const SCRATCH_POOL: usize = 64;

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("name", &self.name)
            .field("cache", &self.cache.is_some())
            .finish()
    }
}

impl Model {
    /// The embedded default model.
    pub fn default_model() -> Result<Model, MlError> {
        Model::from_bytes("default", DEFAULT_MODEL)
    }

    /// A model from an `.onnx` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Model, MlError> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| MlError::new(&name, e.to_string()))?;
        Model::from_bytes(&name, &bytes)
    }

    /// A model from the bytes of an `.onnx` file; `name` stands for it in errors.
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<Model, MlError> {
        let err =
            |what: &str, e: &dyn std::fmt::Display| MlError::new(name, format!("{what}: {e:#}"));
        let model = tract_onnx::onnx()
            .model_for_read(&mut &*bytes)
            .map_err(|e| err("not a loadable ONNX model", &e))?;
        let want = format!("v{FEATURE_VERSION} dim={DIM}");
        let stated = model.properties.get(FEATURES_KEY).and_then(|t| {
            let view = t.try_as_plain_ram().ok()?;
            view.to_scalar::<String>().ok().cloned()
        });
        match stated {
            Some(s) if s == want => {}
            Some(s) => {
                return Err(MlError::new(
                    name,
                    format!(
                        "the model was trained for features {s:?}; this engine makes {want:?} \
                         (retrain it with waf-core/models/train.py)"
                    ),
                ))
            }
            None => {
                return Err(MlError::new(
                    name,
                    format!(
                        "the model has no waf.features metadata; this engine needs a model \
                         for features {want:?} (waf-core/models/train.py writes it)"
                    ),
                ))
            }
        }
        let inputs = model.input_outlets().map_err(|e| err("inputs", &e))?.len();
        if inputs != 2 {
            return Err(MlError::new(
                name,
                format!(
                    "the model has {inputs} inputs; it must take two [N, K] tensors, \
                     int64 `indices` and float `values`"
                ),
            ));
        }
        for (i, ty) in [(0, i64::datum_type()), (1, f32::datum_type())] {
            let fact = model.input_fact(i).map_err(|e| err("input fact", &e))?;
            let rank = fact.shape.dims().count();
            let declared = match &fact.datum_type {
                GenericFactoid::Only(t) => Some(*t),
                GenericFactoid::Any => None,
            };
            if (!fact.shape.is_open() && rank != 2) || declared.is_some_and(|t| t != ty) {
                return Err(MlError::new(
                    name,
                    format!(
                        "input {i} is {declared:?} of rank {rank}; it must be {ty:?} [N, K] \
                         (0: int64 indices, 1: float values)"
                    ),
                ));
            }
        }
        let (n, k) = (model.sym("N"), model.sym("K"));
        let plan = model
            .with_input_fact(0, i64::fact([n.to_dim(), k.to_dim()]).into())
            .and_then(|m| m.with_input_fact(1, f32::fact([n.to_dim(), k.to_dim()]).into()))
            .and_then(|m| m.into_optimized())
            .and_then(|m| m.into_runnable())
            .map_err(|e| err("does not run on [N, K] int64 indices and float values", &e))?;
        let model = Model {
            plan,
            cache: Some(Arc::new(ScoreCache::new())),
            scratch: Arc::default(),
            states: Arc::default(),
            name: Arc::from(name),
        };
        // A probe: two rows, the second using the last index; the output must be [2].
        let mut scores = Vec::new();
        model
            .run(
                &[0, 0, 0, (DIM - 1) as i64],
                &[0.0, 0.0, 0.0, 1.0],
                2,
                2,
                &mut scores,
            )
            .map_err(|e| MlError::new(name, format!("fails on a probe batch: {e}")))?;
        Ok(model)
    }

    /// The same model without the score cache: every non-trivial value runs through the
    /// model (benchmarks of the cold path; hosts that want no shared state).
    pub fn without_cache(mut self) -> Model {
        self.cache = None;
        self
    }

    /// The name the model was loaded under (`default` or its path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Scoring buffers from the pool (or new ones).
    pub(crate) fn take_batch(&self) -> super::values::Batch {
        self.scratch
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default()
    }

    /// Gives scoring buffers back to the pool.
    pub(crate) fn put_batch(&self, scratch: super::values::Batch) {
        if let Ok(mut p) = self.scratch.lock() {
            if p.len() < SCRATCH_POOL {
                p.push(scratch);
            }
        }
    }

    /// The cached score of `value`, if it is cached.
    pub(crate) fn cached(&self, value: &[u8]) -> Option<f32> {
        self.cache.as_ref()?.get(value)
    }

    /// Remembers the score of `value` (if short enough to be cached).
    pub(crate) fn remember(&self, value: &[u8], score: f32) {
        if let Some(c) = &self.cache {
            c.put(value, score);
        }
    }

    /// Runs the model over `rows` rows of `k` entries (`indices.len() == values.len() ==
    /// rows * k`) and appends one score per row to `scores`. On an inference error (which a
    /// model that passed the load checks does not give) every row scores 0 and the error is
    /// returned for the report.
    pub(crate) fn run(
        &self,
        indices: &[i64],
        values: &[f32],
        rows: usize,
        k: usize,
        scores: &mut Vec<f32>,
    ) -> Result<(), String> {
        let start = scores.len();
        let result = self.try_run(indices, values, rows, k, scores);
        if result.is_err() {
            scores.truncate(start);
            scores.resize(start + rows, 0.0);
        }
        result
    }

    fn try_run(
        &self,
        indices: &[i64],
        values: &[f32],
        rows: usize,
        k: usize,
        scores: &mut Vec<f32>,
    ) -> Result<(), String> {
        let start = scores.len();
        let e = |e: TractError| format!("{e:#}");
        // `from_shape` is one allocation and a memcpy (`Tensor::zero` fills element by
        // element).
        let (i, v) = if k == 0 {
            // No entry at all (only the empty window has none): tract's ReduceSum divides
            // by the axis length, so give it one zero entry per row.
            (
                Tensor::from_shape(&[rows, 1], &vec![0i64; rows]).map_err(e)?,
                Tensor::from_shape(&[rows, 1], &vec![0f32; rows]).map_err(e)?,
            )
        } else {
            (
                Tensor::from_shape(&[rows, k], indices).map_err(e)?,
                Tensor::from_shape(&[rows, k], values).map_err(e)?,
            )
        };
        // tract panics on some bad inputs (an index past a Gather's table) instead of
        // returning an error; features never make such an index for a model that passed
        // the load probe, and this keeps a panic out of the host either way.
        let pooled = self.states.lock().ok().and_then(|mut p| p.pop());
        let mut state = match pooled {
            Some(s) => s,
            None => self.plan.spawn().map_err(e)?,
        };
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            state.run(tvec!(i.into(), v.into()))
        }));
        let outputs = match run {
            Ok(r) => {
                let outputs = r.map_err(e)?;
                // A run that succeeded has reset the state for the next turn (an error or
                // a panic may leave symbols resolved: that state is dropped).
                if let Ok(mut p) = self.states.lock() {
                    if p.len() < SCRATCH_POOL {
                        p.push(state);
                    }
                }
                outputs
            }
            Err(_) => return Err("the model panicked in tract".into()),
        };
        let out = outputs
            .first()
            .ok_or("the model gave no output")?
            .to_plain_array_view::<f32>()
            .map_err(|e| e.to_string())?;
        if out.len() != rows {
            return Err(format!(
                "the model gave {} scores of shape {:?} for {rows} rows; it must give [N]",
                out.len(),
                out.shape()
            ));
        }
        scores.extend(out.iter().copied().map(clamp));
        debug_assert_eq!(scores.len() - start, rows);
        Ok(())
    }
}

/// A probability as the engine uses it: in `[0, 1]`, NaN as 0.
fn clamp(x: f32) -> f32 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// Shards of the score cache: a lock each, so threads rarely wait on one another.
const SHARDS: usize = 16;

/// Scores of short values, bounded: [`DEFAULT_ML_CACHE_ENTRIES`] entries of at most
/// [`DEFAULT_ML_CACHE_VALUE_LEN`] bytes (about 0.7 MiB at worst with the defaults).
struct ScoreCache {
    shards: Vec<Mutex<HashMap<Box<[u8]>, f32>>>,
    state: std::collections::hash_map::RandomState,
}

impl ScoreCache {
    fn new() -> ScoreCache {
        ScoreCache {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            state: std::collections::hash_map::RandomState::new(),
        }
    }

    fn shard(&self, value: &[u8]) -> &Mutex<HashMap<Box<[u8]>, f32>> {
        use std::hash::BuildHasher;
        let h = self.state.hash_one(value) as usize;
        &self.shards[h % SHARDS]
    }

    fn get(&self, value: &[u8]) -> Option<f32> {
        if value.len() > DEFAULT_ML_CACHE_VALUE_LEN {
            return None;
        }
        let shard = self.shard(value).lock().ok()?;
        shard.get(value).copied()
    }

    fn put(&self, value: &[u8], score: f32) {
        if value.len() > DEFAULT_ML_CACHE_VALUE_LEN {
            return;
        }
        let Ok(mut shard) = self.shard(value).lock() else {
            return;
        };
        if shard.len() >= DEFAULT_ML_CACHE_ENTRIES / SHARDS {
            // Full: start the shard again rather than track recency (bounded, simple;
            // the common values come back within a few requests).
            shard.clear();
        }
        shard.insert(value.into(), score);
    }
}
