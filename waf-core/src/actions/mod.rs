//! Actions: placeholder.
