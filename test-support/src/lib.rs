//! What several crates' integration tests need, once: a real SMTP server to read sign-in
//! codes from. Test-only (`publish = false`); each crate takes it as a dev-dependency.
#![warn(missing_docs)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// A real SMTP server (Python's `aiosmtpd`) writing every mail it receives into a
/// Maildir; killed on drop. `.ci/run` installs aiosmtpd; a machine without it fails the
/// test that starts one, saying what is missing.
pub struct Smtp {
    child: Child,
    /// The loopback port it listens on.
    pub port: u16,
    /// The Maildir mails are written to (`new/` holds them).
    pub maildir: PathBuf,
}

impl Drop for Smtp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Smtp {
    /// Starts the server with its Maildir under `dir` and waits until it accepts
    /// connections (at most 20 s).
    pub fn start(dir: &Path) -> Smtp {
        let port = free_port();
        let maildir = dir.join("mail");
        let child = Command::new("python3")
            .args(["-m", "aiosmtpd", "-n", "-l"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(&maildir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 is missing");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "aiosmtpd did not start (pip install aiosmtpd; .ci/run does)"
            );
            thread::sleep(Duration::from_millis(50));
        }
        Smtp {
            child,
            port,
            maildir,
        }
    }

    /// The mails received so far, oldest first.
    pub fn mails(&self) -> Vec<String> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.maildir.join("new"))
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        files
            .iter()
            .map(|f| std::fs::read_to_string(f).expect("read mail"))
            .collect()
    }

    /// The `n`th mail (1-based, by arrival), waiting for it up to 20 s. Blocks the
    /// thread: from an async test on a multi-thread runtime call it inside
    /// `tokio::task::block_in_place`.
    pub fn mail(&self, n: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(m) = self.mails().into_iter().nth(n - 1) {
                return m;
            }
            assert!(Instant::now() < deadline, "no mail number {n} arrived");
            thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The six-digit code in a sign-in mail's body (after "code is ").
pub fn code_in(mail: &str) -> String {
    let body = mail.split("\n\n").skip(1).collect::<Vec<_>>().join("\n\n");
    let at = body.find("code is ").expect("the mail names the code") + 8;
    body[at..at + 6].to_string()
}

/// A loopback port free at the time of the call.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

#[cfg(feature = "browser")]
pub mod browser;
