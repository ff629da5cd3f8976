//! Uploaded files and the multipart body processor's parts and strict-validation flags.

use super::{key_of, Emit, Num, Source, TxData, VarName, Visit};
use crate::variables::Variable;

impl TxData {
    /// [`TxData::visit`] for this family.
    pub(super) fn visit_files(&self, e: Emit<'_>, f: &mut Visit<'_>) {
        use Variable as V;
        let Emit {
            variable,
            selector,
            excluded,
            ..
        } = e;
        match variable {
            V::Files => {
                for (i, file) in self.files.iter().enumerate() {
                    if selector.matches(&file.field) && !excluded(&file.field) {
                        f(
                            key_of(Source::FileName, i),
                            VarName {
                                variable,
                                key: Some(&file.field),
                            },
                            &file.filename,
                        );
                    }
                }
            }
            V::FilesNames => {
                for (i, file) in self.files.iter().enumerate() {
                    if selector.matches(&file.field) && !excluded(&file.field) {
                        f(
                            key_of(Source::FileField, i),
                            VarName {
                                variable,
                                key: Some(&file.field),
                            },
                            &file.field,
                        );
                    }
                }
            }
            V::FilesSizes => {
                for file in &self.files {
                    if selector.matches(&file.field) && !excluded(&file.field) {
                        f(
                            None,
                            VarName {
                                variable,
                                key: Some(&file.field),
                            },
                            Num::new(file.size as i128).as_bytes(),
                        );
                    }
                }
            }
            V::FilesCombinedSize => e.number(self.files.iter().map(|x| x.size as i128).sum(), f),
            V::FilesTmpNames | V::FilesTmpContent => {}
            V::MultipartPartHeaders => e.pairs(&self.part_headers, Source::PartHeader, f),
            V::MultipartFilename => e.list(&self.multipart_filenames, Source::FileName, f),
            V::MultipartName => e.list(&self.multipart_names, Source::FileField, f),
            V::MultipartBoundaryQuoted => e.flag(self.multipart.boundary_quoted, f),
            V::MultipartBoundaryWhitespace => e.flag(self.multipart.boundary_whitespace, f),
            V::MultipartCrlfLfLines => e.flag(self.multipart.crlf_lf_lines, f),
            V::MultipartDataAfter => e.flag(self.multipart.data_after, f),
            V::MultipartDataBefore => e.flag(self.multipart.data_before, f),
            V::MultipartFileLimitExceeded => e.flag(self.multipart.file_limit_exceeded, f),
            V::MultipartHeaderFolding => e.flag(self.multipart.header_folding, f),
            V::MultipartInvalidHeaderFolding => e.flag(self.multipart.invalid_header_folding, f),
            V::MultipartInvalidPart => e.flag(self.multipart.invalid_part, f),
            V::MultipartInvalidQuoting => e.flag(self.multipart.invalid_quoting, f),
            V::MultipartLfLine => e.flag(self.multipart.lf_line, f),
            V::MultipartMissingSemicolon => e.flag(self.multipart.missing_semicolon, f),
            V::MultipartUnmatchedBoundary => {
                e.number(i128::from(self.multipart.unmatched_boundary), f)
            }
            V::MultipartStrictError => e.flag(self.multipart.strict_error, f),
            _ => {}
        }
    }
}
