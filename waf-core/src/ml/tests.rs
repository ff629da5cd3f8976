//! The golden test (Rust features and tract scores equal the training script's) and the
//! model's load checks.

use super::features::{self, Scratch, DIM};
use super::model::Model;

/// `waf-core/models/golden.json`, written by `train.py` with the model it trained.
const GOLDEN: &str = include_str!("../../models/golden.json");

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("golden hex"))
        .collect()
}

#[test]
fn golden_features_match_the_script() {
    let golden: serde_json::Value = serde_json::from_str(GOLDEN).expect("golden.json parses");
    assert_eq!(
        golden["feature_version"].as_u64(),
        Some(u64::from(features::FEATURE_VERSION))
    );
    assert_eq!(golden["dim"].as_u64(), Some(DIM as u64));
    assert_eq!(
        golden["window"].as_u64(),
        Some(crate::limits::DEFAULT_ML_WINDOW as u64)
    );
    let model = Model::default_model().expect("the default model loads");
    let cases = golden["cases"].as_array().expect("cases");
    assert!(cases.len() >= 15, "golden file has {} cases", cases.len());
    let mut scratch = Scratch::default();
    let (mut idx, mut val) = (Vec::new(), Vec::new());
    let mut windows_checked = 0;
    for case in cases {
        let value = unhex(case["value_hex"].as_str().expect("value_hex"));
        let shown = String::from_utf8_lossy(&value[..value.len().min(40)]).into_owned();
        assert_eq!(
            features::is_trivial(&value),
            case["trivial"].as_bool().expect("trivial"),
            "{shown:?}"
        );
        let want = case["windows"].as_array().expect("windows");
        let got: Vec<&[u8]> = features::windows(&value, crate::limits::DEFAULT_ML_WINDOW).collect();
        assert_eq!(got.len(), want.len(), "windows of {shown:?}");
        for (w, want) in got.iter().zip(want) {
            features::extract(w, &mut scratch, &mut idx, &mut val);
            let mut ours: Vec<(i64, f32)> = idx.iter().copied().zip(val.iter().copied()).collect();
            ours.sort_by_key(|p| p.0);
            let theirs: Vec<(i64, f32)> = want["features"]
                .as_array()
                .expect("features")
                .iter()
                .map(|p| {
                    (
                        p[0].as_i64().expect("index"),
                        p[1].as_f64().expect("value") as f32,
                    )
                })
                .collect();
            // Identical: same indices, same f32 bits.
            assert_eq!(ours.len(), theirs.len(), "feature count of {shown:?}");
            for (a, b) in ours.iter().zip(&theirs) {
                assert_eq!(a.0, b.0, "feature index of {shown:?}");
                assert_eq!(a.1.to_bits(), b.1.to_bits(), "feature {} of {shown:?}", a.0);
            }
            let mut scores = Vec::new();
            model
                .run(&idx, &val, 1, idx.len(), &mut scores)
                .expect("the model runs");
            let want_score = want["score"].as_f64().expect("score");
            assert!(
                (f64::from(scores[0]) - want_score).abs() <= 1e-5,
                "score of {shown:?}: tract {} vs onnxruntime {want_score}",
                scores[0]
            );
            windows_checked += 1;
        }
    }
    assert!(
        windows_checked > cases.len(),
        "a case must span several windows"
    );
}

#[test]
fn batched_scores_equal_one_row_at_a_time() {
    let model = Model::default_model().expect("loads").without_cache();
    let inputs: [&[u8]; 4] = [
        b"' or 1=1--",
        b"hello world, a longer benign sentence than the others",
        b"<svg onload=alert(1)>",
        b"/index.html",
    ];
    let mut scratch = Scratch::default();
    let (mut idx, mut val) = (Vec::new(), Vec::new());
    let mut rows = Vec::new();
    let mut single = Vec::new();
    for v in inputs {
        features::extract(v, &mut scratch, &mut idx, &mut val);
        let mut s = Vec::new();
        model.run(&idx, &val, 1, idx.len(), &mut s).expect("runs");
        single.push(s[0]);
        rows.push((idx.clone(), val.clone()));
    }
    let k = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let (mut pi, mut pv) = (Vec::new(), Vec::new());
    for (i, v) in &rows {
        pi.extend(i.iter().copied().chain(std::iter::repeat_n(0, k - i.len())));
        pv.extend(
            v.iter()
                .copied()
                .chain(std::iter::repeat_n(0.0, k - v.len())),
        );
    }
    let mut batch = Vec::new();
    model
        .run(&pi, &pv, rows.len(), k, &mut batch)
        .expect("runs");
    for (a, b) in single.iter().zip(&batch) {
        assert!((a - b).abs() <= 1e-6, "{a} vs {b}");
    }
}

#[test]
fn models_that_do_not_fit_fail_at_load_saying_why() {
    let err = Model::from_bytes("junk", b"not onnx at all").unwrap_err();
    assert!(err.to_string().contains("junk"), "{err}");
    assert!(
        err.to_string().contains("not a loadable ONNX model"),
        "{err}"
    );
    // `dense-2056.onnx`: skl2onnx's dense LinearClassifier over 2056 inputs, made by
    // train.py's `testmodels` command: no `waf.features` metadata and the wrong inputs.
    let dense = include_bytes!("../../models/testdata/dense-2056.onnx");
    let err = Model::from_bytes("dense", dense).unwrap_err().to_string();
    assert!(err.contains("no waf.features metadata"), "{err}");
    // The same sparse graph as the default, stating another feature version.
    let other = include_bytes!("../../models/testdata/features-v99.onnx");
    let err = Model::from_bytes("v99", other).unwrap_err().to_string();
    assert!(
        err.contains("trained for features \"v99 dim=4096\""),
        "{err}"
    );
    // Right metadata, but one dense input.
    let wrong = include_bytes!("../../models/testdata/one-input.onnx");
    let err = Model::from_bytes("one", wrong).unwrap_err().to_string();
    assert!(err.contains("has 1 inputs"), "{err}");
    // Right metadata and inputs, but a weight table smaller than DIM: the probe fails.
    let small = include_bytes!("../../models/testdata/small-table.onnx");
    let err = Model::from_bytes("small", small).unwrap_err().to_string();
    assert!(err.contains("fails on a probe batch"), "{err}");
}

mod engine {
    use std::time::SystemTime;

    use crate::ml::Model;
    use crate::policy::PolicyConfig;
    use crate::{ConnectionInfo, Report, RequestHead, Waf};

    fn run(waf: &Waf, uri: &str, body: Option<(&str, &[u8])>) -> (Option<u16>, Report) {
        let conn = ConnectionInfo::new(
            "192.0.2.1:40000".parse().expect("addr"),
            "127.0.0.1:80".parse().expect("addr"),
        );
        let mut tx = waf.transaction(&conn, SystemTime::UNIX_EPOCH);
        let mut headers: Vec<(&[u8], &[u8])> = vec![
            (b"Host", b"shop.example"),
            (
                b"User-Agent",
                b"Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Firefox/128.0",
            ),
        ];
        if let Some((ct, _)) = body {
            headers.push((b"Content-Type", ct.as_bytes()));
        }
        let method: &[u8] = if body.is_some() { b"POST" } else { b"GET" };
        let head = RequestHead::new(method, uri.as_bytes(), b"HTTP/1.1", &headers);
        let mut status = tx.request_headers(&head).intervention().map(|i| i.status);
        if status.is_none() {
            if let Some((_, b)) = body {
                status = tx.request_body(b).intervention().map(|i| i.status);
            }
        }
        if status.is_none() {
            status = tx.request_end().intervention().map(|i| i.status);
        }
        (status, tx.finish())
    }

    fn waf_with(rules: &str) -> Waf {
        Waf::builder()
            .seclang("t", rules)
            .ml_model(Model::default_model().expect("loads"))
            .build()
            .expect("builds")
    }

    const BODY_ON: &str = "SecRuleEngine On\nSecRequestBodyAccess On\n\
        SecRule REQUEST_HEADERS:Content-Type \"@contains json\" \
        \"id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"\n";

    #[test]
    fn the_score_reaches_the_report_and_seclang_rules() {
        let rules = format!(
            "{BODY_ON}SecRule TX:ML_SCORE \"@ge 900\" \"id:10,phase:2,deny,status:418,\
             msg:'ml %{{TX.ML_SCORE}} %{{TX.ML_VAR}}'\"\n"
        );
        let waf = waf_with(&rules);
        let (status, report) = run(
            &waf,
            "/search?q=%3Cscript%3Ealert(document.cookie)%3C/script%3E",
            None,
        );
        let ml = report.ml.expect("scored");
        assert_eq!(status, Some(418), "{ml:?}");
        assert_eq!(ml.var, "ARGS:q");
        assert!(ml.score >= 0.9, "{ml:?}");
        let msg = report.matched_rules[0].message.clone().unwrap_or_default();
        assert_eq!(msg, format!("ml {} ARGS:q", ml.per_mille()));

        let (status, report) = run(&waf, "/search?q=red+shoes&page=2", None);
        let ml = report.ml.expect("scored");
        assert_eq!(status, None, "{ml:?}");
        assert!(ml.score < 0.5, "{ml:?}");
        // page=2 is trivially benign; q, the path and the User-Agent are scored.
        assert!(ml.skipped >= 2 && ml.values >= 3, "{ml:?}");
    }

    #[test]
    fn json_body_values_are_scored_in_phase_2() {
        let waf = waf_with(BODY_ON);
        let body = br#"{"user":{"name":"alice","bio":"' UNION SELECT password FROM users--"}}"#;
        let (_, report) = run(&waf, "/api/profile", Some(("application/json", body)));
        let ml = report.ml.expect("scored");
        assert!(ml.var.starts_with("ARGS:"), "{ml:?}");
        assert!(ml.var.ends_with("bio"), "{ml:?}");
        assert!(ml.score >= 0.9, "{ml:?}");
    }

    #[test]
    fn the_policy_reads_ml_score_after_the_request_phases() {
        let policy: PolicyConfig = toml::from_str(
            "[[rules]]\nname = \"ml\"\nexpression = 'ml.score >= 900'\naction = \"block\"\nstatus = 406\n",
        )
        .expect("policy parses");
        let waf = Waf::builder()
            .seclang("t", "SecRuleEngine DetectionOnly\n")
            .policy(policy)
            .ml_model(Model::default_model().expect("loads"))
            .build()
            .expect("builds");
        let (status, report) = run(&waf, "/a?x=..%2F..%2F..%2Fetc%2Fpasswd", None);
        // Detection only: the policy's block is recorded, not carried out.
        assert_eq!(status, None);
        assert_eq!(report.would_intervene.map(|i| i.status), Some(406));
        let (_, report) = run(&waf, "/a?x=hello+there", None);
        assert_eq!(report.would_intervene, None);
    }

    #[test]
    fn a_policy_reading_ml_score_without_a_model_warns_at_load() {
        let policy: PolicyConfig = toml::from_str(
            "[[rules]]\nname = \"ml\"\nexpression = 'ml.score >= 900'\naction = \"block\"\n",
        )
        .expect("policy parses");
        let waf = Waf::builder().policy(policy).build().expect("builds");
        assert!(
            waf.warnings()
                .iter()
                .any(|w| w.message.contains("ml.score")),
            "{:?}",
            waf.warnings()
        );
        assert!(waf_with("SecRuleEngine On\n").warnings().is_empty());
    }

    #[test]
    fn nothing_is_scored_without_a_model_or_with_the_engine_off() {
        let waf = Waf::builder()
            .seclang("t", "SecRuleEngine On\n")
            .build()
            .expect("builds");
        assert!(run(&waf, "/?q=%27+or+1%3D1--", None).1.ml.is_none());
        let off = waf_with("SecRuleEngine Off\n");
        assert!(run(&off, "/?q=%27+or+1%3D1--", None).1.ml.is_none());
    }

    #[test]
    fn the_cache_gives_the_same_scores_and_skips_the_model() {
        let waf = waf_with("SecRuleEngine On\n");
        let (_, first) = run(&waf, "/p?q=%3Cb%3Ehi%3C/b%3E", None);
        let (_, second) = run(&waf, "/p?q=%3Cb%3Ehi%3C/b%3E", None);
        let (a, b) = (first.ml.expect("scored"), second.ml.expect("scored"));
        assert_eq!(a.score, b.score);
        assert_eq!(a.var, b.var);
        assert_eq!(b.cached, b.values, "{b:?}");
        assert_eq!(b.rows, 0, "{b:?}");
        let cold = Waf::builder()
            .seclang("t", "SecRuleEngine On\n")
            .ml_model(Model::default_model().expect("loads").without_cache())
            .build()
            .expect("builds");
        let (_, c) = run(&cold, "/p?q=%3Cb%3Ehi%3C/b%3E", None);
        let c = c.ml.expect("scored");
        assert_eq!(c.score, a.score);
        assert_eq!(c.cached, 0);
    }

    #[test]
    fn long_invalid_and_many_values_get_a_score_and_never_panic() {
        let waf = waf_with(BODY_ON);
        let mut long = vec![b'a'; 5000];
        long.extend_from_slice(b"<script>alert(1)</script>");
        long.extend(std::iter::repeat_n(b'b', 5000));
        let (_, report) = run(&waf, "/upload", Some(("text/plain", &long)));
        let ml = report.ml.expect("scored");
        assert_eq!(ml.var, "REQUEST_BODY");
        assert!(ml.rows >= 10, "{ml:?}");
        let (_, report) = run(&waf, "/x", Some(("text/plain", b"\xff\xfe\xc3\x28\x00")));
        assert!(report.ml.expect("scored").error.is_none());
        // More rows than one run takes: several runs, every value scored.
        let mut form = String::new();
        for i in 0..900 {
            form.push_str(&format!(
                "f{i}=some+text+{i}+with+spaces+and+a+longer+tail+of+words+to+hash+here&"
            ));
        }
        form.push_str("last=%3Cimg+src%3Dx+onerror%3Dalert(1)%3E");
        let (_, report) = run(
            &waf,
            "/form",
            Some(("application/x-www-form-urlencoded", form.as_bytes())),
        );
        let ml = report.ml.expect("scored");
        assert_eq!(ml.var, "ARGS:last", "{ml:?}");
        assert!(ml.rows > 900, "{ml:?}");
        assert!(ml.error.is_none());
    }
}
