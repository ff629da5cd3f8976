//! Compiles `tests/c/api_test.c` with the system C compiler (`-Werror`) against the
//! staticlib and the checked-in header, runs it, then runs it again under valgrind, which
//! must report no invalid access and no definite or indirect leak.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/deps`, where cargo put `libwaf_ffi.a` (built with this test; cargo
/// copies it up to `target/<profile>` only in `cargo build`).
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().expect("target/<profile>/deps").to_path_buf()
}

fn build_c_test() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = deps_dir().join("libwaf_ffi.a");
    assert!(lib.exists(), "{} is missing", lib.display());
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("api_test");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args([
            "-std=c11",
            "-g",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-I",
        ])
        .arg(manifest.join("include"))
        .arg(manifest.join("tests/c/api_test.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(status.success(), "compiling api_test.c failed");
    out
}

#[test]
fn c_api_test_passes_under_valgrind() {
    let exe = build_c_test();

    let out = Command::new(&exe).output().expect("run api_test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "api_test failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");

    let out = Command::new("valgrind")
        .args([
            "--error-exitcode=99",
            "--leak-check=full",
            "--errors-for-leak-kinds=definite,indirect",
            "--show-leak-kinds=definite,indirect",
        ])
        .arg(&exe)
        .output()
        .expect("valgrind is not installed (apt-get install -y valgrind; .ci/run does)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    assert!(out.status.success(), "valgrind found errors:\n{stderr}");
    assert!(stderr.contains("ERROR SUMMARY: 0 errors"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("all checks passed"));
}
