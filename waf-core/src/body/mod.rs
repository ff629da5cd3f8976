//! Request body processors (URLENCODED, MULTIPART, JSON, XML) and the cookie parser.
//!
//! Placeholder: being written.
