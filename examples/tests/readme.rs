//! Runs README.md's `curl` lines for the middleware examples against the examples
//! themselves (the binaries `cargo test` builds beside this test), and checks the answer
//! each line's comment promises: the status, `JSON` (a JSON body and content type), and
//! `x-request-id` (the header). The proxy demo's lines are checked in waf-proxy's tests.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `curl` line of README and the example it belongs to.
struct Line {
    example: String,
    curl: String,
}

fn readme_lines() -> Vec<Line> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let mut current: Option<String> = None;
    let mut out = Vec::new();
    for l in readme.lines() {
        let l = l.trim();
        if l.starts_with("cargo run") {
            current = l
                .split_whitespace()
                .skip_while(|w| *w != "--example")
                .nth(1)
                .map(str::to_string);
        } else if l.starts_with("curl ") {
            if let Some(example) = &current {
                out.push(Line {
                    example: example.clone(),
                    curl: l.to_string(),
                });
            }
        }
    }
    out
}

fn example_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} missing: run this test with `cargo test -p waf-examples` (which builds the examples)",
        bin.display()
    );
    bin
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `curl` (with the port replaced) and returns its `-i` output.
fn run_curl(curl: &str, port: u16) -> String {
    let mut line = curl.to_string();
    for p in [":3000/", ":8080/"] {
        line = line.replace(p, &format!(":{port}/"));
    }
    let cmd = line.split(" # ").next().unwrap().trim().to_string();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{cmd} --max-time 10 -sS"))
        .output()
        .expect("curl runs (apt-get install curl)");
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn readme_curl_lines_give_the_answers_readme_promises() {
    let lines = readme_lines();
    assert!(
        lines.iter().any(|l| l.example == "axum_app")
            && lines.iter().any(|l| l.example == "actix_app"),
        "README has no curl lines for the middleware examples"
    );
    for example in ["axum_app", "actix_app"] {
        let port = free_port();
        let _app = Running(
            Command::new(example_bin(example))
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/crs.conf"))
                .arg(format!("127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        // CRS takes a moment to load.
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "{example} did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        for l in lines.iter().filter(|l| l.example == example) {
            let comment = l.curl.split(" # ").nth(1).unwrap_or("");
            let want: u16 = comment
                .split(|c: char| !c.is_ascii_digit())
                .find(|w| w.len() == 3)
                .and_then(|w| w.parse().ok())
                .unwrap_or_else(|| panic!("no status in the comment of {}", l.curl));
            let resp = run_curl(&l.curl, port);
            let status: u16 = resp
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            assert_eq!(status, want, "{}: {resp}", l.curl);
            let lower = resp.to_ascii_lowercase();
            if comment.contains("JSON") {
                assert!(
                    lower.contains("content-type: application/json"),
                    "{}: {resp}",
                    l.curl
                );
                let body = resp.split("\r\n\r\n").nth(1).unwrap_or("");
                assert!(body.trim_start().starts_with('{'), "{}: {resp}", l.curl);
            }
            if comment.contains("x-request-id") || comment.contains("request id") {
                assert!(lower.contains("x-request-id: "), "{}: {resp}", l.curl);
            }
        }
    }
}
