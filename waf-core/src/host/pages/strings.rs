//! Every sentence the pages show, in one table, so a deployment can translate or reword
//! them (`strings = { key = "text" }` in the gate config) without touching a template.
//!
//! A string may name a page variable as `{{name}}` (the address a code went to, the place
//! in the queue); it is filled in, escaped, when the page is rendered.

/// `(key, English text)`. Keys are what templates write as `{{key}}`.
pub(crate) const STRINGS: &[(&str, &str)] = &[
    ("lang", "en"),
    ("brand", "Protected by waf"),
    ("request_id_label", "Request id"),
    // Block page.
    ("block_title", "Access denied"),
    ("block_heading", "This request was blocked"),
    (
        "block_text",
        "The site's security service refused this request. It may have looked like an attack, or come from a network that is not allowed here.",
    ),
    (
        "block_help",
        "If you think this is a mistake, contact the site's owner and quote the request id below.",
    ),
    // Proof-of-work challenge.
    ("challenge_title", "Checking your browser"),
    ("challenge_heading", "Checking your browser"),
    (
        "challenge_text",
        "This takes a moment and happens once. You will be taken to the page automatically.",
    ),
    (
        "challenge_noscript",
        "Please turn on JavaScript and reload this page: the check runs in your browser.",
    ),
    (
        "challenge_unsupported",
        "Your browser cannot run the check (it needs a secure connection and a current browser).",
    ),
    ("challenge_failed", "The check did not succeed. Please try again."),
    // Cookie challenge.
    ("cookie_title", "Cookies required"),
    ("cookie_heading", "Please allow cookies"),
    (
        "cookie_text",
        "This site needs one small cookie to let you in. Allow cookies for this site, then try again.",
    ),
    ("cookie_retry", "Try again"),
    // Waiting room.
    ("queue_title", "You are in line"),
    ("queue_heading", "You are in line"),
    (
        "queue_text",
        "The site is busy right now, so visitors are let in in the order they arrived. Keep this page open: you will be taken in automatically.",
    ),
    ("queue_position_label", "Your place in line"),
    ("queue_refresh", "This page refreshes itself every {{refresh_secs}} seconds."),
    ("queue_noscript", "Reload this page now and then to move up."),
    // Sign-in.
    ("sign_in_title", "Sign in"),
    ("sign_in_heading", "Sign in to continue"),
    (
        "sign_in_text",
        "Enter your email address. We will send you a six-digit code to sign in with.",
    ),
    ("sign_in_email_label", "Email address"),
    ("sign_in_send", "Send me a code"),
    ("sign_in_not_allowed", "This address is not allowed to sign in here."),
    ("sign_in_invalid_email", "Please enter a valid email address."),
    ("sign_in_rate_limited", "Too many codes were asked for. Please wait a while and try again."),
    ("sign_in_send_failed", "The code could not be sent. Please try again later."),
    ("form_expired", "This form has expired. Please try again."),
    ("code_title", "Enter your code"),
    ("code_heading", "Check your email"),
    (
        "code_text",
        "If {{email}} may sign in here, a six-digit code is on its way. It is valid for {{code_minutes}} minutes.",
    ),
    ("code_label", "Six-digit code"),
    ("code_verify", "Sign in"),
    ("code_wrong", "That code is not right. Please check it and try again."),
    ("code_expired", "That code has expired. Please ask for a new one."),
    (
        "code_locked",
        "Too many wrong codes. Sign-in is locked for a while; please try again later.",
    ),
    ("signed_out_title", "Signed out"),
    ("signed_out_heading", "You are signed out"),
    ("signed_out_text", "Your session has ended on this browser."),
    ("signed_out_again", "Sign in again"),
    // The mail with the code.
    ("mail_subject", "Your sign-in code: {{code}}"),
    (
        "mail_body",
        "Your sign-in code is {{code}}\n\nIt is valid for {{code_minutes}} minutes. If you did not ask for it, ignore this message.\n",
    ),
];
