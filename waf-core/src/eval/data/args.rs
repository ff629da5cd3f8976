//! ARGS and its parts: query and body arguments, their names, their combined size.

use super::{Emit, Source, TxData, Visit};
use crate::variables::Variable;

impl TxData {
    /// [`TxData::visit`] for this family.
    pub(super) fn visit_args(&self, e: Emit<'_>, f: &mut Visit<'_>) {
        use Variable as V;
        let Emit { variable, .. } = e;
        match variable {
            V::Args => {
                e.pairs(&self.args_get, Source::ArgGetValue, f);
                e.pairs(&self.args_post, Source::ArgPostValue, f);
            }
            V::ArgsGet => e.pairs(&self.args_get, Source::ArgGetValue, f),
            V::ArgsPost => e.pairs(&self.args_post, Source::ArgPostValue, f),
            V::ArgsNames => {
                e.names(&self.args_get, Source::ArgGetName, f);
                e.names(&self.args_post, Source::ArgPostName, f);
            }
            V::ArgsGetNames => e.names(&self.args_get, Source::ArgGetName, f),
            V::ArgsPostNames => e.names(&self.args_post, Source::ArgPostName, f),
            V::ArgsCombinedSize => {
                let n: usize = self
                    .args_get
                    .iter()
                    .chain(&self.args_post)
                    .map(|p| p.key.len() + p.value.len())
                    .sum();
                e.number(n as i128, f)
            }
            _ => {}
        }
    }
}
