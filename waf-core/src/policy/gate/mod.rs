//! Gates: challenges, waiting rooms and email-code sign-in, each leaving a signed cookie.

pub(crate) mod token;
