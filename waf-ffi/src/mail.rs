//! The sign-in mail of C hosts, sent by the library: `waf_builder_smtp` and
//! `waf_engine_send_mail`.
//!
//! A C host such as nginx cannot wait for an SMTP relay in the thread that serves requests
//! (an nginx worker serves thousands of connections from one thread). So an engine built
//! with SMTP settings owns a [`MailSender`]: one thread of its own, started on the first
//! mail in each process (the engine may be built before the host forks its workers, and a
//! thread does not survive `fork`), which runs a current-thread tokio runtime and sends
//! with waf-tower's lettre-based [`SmtpMailer`], the same one the tower and actix hosts
//! use. Requests hand it a mail with a non-blocking `try_send` into a bounded queue:
//!
//! - queued: the visitor gets the ordinary "a code is on its way" page at once; when the
//!   relay then refuses the mail or times out, the failure is logged (one line on standard
//!   error, which nginx sends to its error log) and the visitor can ask for a new code;
//! - the queue full (more than [`WAF_MAIL_QUEUE`] mails waiting) or the thread not
//!   startable: the call fails, and the host answers with `waf_answer_mail_failed`.
//!
//! Neither the code nor the recipient is ever logged: the line names only what lettre says
//! about the relay's answer.
//!
//! # Bounds
//!
//! At most [`WAF_MAIL_QUEUE`] mails wait (each a few hundred bytes) and
//! [`WAF_MAIL_CONCURRENCY`] are sent at once, each bounded by the timeout of the
//! settings (default 10 s). Freeing the engine closes the queue and waits for the thread,
//! which sends what is already queued first: at most
//! `WAF_MAIL_QUEUE / WAF_MAIL_CONCURRENCY` timeouts.

use std::ffi::c_char;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::mpsc;
use waf_core::host::Mailer;
use waf_core::policy::gate::Mail;
use waf_tower::{SmtpMailer, SmtpSecurity};

use crate::error::set_last_error;
use crate::types::{utf8, WafStatus};

/// Most sign-in mails waiting to be sent per engine; past it `waf_engine_send_mail` fails
/// (the visitor sees the "could not send" page) instead of blocking.
pub const WAF_MAIL_QUEUE: usize = 64;

/// Most sign-in mails being sent at once per engine.
pub const WAF_MAIL_CONCURRENCY: usize = 4;

/// `waf_smtp.security`: no TLS (only for a relay on the same machine or a trusted network).
pub const WAF_SMTP_PLAIN: u32 = 0;
/// `waf_smtp.security`: plain, then STARTTLS, which the relay must offer (port 587).
pub const WAF_SMTP_STARTTLS: u32 = 1;
/// `waf_smtp.security`: TLS from the first byte (port 465).
pub const WAF_SMTP_TLS: u32 = 2;

/// The SMTP relay the library sends the sign-in codes through (`waf_builder_smtp`). The
/// strings are NUL-terminated UTF-8, borrowed for the call (the library copies them).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WafSmtp {
    /// The relay's host name or address.
    pub host: *const c_char,
    /// Its port (25, 587 or 465 usually).
    pub port: u16,
    /// `WAF_SMTP_PLAIN`, `WAF_SMTP_STARTTLS` or `WAF_SMTP_TLS`.
    pub security: u32,
    /// The sender: `address` or `Name <address>`.
    pub from: *const c_char,
    /// User name for SMTP AUTH, or NULL for none (then `password` must be NULL too).
    pub username: *const c_char,
    /// Password for SMTP AUTH, or NULL.
    pub password: *const c_char,
    /// Longest time one mail may take (connect, greeting, TLS, send), in milliseconds; 0
    /// for the default, 10 s.
    pub timeout_ms: u32,
}

/// Checks `s` and makes the mailer it describes (no connection is made).
///
/// # Safety
/// The pointers of `s` are NULL or NUL-terminated strings.
pub(crate) unsafe fn mailer(s: &WafSmtp) -> Result<SmtpMailer, WafStatus> {
    let invalid = |m: String| {
        set_last_error(m);
        WafStatus::InvalidArgument
    };
    // SAFETY: NUL-terminated or NULL per the contract (utf8 reports NULL).
    let host = unsafe { utf8(s.host, "host") }?;
    // SAFETY: as above.
    let from = unsafe { utf8(s.from, "from") }?;
    if host.is_empty() {
        return Err(invalid("smtp host is empty".into()));
    }
    if s.port == 0 {
        return Err(invalid("smtp port 0".into()));
    }
    let security = match s.security {
        WAF_SMTP_PLAIN => SmtpSecurity::DangerousPlain,
        WAF_SMTP_STARTTLS => SmtpSecurity::StartTls,
        WAF_SMTP_TLS => SmtpSecurity::Tls,
        other => return Err(invalid(format!("smtp security {other} is not 0, 1 or 2"))),
    };
    let credentials = match (s.username.is_null(), s.password.is_null()) {
        (true, true) => None,
        (false, false) => Some((
            // SAFETY: both non-null and NUL-terminated per the contract.
            unsafe { utf8(s.username, "username") }?.to_string(),
            // SAFETY: as above.
            unsafe { utf8(s.password, "password") }?.to_string(),
        )),
        _ => return Err(invalid("smtp username and password go together".into())),
    };
    let timeout = match s.timeout_ms {
        0 => waf_tower::DEFAULT_SMTP_TIMEOUT,
        ms => Duration::from_millis(ms.into()),
    };
    SmtpMailer::new(host, s.port, security, from, credentials)
        .map(|m| m.timeout(timeout))
        .map_err(invalid)
}

/// One engine's mail thread and its queue (see the module docs).
pub(crate) struct MailSender {
    mailer: SmtpMailer,
    running: Mutex<Option<Running>>,
}

/// The thread of one process.
struct Running {
    pid: u32,
    queue: mpsc::Sender<Mail>,
    thread: JoinHandle<()>,
}

impl MailSender {
    pub(crate) fn new(mailer: SmtpMailer) -> MailSender {
        MailSender {
            mailer,
            running: Mutex::new(None),
        }
    }

    /// Queues `mail` without blocking; the error says why it was not queued (no address,
    /// no code).
    pub(crate) fn send(&self, mail: Mail) -> Result<(), String> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let pid = std::process::id();
        if running.as_ref().is_some_and(|r| r.pid != pid) {
            // Started before a fork: that thread is not in this process, and its handle
            // and queue must not be touched here.
            std::mem::forget(running.take());
        }
        let r = match running.as_mut() {
            Some(r) => r,
            None => running.insert(self.start(pid)?),
        };
        match r.queue.try_send(mail) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(format!(
                "the mail queue is full ({WAF_MAIL_QUEUE} mails waiting)"
            )),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                *running = None;
                Err("the mail thread has stopped".into())
            }
        }
    }

    fn start(&self, pid: u32) -> Result<Running, String> {
        let (queue, rx) = mpsc::channel(WAF_MAIL_QUEUE);
        let mailer = self.mailer.clone();
        let thread = std::thread::Builder::new()
            .name("waf-mail".into())
            .spawn(move || run(mailer, rx))
            .map_err(|e| format!("cannot start the mail thread: {e}"))?;
        Ok(Running { pid, queue, thread })
    }
}

impl Drop for MailSender {
    fn drop(&mut self) {
        let running = self
            .running
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(r) = running {
            if r.pid == std::process::id() {
                drop(r.queue);
                let _ = r.thread.join();
            } else {
                std::mem::forget(r);
            }
        }
    }
}

/// The mail thread: sends what the queue brings, a few at a time, until the queue closes
/// and is empty.
fn run(mailer: SmtpMailer, mut rx: mpsc::Receiver<Mail>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log(&format!("cannot start the mail runtime: {e}"));
            return;
        }
    };
    rt.block_on(async move {
        let mut sending = tokio::task::JoinSet::new();
        while let Some(mail) = rx.recv().await {
            while sending.len() >= WAF_MAIL_CONCURRENCY {
                sending.join_next().await;
            }
            let send = mailer.send(mail);
            sending.spawn(async move {
                if let Err(e) = send.await {
                    log(&e);
                }
            });
        }
        while sending.join_next().await.is_some() {}
    });
}

/// One line on standard error (nginx's error log). `why` never holds the code or the
/// address (`Mailer`'s contract).
fn log(why: &str) {
    eprintln!("waf: [error] a sign-in mail was not sent: {why}");
}
