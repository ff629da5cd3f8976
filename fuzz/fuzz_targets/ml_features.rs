//! ML feature extraction (`waf_core::ml::features`): any bytes (empty, invalid UTF-8,
//! longer than the window) give defined features without a panic: indices distinct and
//! below `DIM`, values finite and in `[0, 1]`, the n-gram part of unit length, the same
//! result with a reused scratch as with a fresh one.
#![no_main]
use libfuzzer_sys::fuzz_target;
use waf_core::ml::features::{self, Scratch, DIM, NGRAM_BUCKETS};

fuzz_target!(|data: &[u8]| {
    let _ = features::is_trivial(data);
    let mut scratch = Scratch::default();
    let (mut idx, mut val) = (Vec::new(), Vec::new());
    let mut windows = 0;
    for w in features::windows(data, waf_core::limits::DEFAULT_ML_WINDOW) {
        windows += 1;
        assert!(w.len() <= waf_core::limits::DEFAULT_ML_WINDOW);
        features::extract(w, &mut scratch, &mut idx, &mut val);
        assert_eq!(idx.len(), val.len());
        let mut seen = vec![false; DIM];
        let mut norm = 0.0f64;
        for (&i, &v) in idx.iter().zip(&val) {
            let i = usize::try_from(i).expect("index is not negative");
            assert!(i < DIM, "index {i} out of range");
            assert!(!seen[i], "index {i} twice");
            seen[i] = true;
            assert!(v.is_finite() && v > 0.0 && v <= 1.0, "value {v} at {i}");
            if i < NGRAM_BUCKETS {
                norm += f64::from(v) * f64::from(v);
            }
        }
        assert!(w.len() < 1 || (norm - 1.0).abs() < 1e-4, "n-gram norm {norm}");
        assert_eq!(features::extract_dense(w).iter().filter(|&&x| x != 0.0).count(), idx.len());
    }
    assert!(windows >= 1);
});
