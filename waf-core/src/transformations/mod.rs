//! Transformations (`t:lowercase`, `t:urlDecodeUni`, ...): one file each.
//!
//! Placeholder: being written.

use std::borrow::Cow;

/// A transformation function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Transformation {
    /// `t:lowercase`.
    Lowercase,
}

impl Transformation {
    /// Looks a name up, ignoring ASCII case (`none` is not a transformation: the compiler
    /// handles it).
    pub(crate) fn from_name(name: &str) -> Option<Transformation> {
        name.eq_ignore_ascii_case("lowercase")
            .then_some(Transformation::Lowercase)
    }

    /// Applies the transformation; `Cow::Borrowed` means the input was left unchanged.
    pub(crate) fn apply(self, input: &[u8]) -> Cow<'_, [u8]> {
        match self {
            Transformation::Lowercase => {
                if input.iter().any(u8::is_ascii_uppercase) {
                    Cow::Owned(input.to_ascii_lowercase())
                } else {
                    Cow::Borrowed(input)
                }
            }
        }
    }
}
