//! Placeholder: the SecLang parser (being written).

use std::path::Path;

use super::{Directive, ParseError};

pub(super) fn parse_str(_name: &str, _text: &str) -> Result<Vec<Directive>, ParseError> {
    Ok(Vec::new())
}

pub(super) fn parse_file(_path: &Path) -> Result<Vec<Directive>, ParseError> {
    Ok(Vec::new())
}
